"""The G1 jump arms on the held-out evaluation protocol (docs/g1_jump_protocol.md).

    python benchmarks/g1_jump_arms.py --json                       # every committed arm
    python benchmarks/g1_jump_arms.py --arm stiff-bcg/seed0=runs/jump/stiff-bcg/s0 --runs 50

Every policy under ``results/g1/jump/<arm>/seed<k>/`` (or each ``--arm LABEL=PATH``) runs in
native MuJoCo (:func:`bcg.transfer.report.transfer`, the whole clip from frame 0) under two
conditions, with the same held-out seed (``--seed``, default 1000: seeds from 1000 on were
never used in development) so every policy meets the same initial states and draws:

* ``model``: model randomisation, latency, reset and observation noise, no pushes;
* ``push``: the same plus the training pushes.

Per policy and condition: success (no fall over the clip) with a 95% Wilson interval, foot
clearance and airborne time (mean and worst run), tracking error, the penetration gap to the
MJX training simulator, success in MJX (the same runs), and the policy's env steps and training
wall time. ``--json`` prints ``{"arms": {arm: [{"seed", "condition", "success", ...}, ...]}}``;
``--out`` writes it. ``--smoke``: one run of 0.2 s of the committed policy A, native only.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from pathlib import Path

ARMS_DIR = Path("results/g1/jump")
HELD_OUT_SEED = 1000  # development used transfer seeds 0-2; nothing below is tuned on this
CONDITIONS = {"model": {"pushes": False}, "push": {"pushes": True}}
SMOKE_POLICY = "results/g1/A_stage29_ff1"


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a success rate k / n (Wilson, 1927)."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def committed_arms(root: Path = ARMS_DIR) -> dict[str, Path]:
    """``{"ARM/seedK": path}`` of every ``root/ARM/seedK`` holding a run.json."""
    out = {}
    for p in sorted(root.glob("*/seed*/run.json")):
        out[f"{p.parent.parent.name}/{p.parent.name}"] = p.parent
    return out


def budget(path: Path) -> tuple[float | None, float | None]:
    """(env steps, training wall time in s) of the run's last metrics row."""
    f = Path(path) / "metrics.csv"
    if not f.exists():
        return None, None
    with open(f, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return None, None
    last = rows[-1]
    wall = last.get("wall_time") or last.get("wall_time_s")
    return float(last["env_steps"]), float(wall) if wall else None


def evaluate(path, condition: str, runs: int, seed: int, seconds=None, training_sim=True):
    """One row of the table: ``path``'s policy under ``condition``."""
    from bcg.transfer.config import TransferConfig
    from bcg.transfer.policy import load_policy
    from bcg.transfer.report import transfer

    cfg = TransferConfig(
        runs=runs,
        seed=seed,
        seconds=seconds,
        randomize=True,
        latency=True,
        training_sim=training_sim,
        **CONDITIONS[condition],
    )
    rep = transfer(load_policy(path), cfg)
    nat = rep["native"]["summary"]
    ok = nat["runs"] - nat["falls"]
    steps, wall = budget(path)
    row = {
        "condition": condition,
        "runs": nat["runs"],
        "success": ok / nat["runs"],
        "success_ci95": list(wilson(ok, nat["runs"])),
        "clearance_cm": nat["clearance_cm"],
        "clearance_cm_worst": nat["clearance_cm_min"],
        "airborne_s": nat["airborne_s"],
        "airborne_s_worst": nat["airborne_s_min"],
        "tracking_cm": nat["tracking_error_cm"],
        "gap_mm": rep.get("penetration_gap_mm"),
        "env_steps": steps,
        "wall_s": wall,
    }
    if "training_sim" in rep:
        mjx = rep["training_sim"]["summary"]
        row["mjx_success"] = (mjx["runs"] - mjx["falls"]) / mjx["runs"]
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arm", action="append", help="LABEL=PATH (default: every committed arm)")
    p.add_argument("--runs", type=int, default=50, help="runs per policy and condition")
    p.add_argument("--seed", type=int, default=HELD_OUT_SEED, help="held-out transfer seed")
    p.add_argument("--conditions", default="model,push", help="comma list of model, push")
    p.add_argument("--no-training-sim", action="store_true", help="native MuJoCo only")
    p.add_argument("--out", help="write the JSON here")
    p.add_argument("--json", action="store_true", help="print the JSON")
    p.add_argument("--smoke", action="store_true", help="policy A, 1 run of 0.2 s, native")
    a = p.parse_args(argv)
    conditions = [c.strip() for c in a.conditions.split(",") if c.strip()]
    bad = [c for c in conditions if c not in CONDITIONS]
    if bad:
        p.error(f"unknown condition(s) {bad}; choose from {', '.join(CONDITIONS)}")
    if a.runs < 1:
        p.error("--runs must be >= 1")
    seconds, training_sim = None, not a.no_training_sim
    if a.smoke:
        a.arm, a.runs, seconds, training_sim = [f"A/seed0={SMOKE_POLICY}"], 1, 0.2, False
    arms = dict(x.split("=", 1) for x in a.arm) if a.arm else committed_arms()
    if not arms:
        p.error(f"no arms: nothing under {ARMS_DIR}/ARM/seedK/ and no --arm")
    result: dict = {"protocol": "docs/g1_jump_protocol.md", "seed": a.seed, "arms": {}}
    for label, path in arms.items():
        arm, _, seed_part = label.partition("/")
        train_seed = int(m.group(1)) if (m := re.search(r"(\d+)$", seed_part)) else None
        for c in conditions:
            row = evaluate(path, c, a.runs, a.seed, seconds, training_sim)
            row = {"seed": train_seed, "transfer_seed": a.seed, **row}
            result["arms"].setdefault(arm, []).append(row)
            lo, hi = row["success_ci95"]
            print(
                f"{label} {c}: success {row['success']:.0%} [{lo:.0%}, {hi:.0%}] of "
                f"{row['runs']}, clearance {row['clearance_cm']:.1f} cm, airborne "
                f"{row['airborne_s']:.2f} s, tracking {row['tracking_cm']:.1f} cm",
                file=sys.stderr,
            )
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(result, indent=1))
    if a.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
