"""The gradient report's summed variance over several independent draws of the branch noise.

    python benchmarks/branch_key_spread.py --task hopper --keys 8 \\
        --variants '{"bcg": ["bcg", {}], "bcg_n0": ["bcg", {"normal_scale": 0.0}]}'

``bcg grad`` draws the bundles' offsets with one key (``--seed``). A first-order bundle whose
branch Jacobians are heavy-tailed then gives a summed variance that depends on that key by
orders of magnitude. This script computes the per-sample gradients of each variant (same
states, same objective as ``bcg grad`` at the task's defaults, float64) with keys 0..K-1 and
reports, per variant: the summed variance across the batch for each key, its median and mean
over the keys, the cosine of each key's mean gradient to the native-MuJoCo reference (central
finite differences of the Monte-Carlo mean over 4x the batch), and the bundled fraction.
``analytic`` is always included (it does not depend on the key).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

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
    p.add_argument("--task", default="hopper", help="built-in gradient-report task")
    p.add_argument("--stiffness", default="stiff")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--keys", type=int, default=8, help="branch-noise keys 0..K-1")
    p.add_argument(
        "--variants",
        default='{"bcg": ["bcg", {}]}',
        help="JSON {label: [estimator, parameters]}",
    )
    p.add_argument("--out", default=None, help="JSON file (default: print only)")
    a = p.parse_args(argv)
    print("command: python benchmarks/branch_key_spread.py " + " ".join(sys.argv[1:]), flush=True)
    variants = {"analytic": ["analytic", {}], **json.loads(a.variants)}
    problem = R.task_problem(tasks.get(a.task), a.stiffness, batch=a.batch)
    ref = R.problem_reference(problem)
    mx = problem.sim.mjx_model
    q0, v0, u = np.asarray(problem.qpos0), np.asarray(problem.qvel0), jnp.asarray(problem.ctrl)
    out = {"task": a.task, "stiffness": a.stiffness, "batch": a.batch, "keys": a.keys}
    rows = {}
    for label, (name, params) in variants.items():
        fn = R.chunked_gradient_function(problem, E.make(name, **params))
        svs, coss, bundled = [], [], []
        for k in range(1 if name == "analytic" else a.keys):
            G, _, stats = fn(mx, q0, v0, u, jax.random.PRNGKey(k))
            G = np.asarray(G)
            if not np.all(np.isfinite(G)):
                raise SystemExit(f"{label}: non-finite gradients with key {k}")
            svs.append(R.summed_variance(G))
            coss.append(R.cosine(G.mean(0), ref))
            bundled.append(float(np.sum(stats.bundled)) / (a.batch * problem.horizon))
        rows[label] = {
            "estimator": name,
            "params": params,
            "summed_variance": svs,
            "median": float(np.median(svs)),
            "mean": float(np.mean(svs)),
            "cosine": coss,
            "cosine_median": float(np.median(coss)),
            "bundled_fraction": float(np.mean(bundled)),
        }
        r = rows[label]
        print(
            f"{label:>14}: summed variance median {r['median']:.3g} (mean {r['mean']:.3g}; "
            f"per key {', '.join(f'{x:.3g}' for x in svs)}), cosine median "
            f"{r['cosine_median']:.4f}, bundled {r['bundled_fraction']:.1%}",
            flush=True,
        )
    out["variants"] = rows
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(out, indent=1))
        print(f"saved {a.out}")


if __name__ == "__main__":
    main()
