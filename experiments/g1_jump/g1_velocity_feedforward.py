"""Native runs of a trained G1 policy with the servo velocity feed-forward switched to other
values than it was trained with (``G1Tracking.velocity_feedforward``: residual targets
``q* + c (kd / kp) qdot* + s a``); would the policy's push reach a flight without the
damping brake?

    python experiments/g1_jump/g1_velocity_feedforward.py CKPT --vel-ff 0,0.5,1 [--runs 5] \\
        [--seed 0]

Runs are played as ``bcg transfer --no-training-sim`` plays them (same draws, latency, pushes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from bcg.transfer.config import TransferConfig
from bcg.transfer.model import native_model
from bcg.transfer.policy import load_policy
from bcg.transfer.runs import run_native

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import row_line, runs_row  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--vel-ff", default="0,1", help="comma list of c")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    a = p.parse_args(argv)
    policy = load_policy(a.path)
    cfg = TransferConfig(runs=a.runs, seed=a.seed, training_sim=False)
    m, _ = native_model(policy.env, policy.run.get("task"), cfg)
    rows = []
    for c in (float(x) for x in a.vel_ff.split(",")):
        env = dataclasses.replace(policy.env, velocity_feedforward=c)
        runs, _, _ = run_native(dataclasses.replace(policy, env=env), cfg, m)
        row = {"vel_ff": c, **runs_row(runs)}
        rows.append(row)
        print(f"vel_ff {c:g}: {row_line(row)}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"path": a.path, "seed": a.seed, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
