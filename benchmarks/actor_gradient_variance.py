"""The paper's gradient-variance metric on a SHAC run: summed variance, across the training
environments, of the per-environment actor gradients d L_e / d theta, per estimator.

    python benchmarks/actor_gradient_variance.py runs/learning_pogo/shac_analytic_s0_it60 \\
        --estimators '{"analytic": ["analytic", {}], "bcg": ["bcg", {"tau": 70.0}]}'

For every checkpoint of the run (or ``--steps``), the actor, critics, normalisers and the
environments' states are restored; each estimator then computes the per-environment gradients
of the SHAC actor loss from the same states with the same key
(:meth:`bcg.learners.shac.SHAC.per_env_actor_gradients`). Prints per checkpoint and estimator:
summed variance with a bootstrap 95% interval (4000 resamples), its ratio to analytic, the norm of
the mean gradient and the cosine of the mean gradient to analytic's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

import numpy as np  # noqa: E402

from bcg.diagnostics.report import bootstrap_interval, cosine, summed_variance  # noqa: E402
from bcg.learners import harness, registry  # noqa: E402
from bcg.learners.rollout import EnvState  # noqa: E402


def learner_state(learner, restored, restored_learner, key):
    """``learner``'s state with the restored networks, normalisers and environment states."""
    st = learner.init(key)
    data = restored_learner.estimator.state(restored.env.carry)
    env = EnvState(learner.estimator.init(learner.env.sim, data), *restored.env[1:])
    return st.__class__(
        **{
            **{f: getattr(st, f) for f in st.__dataclass_fields__},
            "actor": restored.actor,
            "critic": restored.critic,
            "target": restored.target,
            "obs_rms": restored.obs_rms,
            "ret_rms": restored.ret_rms,
            "ret": restored.ret,
            "env": env,
        }
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="SHAC run directory (bcg train --learner shac)")
    p.add_argument("--steps", help="checkpoint iterations, comma-separated (default: all)")
    p.add_argument(
        "--estimators",
        default='{"analytic": ["analytic", {}], "bcg": ["bcg", {"tau": 70.0}]}',
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="JSON output (default: RUN/actor_gradient_variance.json)")
    a = p.parse_args(argv)
    print("command: python " + " ".join(sys.argv), flush=True)
    run_dir = Path(a.run)
    run = json.loads((run_dir / "run.json").read_text())
    if run["learner"] != "shac":
        raise SystemExit(f"{run_dir} is a {run['learner']} run; this metric needs SHAC")
    _, base = registry.build(run)
    template = base.init(jax.random.PRNGKey(0))
    steps = (
        [int(s) for s in a.steps.split(",")]
        if a.steps
        else sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    )
    ests = json.loads(a.estimators)
    learners = {}
    for name, (est, params) in ests.items():
        _, lrn = registry.build({**run, "estimator": est, "estimator_params": params})
        learners[name] = (lrn, jax.jit(lrn.per_env_actor_gradients))
    key = jax.random.PRNGKey(a.seed)
    rows = []
    for step in steps:
        restored, *_ = harness.restore_checkpoint(run_dir, template, step)
        means, var_an = {}, None
        for name, (lrn, grads) in learners.items():
            st = learner_state(lrn, restored, base, key)
            G = grads(st, key)
            flat = np.concatenate(
                [np.asarray(x).reshape(x.shape[0], -1) for x in jax.tree_util.tree_leaves(G)], 1
            )
            ok = np.all(np.isfinite(flat), 1)
            flat = flat[ok]
            v = summed_variance(flat)
            var_an = v if var_an is None else var_an
            means[name] = flat.mean(0)
            lo, hi = bootstrap_interval(flat, seed=a.seed)
            row = {
                "iteration": step,
                "estimator": name,
                "summed_variance": v,
                "summed_variance_ci95": [lo, hi],
                "analytic_over_this": var_an / v if v > 0 else float("inf"),
                "mean_gradient_norm": float(np.linalg.norm(means[name])),
                "cosine_to_first": cosine(means[name], next(iter(means.values()))),
                "nan_envs": int((~ok).sum()),
            }
            rows.append(row)
            print(
                f"it {step:4d} {name:10s} summed var {v:.3g} [{lo:.2g}, {hi:.2g}] "
                f"ratio {row['analytic_over_this']:.3g} |mean g| {row['mean_gradient_norm']:.3g} "
                f"cos {row['cosine_to_first']:.3f} nan envs {row['nan_envs']}",
                flush=True,
            )
    out = Path(a.out) if a.out else run_dir / "actor_gradient_variance.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": vars(a), "rows": rows}, indent=1))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
