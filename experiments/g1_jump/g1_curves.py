"""Learning curves of the committed G1 jump policies, side by side, from their metrics.csv.

Each packed policy under ``results/g1/`` (``bcg pack``) keeps its run's ``metrics.csv`` up to
the packed iteration. A policy trained in stages (``--init-from``) continues the env-step and
wall-time counters of the stage it started from, so the stages of one policy join into one
curve. This script draws, for every curve given as ``LABEL=DIR[,DIR...]`` (stages in order),
the mean step reward *divided by that stage's maximum step reward* (stages may change the reward
weights) against env steps and against wall time, and writes ``training.png`` next to each
packed policy (:func:`bcg.learners.harness.plot_training`).

    .venv/bin/python experiments/g1_jump/g1_curves.py \\
        "A: stiff + SHAC + BCG=results/g1/A_stage1,results/g1/A_stage2" \\
        "C: stiff + SHAC=results/g1/C_partial" "B: soft + SHAC=results/g1/B" \\
        --out results/g1/curves.png

Wall time is as logged: runs that shared the 2 CPU cores with others ran slower, so compare
wall-clock curves only where the runs had the machine alike (docs/g1.md says which did).
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np


def stage_rows(run_dir: Path) -> tuple[list[dict], float]:
    """The metrics rows of a packed stage and its maximum step reward (from its env)."""
    from bcg.transfer.policy import load_policy

    with open(run_dir / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    env = load_policy(run_dir).env
    return rows, float(env.max_reward)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("curves", nargs="+", help="LABEL=DIR[,DIR...] (stages in order)")
    ap.add_argument("--out", default="results/g1/curves.png")
    args = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bcg.learners.harness import plot_training

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    summary = {}
    for i, spec in enumerate(args.curves):
        label, dirs = spec.split("=", 1)
        xs, ws, ys = [], [], []
        for d in dirs.split(","):
            d = Path(d)
            rows, top = stage_rows(d)
            plot_training(rows, d / "training.png", title=f"{label} ({d.name})")
            xs += [float(r["env_steps"]) for r in rows]
            ws += [float(r["wall_time"]) for r in rows]
            ys += [float(r["reward_mean"]) / top for r in rows]
        y = np.asarray(ys)
        k = min(10, len(y))
        smooth = np.convolve(y, np.ones(k) / k, mode="valid")
        for ax, x in ((axes[0], xs), (axes[1], ws)):
            ax.plot(x[k - 1 :], smooth, color=f"C{i}", label=label)
        summary[label] = {
            "env_steps": xs[-1],
            "wall_time_s": ws[-1],
            "last10": float(y[-k:].mean()),
        }
    for ax, xl in ((axes[0], "env steps"), (axes[1], "wall time (s)")):
        ax.set_xlabel(xl)
        ax.set_ylabel("mean step reward / max (10-iteration mean)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    print(json.dumps(summary, indent=1))
    print(f"saved {out}")


if __name__ == "__main__":
    main()
