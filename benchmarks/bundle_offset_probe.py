"""What a bundle's offsets do to the limb, at the steps where the trigger fires.

    python benchmarks/bundle_offset_probe.py --task hopper --params '{"damping": 0.03}'

Along the plain (analytic) rollout of a built-in gradient-report task (its states and nominal
controls, float64), at every control step where ``bcg``'s trigger fires, for each hot group:

* the singular values of the group-centre Jacobian J restricted to the limb (m/rad or m/m);
* the requested Cartesian offsets dp (B draws) against the realised ones J dq, with
  dq = clamp(M dp), M = J^T (J J^T + lambda I)^-1: mean |x| and |z| of each (mm), and how
  often a joint offset sits at the ``max_dq`` clamp;
* the spectral norm of the control step's velocity Jacobian d qvel' / d qvel, at hot and at
  cold steps (does the step that bundles have an exploding Jacobian?).
"""

from __future__ import annotations

import argparse
import json
import sys

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import bcg.sim as bs  # noqa: E402
from bcg.diagnostics import report as R  # noqa: E402
from bcg.envs import tasks  # noqa: E402
from bcg.estimators import offsets  # noqa: E402
from bcg.estimators.bcg import BCG  # noqa: E402


def pct(x, q=(10, 50, 90)):
    return ", ".join(f"{v:.3g}" for v in np.percentile(x, q))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="hopper", help="built-in gradient-report task")
    p.add_argument("--stiffness", default="stiff")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--params", default="{}", help="JSON parameters of bcg")
    a = p.parse_args(argv)
    print("command: python benchmarks/bundle_offset_probe.py " + " ".join(sys.argv[1:]))
    problem = R.task_problem(tasks.get(a.task), a.stiffness, batch=a.batch)
    sim = problem.sim
    est = BCG(**json.loads(a.params))
    rule = est.trigger_rule

    def one(d, u, key):
        out, forces = bs.control_step(sim, d, u, per_substep=True)
        hot = rule(sim, out, forces)
        o = est.offsets(sim, out, hot, key)
        J = offsets.group_jacobians(sim, out) * hot.groups[:, None, None]  # (G, 3, nv)
        G = J.shape[0]
        realised = jnp.einsum("gjn,bn->bgj", J, o.dq)
        requested = o.dp.reshape(-1, G, 3) * hot.groups[None, :, None]
        sv = jnp.linalg.svd(J, compute_uv=False)
        vel_jac = jax.jacfwd(lambda v: bs.control_step(sim, d.replace(qvel=v), u)[0].qvel)(d.qvel)
        at_clamp = jnp.max(jnp.abs(o.dq)) >= est.max_dq * (1 - 1e-9) if est.max_dq else False
        return out, hot.groups, requested, realised, sv, jnp.linalg.norm(vel_jac, 2), at_clamp

    step = jax.jit(jax.vmap(one, in_axes=(0, None, 0)))
    d = jax.vmap(lambda q, v: bs.make_data(sim, qpos=q, qvel=v))(
        jnp.asarray(problem.qpos0), jnp.asarray(problem.qvel0)
    )
    sv, req, real, clamp, gain, hot_env = [], [], [], [], [], []
    for t, u in enumerate(np.asarray(problem.ctrl)):
        keys = jax.random.split(jax.random.PRNGKey(t), a.batch)
        d, *rest = step(d, jnp.asarray(u), keys)
        groups, rq, rl, s, g, c = (np.asarray(x) for x in rest)
        gain.append(g)
        hot_env.append(groups.any(-1))
        for b, k in zip(*np.nonzero(groups), strict=True):
            sv.append(s[b, k])
            req.append(rq[b, :, k])
            real.append(rl[b, :, k])
            clamp.append(c[b])
    gain, hot_env = np.concatenate(gain), np.concatenate(hot_env)
    print(f"{a.task}: {len(sv)} hot group-steps of {gain.size} env-steps")
    if sv:
        sv, req, real = np.array(sv), np.array(req), np.array(real)
        for i in range(sv.shape[1]):
            print(f"  singular value {i} of the limb Jacobian, pct 10/50/90: {pct(sv[:, i])}")
        for axis, n in ((0, "x"), (2, "z")):
            print(
                f"  mean |{n}| offset, requested {1e3 * np.abs(req[..., axis]).mean():.2f} mm, "
                f"realised {1e3 * np.abs(real[..., axis]).mean():.2f} mm"
            )
        print(f"  hot group-steps with a joint offset at max_dq: {np.mean(clamp):.1%}")
    for label, sel in (("hot", hot_env), ("cold", ~hot_env)):
        if sel.any():
            q = pct(gain[sel], (50, 90, 99, 100))
            print(f"  |d qvel'/d qvel|_2 at {label} env-steps, pct 50/90/99/max: {q}")


if __name__ == "__main__":
    main()
