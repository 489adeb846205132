"""One G1 environment's actor gradient under several estimators, against finite differences.

    python experiments/g1_jump/g1_env_gradient.py --point initial --key 5 --env 30

Replays environment e of ``benchmarks/g1_policy_gradient.py``'s window alone (or with the other
environments ``--env`` lists): its start state and its rows of the window's exploration
noise (drawn for the whole batch, so the trajectory is the one it had in the batch). Its
actor loss L_e(theta) (SHAC's share, as in the batch) is differentiated with each estimator,
over ``--draws`` branch draws for the stochastic ones.
Against the objective: for K random unit directions d of the actor parameters, the central
difference D_h(d) = (L_e(theta + h d) - L_e(theta - h d)) / 2h (the analytic rollout; with
``forward="plain"`` BCG's rollout has the same values) compared with g . d. Over the K
directions, ``fd_cosine`` = cos((g . d_k)_k, (D_h(d_k))_k) and ``fd_norm_ratio`` =
|(g . d_k)_k| / |(D_h(d_k))_k| estimate the cosine and the norm ratio of g to the gradient of
the objective smoothed at scale h (random projections keep both). ``along_ratio_h`` is
D_h(g / |g|) / |g|: the loss's central-difference slope along the gradient's own direction
over the slope the gradient predicts (1 where the gradient holds at scale h).

``--objective batch`` differentiates the mean of the listed environments' losses instead
(``--env all``: the whole batch, i.e. SHAC's actor loss of the window), the gradient a SHAC
update uses. ``--estimators`` values are bcg parameters, or ``["estimator", {params}]`` for
another estimator (e.g. ``["analytic", {"env_clip": 3}]``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import jax

jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_point_arguments, learner_state, restore_point, strong  # noqa: E402

from bcg.learners import registry  # noqa: E402
from bcg.learners.rollout import rollout  # noqa: E402


class DrawKey:
    """``inner`` with its step keys folded with ``draw``: another branch draw, same rollout."""

    def __init__(self, inner, draw):
        self.inner, self.draw, self.name = inner, draw, inner.name

    def init(self, sim, data):
        return self.inner.init(sim, data)

    def state(self, carry):
        return self.inner.state(carry)

    def step(self, sim, carry, ctrl, key):
        return self.inner.step(sim, carry, ctrl, jax.random.fold_in(key, self.draw))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_point_arguments(p)
    p.add_argument(
        "--env",
        required=True,
        help="environment index, or a comma-separated list: the first is differentiated, the "
        "others share its batch (and BCG's slots); 'all': the whole batch",
    )
    p.add_argument(
        "--objective",
        choices=("env", "batch"),
        default="env",
        help="differentiate the first listed environment's loss, or the listed ones' mean",
    )
    p.add_argument(
        "--estimators",
        default='{"bcg_tau0": {"tau": 0.0}, "bcg_tau3w": {"tau": 981.22}}',
        help='JSON {label: bcg params or ["estimator", {params}]}; analytic is always included',
    )
    p.add_argument("--draws", type=int, default=4, help="draws per stochastic variant")
    p.add_argument("--directions", type=int, default=16)
    p.add_argument("--steps", default="1e-1,1e-2,1e-3", help="finite-difference steps h")
    p.add_argument("--out", help="JSON output")
    a = p.parse_args(argv)
    command = "python experiments/g1_jump/g1_env_gradient.py " + " ".join(sys.argv[1:])
    print("command:", command, flush=True)
    run_dir = Path(a.run)
    run = json.loads((run_dir / "run.json").read_text())
    _, lrn = registry.build({**run, "estimator": "analytic", "estimator_params": {}})
    estimators = {"analytic": lrn.estimator}
    for label, spec in json.loads(a.estimators).items():
        name, params = spec if isinstance(spec, list) else ("bcg", spec)
        est_run = {**run, "estimator": name, "estimator_params": params}
        estimators[label] = registry.build(est_run)[1].estimator
    key = jax.random.PRNGKey(a.seed)
    s = strong(learner_state(lrn, restore_point(lrn, a, key), lrn, key))
    E = s.env.step.shape[0]
    envs = np.arange(E) if a.env == "all" else np.array([int(x) for x in a.env.split(",")])
    sim, e, T = lrn.env.sim, int(envs[0]), lrn.cfg.horizon
    window_key = jax.random.fold_in(key, a.key)
    one = jax.tree_util.tree_map(lambda x: x[envs], s.env)
    data = lrn.estimator.state(one.carry)

    def policy(params, obs, t, k):
        mu, log_std = lrn.actor.apply(params, lrn._norm_obs(s.obs_rms, obs))
        eps = jax.random.normal(k, (E,) + mu.shape[1:], mu.dtype)[envs]
        return jnp.tanh(mu + jnp.exp(log_std) * eps)

    def loss(theta, est):
        env0 = one._replace(carry=est.init(sim, data))
        _, traj = rollout(lrn.env, est, policy, theta, env0, window_key, T)
        per_env = lrn.per_env_actor_objective(s, traj)
        # L_e as in the batch of E: the objective divides by h len(envs), the batch's by h E
        if a.objective == "batch":
            return jnp.sum(per_env) * len(envs) / E
        return per_env[0] * len(envs) / E

    theta, unravel = ravel_pytree(s.actor)
    f = jax.jit(lambda x: loss(unravel(x), lrn.estimator))
    rng = np.random.default_rng(0)
    dirs = rng.standard_normal((a.directions, theta.size)).astype(theta.dtype)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    steps = [float(h) for h in a.steps.split(",")]
    fd = {
        h: np.array([(f(theta + h * d) - f(theta - h * d)) / (2 * h) for d in dirs]) for h in steps
    }
    print(f"L_e {float(f(theta)):.6g}; |theta| {float(jnp.linalg.norm(theta)):.4g}")
    for h in steps:
        print(f"h {h:g}: |D_h| over {a.directions} directions {np.linalg.norm(fd[h]):.4g}")
    result = {"command": command, "env": e, "batch": envs.tolist(), "point": a.point}
    result["objective"] = a.objective
    result.update(key=a.key, estimators={})
    for label, est in estimators.items():
        draws = 1 if est.name == "analytic" else a.draws
        g_fn = jax.jit(
            lambda x, k, est=est: ravel_pytree(
                jax.grad(lambda th: loss(th, DrawKey(est, k)))(unravel(x))
            )[0]
        )
        rows = []
        for k in range(draws):
            g = np.asarray(g_fn(theta, k))
            proj = dirs @ g
            row = {"draw": k, "norm": float(np.linalg.norm(g))}
            for h in steps:
                c = float(proj @ fd[h] / (np.linalg.norm(proj) * np.linalg.norm(fd[h]) + 1e-30))
                row[f"fd_cosine_h{h:g}"] = c
                row[f"fd_norm_ratio_h{h:g}"] = float(
                    np.linalg.norm(proj) / (np.linalg.norm(fd[h]) + 1e-30)
                )
            unit = g / (np.linalg.norm(g) + 1e-30)
            for h in steps:  # the loss along the gradient's own direction: slope / |g|
                slope = float((f(theta + h * unit) - f(theta - h * unit)) / (2 * h))
                row[f"along_slope_h{h:g}"] = slope
                row[f"along_ratio_h{h:g}"] = slope / (row["norm"] + 1e-30)
            rows.append(row)
            print(label, json.dumps(row), flush=True)
        result["estimators"][label] = rows
    result["fd_norms"] = {f"{h:g}": float(np.linalg.norm(fd[h])) for h in steps}
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
