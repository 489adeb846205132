"""Plots of gradient reports (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_spread_vs_stiffness(reports: list[dict], path) -> Path:
    """Summed gradient variance (log scale, 95% bootstrap band) per estimator against the
    contact time constant (stiffer to the right), one report per stiffness."""
    path = Path(path)
    reports = sorted(reports, key=lambda r: -(r["timeconst"] or 0.0))
    names = list(reports[0]["estimators"])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    xs = list(range(len(reports)))
    positive = False
    for name in names:
        ys = [r["estimators"][name]["summed_variance"] for r in reports]
        lo = [r["estimators"][name]["summed_variance_ci95"][0] for r in reports]
        hi = [r["estimators"][name]["summed_variance_ci95"][1] for r in reports]
        ax.plot(xs, ys, marker="o", label=name)
        ax.fill_between(xs, lo, hi, alpha=0.2)
        positive = positive or any(y > 0 for y in ys + hi)
    if positive:  # log scale needs a positive value (all-zero variance, e.g. free fall: linear)
        ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels(
        [
            f"{r['stiffness']}\ntc={r['timeconst']:g}" if r["timeconst"] else r["stiffness"]
            for r in reports
        ]
    )
    ax.set_xlabel("contact stiffness (solref time constant, s)")
    ax.set_ylabel("summed gradient variance across batch")
    ax.set_title(f"gradient spread: {reports[0]['model']} (batch {reports[0]['batch']})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
