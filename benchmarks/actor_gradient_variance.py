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

With ``--fd-directions K`` a finite-difference reference is added: for K random unit directions
u_k in actor-parameter space, the central difference of the SHAC actor loss computed *forward
only* with the plain step, D_k = [L(theta + h u_k) - L(theta - h u_k)] / (2 h) (same states and
key), against each estimator's summed gradient projected on the same directions, u_k . g.
``cos_fd`` is the cosine between the vectors (u_k . g)_k and (D_k)_k; at a step h much larger
than the scale of the contact's sawtooth, D is the slope of the smoothed loss.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import jax  # noqa: E402

jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

import numpy as np  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

from bcg.diagnostics.report import bootstrap_interval, cosine, summed_variance  # noqa: E402
from bcg.learners import harness, registry  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import learner_state  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="SHAC run directory (bcg train --learner shac)")
    p.add_argument("--steps", help="checkpoint iterations, comma-separated (default: all)")
    p.add_argument(
        "--estimators",
        default='{"analytic": ["analytic", {}], "bcg": ["bcg", {"tau": 70.0}]}',
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fd-directions", type=int, default=0, help="K random directions (0: off)")
    p.add_argument("--fd-step", type=float, default=1e-2, help="h, in units of |theta|")
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
    plain = next(
        lrn for lrn, _ in learners.values() if lrn.estimator.__class__.__name__ == "PlainStep"
    )
    for step in steps:
        restored, *_ = harness.restore_checkpoint(run_dir, template, step)
        means, var_an = {}, None
        fd = None
        if a.fd_directions > 0:
            st0 = learner_state(plain, restored, base, key)
            flat0, unravel = ravel_pytree(st0.actor)
            loss = jax.jit(
                lambda f, st0=st0, unravel=unravel: plain.actor_loss(unravel(f), st0, key)[0]
            )
            rng = np.random.default_rng(a.seed)
            U = rng.normal(size=(a.fd_directions, flat0.size))
            U /= np.linalg.norm(U, axis=1, keepdims=True)
            h = a.fd_step * float(np.linalg.norm(flat0))
            fd = np.array(
                [(float(loss(flat0 + h * u)) - float(loss(flat0 - h * u))) / (2 * h) for u in U]
            )
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
            if fd is not None:
                row["cos_fd"] = cosine(U @ flat.sum(0), fd)
                row["fd_step"] = a.fd_step
                row["fd"] = fd.tolist()
                row["projected"] = (U @ flat.sum(0)).tolist()
            rows.append(row)
            print(
                f"it {step:4d} {name:10s} summed var {v:.3g} [{lo:.2g}, {hi:.2g}] "
                f"ratio {row['analytic_over_this']:.3g} |mean g| {row['mean_gradient_norm']:.3g} "
                f"cos {row['cosine_to_first']:.3f} nan envs {row['nan_envs']}"
                + (f" cos_fd {row['cos_fd']:.3f}" if fd is not None else ""),
                flush=True,
            )
    out = Path(a.out) if a.out else run_dir / "actor_gradient_variance.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": vars(a), "rows": rows}, indent=1))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
