"""Learning curves of the G1 jump arms (docs/g1_jump_protocol.md), against env steps and wall clock.

    python benchmarks/g1_jump_curves.py             # -> results/g1/jump/learning_curves.png
    python benchmarks/g1_jump_curves.py --arm stiff-bcg/seed0=runs/jump/stiff-bcg/s0 --out x.png

Runs come from ``results/g1/jump/ARM/seedK`` and ``results/g1/jump_in_progress/ARM/seedK``, or
from each ``--arm ARM/seedK=RUN_DIR``; an arm with a run short of its ``run.json`` iterations is
drawn dashed and labelled in progress. Four panels, one colour per arm:

* training return against env steps (log scale: PPO runs 10x the steps of the SHAC arms),
* the same against wall clock in hours (compiles included; runs on a shared 2-core CPU, so
  read it as an order of magnitude),
* training episode length against env steps (the clip is 156 control steps long: an arm that
  falls ends its episodes early),
* the bundled fraction of env-steps (BCG arms only).

Each curve is the mean over the arm's seeds, at every iteration that at least one seed has
reached, of a centred moving average over ``--smooth`` iterations; the band is the min-max over
seeds (drawn where two or more seeds have reached the iteration). The SHAC arms' return is
``episode_return`` (training episodes of the iteration), PPO's is ``eval_return`` (brax's
deterministic evaluation): the two are not the same measurement and the legend says so.
``--smoke`` plots the committed arms to a temporary file and prints what it drew.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import tempfile
from pathlib import Path

FINISHED = Path("results/g1/jump")
IN_PROGRESS = Path("results/g1/jump_in_progress")
DEFAULT_OUT = FINISHED / "learning_curves.png"
RETURN_COLUMNS = ("episode_return", "eval_return")  # SHAC's training return, PPO's evaluation
ARM_ORDER = ("stiff-bcg", "stiff-analytic", "soft-analytic", "ppo")


def find_runs(roots=(FINISHED, IN_PROGRESS)) -> dict[tuple[str, str], Path]:
    """``{(arm, seed_label): run_dir}`` of every ``ROOT/ARM/seedK`` with a metrics.csv."""
    return {
        (f.parent.parent.name, f.parent.name): f.parent
        for root in roots
        for f in sorted(Path(root).glob("*/seed*/metrics.csv"))
    }


def is_unfinished(run_dir: Path, cols: dict) -> bool:
    """Fewer metrics rows than the iterations its run.json asks for."""
    f = Path(run_dir) / "run.json"
    if not f.exists() or not cols.get("iteration"):
        return False
    return cols["iteration"][-1] < json.loads(f.read_text()).get("iterations", 0)


def read_metrics(run_dir: Path) -> dict[str, list[float]]:
    """metrics.csv as columns of floats (empty cells are NaN)."""
    with open(Path(run_dir) / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return {}
    return {
        k: [float(r[k]) if r.get(k) not in (None, "") else math.nan for r in rows] for k in rows[0]
    }


def moving_average(x: list[float], window: int) -> list[float]:
    """Centred moving average over ``window`` points (fewer at the ends), NaNs skipped."""
    h = max(window, 1) // 2
    out = []
    for i in range(len(x)):
        part = [v for v in x[max(0, i - h) : i + h + 1] if not math.isnan(v)]
        out.append(sum(part) / len(part) if part else math.nan)
    return out


def arm_curve(cols: list[dict], x_key: str, y_key: str, window: int):
    """Mean and min-max over seeds of the smoothed ``y_key`` at each iteration index reached by
    any seed: ``(x, mean, lo, hi, n)`` lists (x is the mean of the seeds' ``x_key``)."""
    series = [
        (c[x_key], moving_average(c[y_key], window)) for c in cols if x_key in c and y_key in c
    ]
    if not series:
        return None
    x, mean, lo, hi, n = [], [], [], [], []
    for i in range(max(len(s[0]) for s in series)):
        pts = [(s[0][i], s[1][i]) for s in series if i < len(s[0]) and not math.isnan(s[1][i])]
        if not pts:
            continue
        ys = [p[1] for p in pts]
        x.append(sum(p[0] for p in pts) / len(pts))
        mean.append(sum(ys) / len(ys))
        lo.append(min(ys))
        hi.append(max(ys))
        n.append(len(pts))
    return x, mean, lo, hi, n


def plot(runs: dict, out: Path, window: int = 10) -> list[str]:
    """Draw the four panels of ``runs`` (see :func:`find_runs`) to ``out``; returns one line
    per arm describing what was drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    arms: dict[str, list] = {}
    for (arm, seed), path in sorted(runs.items()):
        cols = read_metrics(path)
        arms.setdefault(arm, []).append((seed, cols, is_unfinished(path, cols)))
    order = [a for a in ARM_ORDER if a in arms] + sorted(a for a in arms if a not in ARM_ORDER)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    ax_steps, ax_wall, ax_len, ax_bundle = axes.ravel()
    lines = []
    for i, arm in enumerate(order):
        seeds = arms[arm]
        cols = [c for _, c, _ in seeds if c]
        if not cols:
            continue
        for c in cols:
            if "wall_time" in c:
                c["wall_hours"] = [t / 3600.0 for t in c["wall_time"]]
        y_key = next((k for k in RETURN_COLUMNS if k in cols[0]), None)
        unfinished = any(u for _, _, u in seeds)
        style = dict(color=f"C{i}", linestyle="--" if unfinished else "-")
        label = f"{arm} ({len(cols)} seed{'s' if len(cols) > 1 else ''}"
        label += ", in progress)" if unfinished else ")"
        if y_key == "eval_return":
            label += " [evaluation return]"
        panels = [
            (ax_steps, "env_steps", y_key),
            (ax_wall, "wall_hours", y_key),
            (ax_len, "env_steps", "episode_length"),
            (ax_bundle, "env_steps", "bundled_fraction"),
        ]
        for ax, x_key, key in panels:
            if key is None:
                continue
            curve = arm_curve(cols, x_key, key, window)
            if curve is None or (key == "bundled_fraction" and max(curve[1]) <= 0):
                continue
            x, mean, lo, hi, n = curve
            ax.plot(x, mean, label=label, **style)
            band = [j for j, k in enumerate(n) if k > 1]
            if band:
                pick = [x[j] for j in band]
                ax.fill_between(
                    pick,
                    [lo[j] for j in band],
                    [hi[j] for j in band],
                    color=style["color"],
                    alpha=0.2,
                    linewidth=0,
                )
        last = cols[0]
        steps = max(c["env_steps"][-1] for c in cols)
        lines.append(
            f"{arm}: {len(cols)} seed(s){' (in progress)' if unfinished else ''}, "
            f"up to {steps:,.0f} env steps, {y_key} last {last[y_key][-1]:.1f}"
            if y_key
            else f"{arm}: no return column"
        )
    ax_steps.set(xscale="log", xlabel="env steps", ylabel="return", title="return vs env steps")
    ax_wall.set(xlabel="wall clock (h)", ylabel="return", title="return vs wall clock")
    ax_len.set(xscale="log", xlabel="env steps", ylabel="episode length (control steps)")
    ax_len.axhline(156, color="k", linewidth=0.8, linestyle=":")
    ax_len.set_title("episode length (dotted: the whole clip)")
    ax_bundle.set(xscale="log", xlabel="env steps", ylabel="fraction of env-steps")
    ax_bundle.set_title("bundled fraction (BCG arms)")
    for ax in axes.ravel():
        if ax.get_xscale() == "log":
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(f"G1 jump arms: mean over seeds (band: min-max), {window}-iteration average")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arm", action="append", help="ARM/seedK=RUN_DIR (default: committed arms)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help=f"the PNG (default {DEFAULT_OUT})")
    p.add_argument("--smooth", type=int, default=10, help="moving-average window (iterations)")
    p.add_argument("--smoke", action="store_true", help="committed arms to a temporary file")
    a = p.parse_args(argv)
    if a.smooth < 1:
        p.error("--smooth must be >= 1")
    runs = find_runs()
    for spec in a.arm or []:
        label, sep, path = spec.partition("=")
        arm, _, seed = label.partition("/")
        if not sep or not arm or not seed:
            p.error(f"--arm {spec!r}: expected ARM/seedK=RUN_DIR")
        if not (Path(path) / "metrics.csv").exists():
            p.error(f"--arm {spec!r}: no metrics.csv in {path}")
        runs[(arm, seed)] = Path(path)
    if not runs:
        p.error(f"no runs: nothing under {FINISHED} or {IN_PROGRESS} and no --arm")
    out = Path(tempfile.mkdtemp()) / "curves.png" if a.smoke else Path(a.out)
    for line in plot(runs, out, a.smooth):
        print(line)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
