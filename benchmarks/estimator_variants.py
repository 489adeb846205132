"""Compare estimator variants (parameters) on one built-in task with the gradient report.

Prints, per variant: summed variance, cosine to the native-MuJoCo reference, the forward
objective mean J (how far the bundle mean moves the trajectory), the bundled fraction and the
mean gradient.

    python benchmarks/estimator_variants.py bouncing_ball stiff 12 \\
        '{"bcg": ["bcg", {}], "stein_p5mm": ["bcg-stein", {"sigma_p": 0.005}]}'

Arguments: task, stiffness, horizon in control steps ("-" for the task's), and a JSON object
{label: [estimator name, parameters]}. ``BATCH`` (environment variable) sets the batch (32).
"""

from __future__ import annotations

import json
import os
import sys

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

from bcg import estimators as E  # noqa: E402
from bcg.diagnostics.report import run_report, task_problem  # noqa: E402
from bcg.envs import tasks  # noqa: E402


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 4:
        raise SystemExit(__doc__)
    task, stiff = argv[0], argv[1]
    horizon = None if argv[2] == "-" else int(argv[2])
    variants = json.loads(argv[3])
    batch = int(os.environ.get("BATCH", 32))
    print("command: python benchmarks/estimator_variants.py " + " ".join(argv), flush=True)
    ests = {k: E.make(n, **p) for k, (n, p) in variants.items()}
    problem = task_problem(tasks.get(task), stiff, batch=batch, horizon=horizon)
    r = run_report(problem, ests, repeats=1, progress=lambda m: print("  " + m, flush=True))
    print("reference", [round(x, 3) for x in r["reference"]["gradient"][:8]])
    for k, e in r["estimators"].items():
        print(
            f"{task} {stiff} h{horizon} {k:24s} var {e['summed_variance']:10.3g} "
            f"cos {e['cosine_to_reference']:7.3f} J {e['objective_mean']:.4f} "
            f"bundled {e['bundled_fraction']:.3f} mean {[round(x, 2) for x in e['mean'][:6]]} "
            f"time {e['time_ratio_vs_analytic']:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
