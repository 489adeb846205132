"""Gradient-report benchmark behind the README table: every estimator on built-in tasks at soft
and stiff contact, printed as a markdown table (and saved as JSON + spread-vs-stiffness PNGs).

    python benchmarks/grad_report.py [--tasks bouncing_ball] [--batch 32] [--sweep soft,stiff]
                                     [--horizon 12] [--estimators analytic,bcg,bcg-stein]
                                     [--chunk-size 256]

``--chunk-size``: samples per compiled gradient call (default: bounded samples x rollouts per
call, bcg.diagnostics.chunking); the gradients do not depend on it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

from bcg import estimators as E  # noqa: E402
from bcg.diagnostics.plot import plot_spread_vs_stiffness  # noqa: E402
from bcg.diagnostics.report import run_report, task_problem  # noqa: E402
from bcg.envs import tasks  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", default="bouncing_ball")
    ap.add_argument("--sweep", default="soft,stiff")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--horizon", type=int, help="control steps (default: the task's)")
    ap.add_argument("--estimators", default="analytic,bcg,bcg-stein,global-bundle,zeroth-order")
    ap.add_argument("--chunk-size", type=int, help="samples per compiled gradient call")
    ap.add_argument("--out", default="results/bench")
    args = ap.parse_args(argv)
    if args.chunk_size is not None and args.chunk_size < 1:
        ap.error(f"--chunk-size must be >= 1, got {args.chunk_size}")
    print("command: python " + " ".join(sys.argv), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ests = {n: E.make(n) for n in args.estimators.split(",")}
    rows = []
    for name in args.tasks.split(","):
        task = tasks.get(name)
        reports = []
        for stiff in args.sweep.split(","):
            r = run_report(
                task_problem(task, stiff, batch=args.batch, seed=args.seed, horizon=args.horizon),
                ests,
                seed=args.seed,
                progress=lambda m: print("  " + m, flush=True),
                chunk_size=args.chunk_size,
            )
            reports.append(r)
            va = r["estimators"]["analytic"]["summed_variance"]
            for est, e in r["estimators"].items():
                rows.append((name, stiff, est, e, va))
                print(
                    f"{name} {stiff} {est}: var {e['summed_variance']:.3g} "
                    f"cos {e['cosine_to_reference']:.3f} time {e['time_ratio_vs_analytic']:.2f}",
                    flush=True,
                )
        (out / f"{name}.json").write_text(json.dumps(reports, indent=1))
        plot_spread_vs_stiffness(reports, out / f"{name}.png")
    print()
    print(
        "| task | contact | estimator | summed variance [95% CI] | analytic / this | "
        "cos to native ref | triggered | NaN | time / analytic |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, stiff, est, e, va in rows:
        lo, hi = e["summed_variance_ci95"]
        ratio = va / e["summed_variance"] if e["summed_variance"] > 0 else float("inf")
        print(
            f"| {name} | {stiff} | {est} | {e['summed_variance']:.3g} [{lo:.2g}, {hi:.2g}] | "
            f"{ratio:.3g} | {e['cosine_to_reference']:.3f} | "
            f"{100 * e['triggered_fraction']:.1f}% | {e['nan_count']} | "
            f"{e['time_ratio_vs_analytic']:.2f} |"
        )


if __name__ == "__main__":
    main()
