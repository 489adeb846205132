"""Construction-time checks of numeric options: plain Python, errors that name the option.

Estimators, the simulation loader and the diagnostics validate their numeric options here, so
a bad value fails when the object is built (``E.make("bcg", tau=-1)``, ``bcg.sim.load(...,
substeps=0)``), not as a NaN or a shape error inside a compiled rollout. The module imports
nothing from bcg, so every layer can use it.
"""

from __future__ import annotations

import math
import numbers


def _bounds(above, at_least, at_most) -> str:
    if at_least is not None and at_most is not None:
        return f"in [{at_least:g}, {at_most:g}]"
    parts = []
    if above is not None:
        parts.append(f"> {above:g}")
    if at_least is not None:
        parts.append(f">= {at_least:g}")
    if at_most is not None:
        parts.append(f"<= {at_most:g}")
    return " and ".join(parts)


def check_number(
    name: str,
    value,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
    optional: bool = False,
    allow_inf: bool = False,
    hint: str = "",
) -> float | None:
    """``float(value)``, or ValueError naming ``name`` unless ``value`` is a real number (not a
    bool) with ``value > above``, ``value >= at_least`` and ``value <= at_most`` (each bound
    only where given), finite unless ``allow_inf``; ``None`` passes when ``optional``."""
    if value is None and optional:
        return None
    what = "a number" if allow_inf else "a finite number"
    rule = " ".join(
        s for s in ("None or" if optional else "", what, _bounds(above, at_least, at_most)) if s
    )
    if hint:
        rule += f" ({hint})"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be {rule}, got {value!r} ({type(value).__name__})")
    v = float(value)
    bad = (
        math.isnan(v)
        or (math.isinf(v) and not allow_inf)
        or (above is not None and not v > above)
        or (at_least is not None and not v >= at_least)
        or (at_most is not None and not v <= at_most)
    )
    if bad:
        raise ValueError(f"{name} must be {rule}, got {value!r}")
    return v


def check_int(name: str, value, minimum: int) -> int:
    """``int(value)``, or ValueError naming ``name`` unless ``value`` is an integer (not a
    bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"{name} must be an integer >= {minimum}, got {value!r} ({type(value).__name__})"
        )
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
