"""Plain-text table of a gradient report."""

from __future__ import annotations


def _fmt(x, spec=".3g"):
    if x is None:
        return "-"
    return format(x, spec)


def format_table(report: dict) -> str:
    """One row per estimator: summed variance (95% CI), cosine to reference, trigger, NaN, time."""
    head = (
        f"gradient report: {report['model']} ({report['stiffness']} contact, "
        f"tc={report['timeconst']}), batch {report['batch']}, horizon {report['horizon']}, "
        f"target body '{report['target_body']}', theta dim {report['theta_dim']}"
    )
    cols = ("estimator", "summed var", "95% CI", "cos(ref)", "trig", "bundled", "NaN", "time/an.")
    rows = []
    for name, r in report["estimators"].items():
        lo, hi = r["summed_variance_ci95"]
        rows.append(
            (
                name,
                _fmt(r["summed_variance"]),
                f"[{_fmt(lo)}, {_fmt(hi)}]",
                _fmt(r["cosine_to_reference"], ".3f"),
                _fmt(r["triggered_fraction"], ".3f"),
                _fmt(r["bundled_fraction"], ".3f"),
                str(r["nan_count"]),
                _fmt(r["time_ratio_vs_analytic"], ".2f"),
            )
        )
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths, strict=True))  # noqa: E731
    return "\n".join([head, line(cols), line(["-" * w for w in widths])] + [line(r) for r in rows])
