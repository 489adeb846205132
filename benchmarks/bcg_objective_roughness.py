"""Is an estimator's rollout objective smooth in the parameters? Autodiff against central
differences of the same compiled forward rollout, one sample, several step sizes.

    python benchmarks/bcg_objective_roughness.py --task hopper --sample 9 --key 2

For one sample of a built-in gradient-report task (its states, objective and parameters as in
``bcg grad``, float64) and one key, prints J(theta), the autodiff gradient dJ/dtheta_i and
(J(theta + h e_i) - J(theta - h e_i)) / (2 h) for h in ``--steps`` and each i in ``--dims``
(default: the initial-velocity parameters), for ``analytic`` and each variant in
``--variants`` (JSON ``{label: [estimator, parameters]}``). A smooth objective gives the same
number at every small h; a bundle whose trigger switches or whose branches run stiff
transients does not.
"""

from __future__ import annotations

import argparse
import json
import os

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bcg import estimators as E  # noqa: E402
from bcg.diagnostics import report as R  # noqa: E402
from bcg.envs import tasks  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="hopper")
    p.add_argument("--stiffness", default="stiff")
    p.add_argument("--batch", type=int, default=32, help="the batch the sample is drawn from")
    p.add_argument("--sample", type=int, default=0)
    p.add_argument("--key", type=int, default=0, help="the estimator's key (bcg grad --seed)")
    p.add_argument("--variants", default='{"bcg": ["bcg", {}]}')
    p.add_argument("--dims", default=None, help="comma-separated parameter indices")
    p.add_argument("--steps", default="1e-7,1e-5,1e-3,1e-2")
    a = p.parse_args(argv)
    problem = R.task_problem(tasks.get(a.task), a.stiffness, batch=a.batch)
    s = a.sample
    if not 0 <= s < a.batch:
        raise SystemExit(f"--sample must be in [0, {a.batch}), got {s}")
    mx = problem.sim.mjx_model
    q0, v0 = jnp.asarray(problem.qpos0[s : s + 1]), jnp.asarray(problem.qvel0[s : s + 1])
    ctrl, key = jnp.asarray(problem.ctrl), jax.random.PRNGKey(a.key)
    k = len(problem.spec.vel_dofs)
    dims = range(k) if a.dims is None else [int(x) for x in a.dims.split(",")]
    steps = [float(x) for x in a.steps.split(",")]
    theta = jnp.zeros((1, problem.dim))
    variants = {"analytic": ["analytic", {}], **json.loads(a.variants)}
    for name, (est, params) in variants.items():
        fn = R.objective_function(problem, E.make(est, **params))

        def J(th, fn=fn):
            return fn(mx, th, q0, v0, ctrl, key, np.uint32(s))[0]

        f, g = jax.jit(J), jax.jit(jax.grad(J))
        G = np.asarray(g(theta))[0]
        print(f"{name}: J = {float(f(theta)):.6g}")
        for i in dims:
            e = jnp.zeros_like(theta).at[0, i].set(1.0)
            fd = [(float(f(theta + h * e)) - float(f(theta - h * e))) / (2 * h) for h in steps]
            print(
                f"  dJ/dtheta_{i}: autodiff {G[i]:.4g}; central differences "
                + ", ".join(f"h={h:g}: {d:.4g}" for h, d in zip(steps, fd, strict=True))
            )


if __name__ == "__main__":
    main()
