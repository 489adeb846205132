"""Closed-loop policy-gradient report (bcg.diagnostics.policy_gradient) on a built-in task.

    python benchmarks/policy_gradient.py --task pogo --stiffness gated --batch 32 \\
        --estimators '{"analytic": ["analytic", {}], "bcg": ["bcg", {"tau": 70.0}]}'

Nominal policy: u = tanh(W [qpos, qvel] + b) with ``--theta`` (default for the pogo: thrust
= tanh(2 vz), which pumps hops). Prints per estimator the summed variance of the per-sample
gradients (bootstrap 95% interval), its ratio to analytic, the cosine to the native-MuJoCo
finite-difference reference (``--ref-batch`` states, default 4x the batch, common random
numbers), the largest |mean - reference| / standard error over the components (about 2 or less
for an unbiased estimator; the cosine alone cannot tell a noisy mean from a biased one), the mean
objective and the bundled fraction; writes JSON to ``--out``.

Large batches run in chunks of ``--chunk-size`` states per compiled call (default: states x
branches per call at most bcg.diagnostics.chunking.MAX_ROLLOUTS_PER_CALL, which keeps clear of
an XLA CPU hang seen on single calls of 2048 states x B = 30; see README, Troubleshooting).
Every state keeps the random numbers it has in one call, so the numbers do not depend on it.
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

import numpy as np  # noqa: E402

from bcg import estimators as E  # noqa: E402
from bcg.diagnostics.policy_gradient import PolicyProblem, report  # noqa: E402
from bcg.envs import tasks  # noqa: E402

DEFAULT_THETA = {"pogo": [0.0, 0.0, 2.0, 0.0, 0.0]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="pogo")
    p.add_argument("--stiffness", default="gated")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--horizon", type=int, help="control steps (default: the task's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--theta", help="comma-separated W (row-major) then b")
    p.add_argument("--ref-batch", type=int, help="reference states (default: 4x the batch)")
    p.add_argument("--fd-step", type=float, default=1e-2)
    p.add_argument(
        "--estimators",
        default='{"analytic": ["analytic", {}], "bcg": ["bcg", {}], '
        '"bcg_tau70": ["bcg", {"tau": 70.0}]}',
    )
    p.add_argument(
        "--chunk-size",
        type=int,
        help="states per compiled gradient call (default: bounded states x branches per call)",
    )
    p.add_argument("--out", default="results/policy_gradient")
    a = p.parse_args(argv)
    print("command: python " + " ".join(sys.argv), flush=True)
    task = tasks.get(a.task)
    sim = task.load(a.stiffness)
    if a.theta:
        theta = np.array([float(x) for x in a.theta.split(",")])
    elif a.task in DEFAULT_THETA:
        theta = np.array(DEFAULT_THETA[a.task])
    else:
        theta = np.zeros(sim.nu * (sim.nq + sim.nv + 1))
    q, v = task.initial_states(sim, a.batch, a.seed)
    qr, vr = task.initial_states(sim, a.ref_batch or 4 * a.batch, a.seed + 7919)
    prob = PolicyProblem(sim, q, v, theta, a.horizon or task.horizon)
    ests = {k: E.make(n, **kw) for k, (n, kw) in json.loads(a.estimators).items()}

    def progress(name, e):
        print(
            f"{name}: summed variance {e['summed_variance']:.3g}, "
            f"cos {e['cosine_to_reference']:.3f}",
            flush=True,
        )

    if a.chunk_size is not None and a.chunk_size < 1:
        p.error(f"--chunk-size must be >= 1, got {a.chunk_size}")
    rep = report(
        prob,
        ests,
        (qr, vr),
        seed=a.seed,
        h=a.fd_step,
        on_result=progress,
        chunk_size=a.chunk_size,
    )
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{a.task}_{a.stiffness}.json"
    path.write_text(json.dumps({"settings": vars(a), **rep}, indent=1))
    print(f"reference {np.round(rep['reference'], 3).tolist()}")
    va = rep["estimators"].get("analytic", {}).get("summed_variance", np.nan)
    ref = np.asarray(rep["reference"])
    print(
        "| estimator | summed variance [95% CI] | analytic / this | cos to native ref |"
        " max abs(mean - ref) / SE | mean J | bundled | NaN |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, e in rep["estimators"].items():
        lo, hi = e["summed_variance_ci95"]
        z = np.max(np.abs(np.asarray(e["mean"]) - ref) / np.asarray(e["standard_error"]))
        print(
            f"| {name} | {e['summed_variance']:.3g} [{lo:.2g}, {hi:.2g}] | "
            f"{va / e['summed_variance']:.3g} | {e['cosine_to_reference']:.3f} | {z:.1f} | "
            f"{e['objective_mean']:.4f} | {100 * e['bundled_fraction']:.1f}% | {e['nan_count']} |"
        )
        print(f"|   mean {np.round(e['mean'], 4).tolist()} |")
    print(f"saved {path}")


if __name__ == "__main__":
    main()
