"""The scales of the G1 tracking reward (:mod:`bcg.envs.g1.tracking`): one mapping of the
weights ``w_k`` of its terms and the widths ``sigma_k`` of their Gaussian kernels.

    r = sum_k w_k exp(-e_k / sigma_k^2) + (the shaped terms: w_k share_k) - w_action_rate (rate)

(the terms and their errors are in the tracking module's docstring). Defaults are
BeyondMimic's (Liao et al., 2025) for the tracking terms; the terms marked "ours" are 0, i.e.
off, unless a run sets them.

A run sets a scale by its name, on the command line (``--param env.w_flight=40``), in a
recipe's ``[env]`` table, in a schedule phase, or as the env's ``scales`` mapping; every name
not given keeps its default, and the env records the complete mapping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

DEFAULT_SCALES: dict[str, float] = {
    # BeyondMimic's tracking terms and their kernel widths
    "w_root_pos": 0.5,
    "w_root_rot": 0.5,
    "w_body_pos": 1.0,
    "w_body_rot": 1.0,
    "w_joint": 1.0,
    "w_lin_vel": 0.5,
    "w_ang_vel": 0.5,
    "w_action_rate": 0.8,  # subtracted
    "sigma_pos": 0.3,  # m: root and body positions
    "sigma_rot": 0.4,  # rad: root and body orientations
    "sigma_joint": 0.3,  # rad
    "sigma_lin_vel": 1.0,  # m/s
    "sigma_ang_vel": 3.14,  # rad/s
    # ours, off by default
    "w_feet": 0.0,
    "sigma_feet": 0.1,  # m: lowest foot height
    "w_flight": 0.0,
    "w_takeoff": 0.0,
    "w_tuck": 0.0,
    "w_balance": 0.0,
    "sigma_balance": 0.1,  # m: capture point offset from the feet
    "w_stance": 0.0,
    # reward="add": the discriminator reward's weight
    "w_add": 1.0,
}


def is_scale(name: str) -> bool:
    """Whether ``name`` is a reward scale."""
    return name in DEFAULT_SCALES


def resolve_scales(given: Mapping[str, float] | None = None, **named: float) -> dict[str, float]:
    """The complete scales: ``DEFAULT_SCALES`` updated by ``given`` and then by ``named``.

    ValueError naming every unknown name, a name given twice with different values, a weight
    that is not a finite number >= 0 or a width that is not a finite number > 0."""
    given = dict(given or {})
    unknown = sorted(k for k in {*given, *named} if k not in DEFAULT_SCALES)
    if unknown:
        raise ValueError(
            f"the G1 reward has no scale(s) {', '.join(unknown)}; "
            f"valid: {', '.join(sorted(DEFAULT_SCALES))}"
        )
    both = sorted(k for k in named if k in given and given[k] != named[k])
    if both:
        raise ValueError(
            "reward scale(s) given twice, in scales and by name: "
            + ", ".join(f"{k} ({given[k]!r} and {named[k]!r})" for k in both)
        )
    out = {**DEFAULT_SCALES, **given, **named}
    for k, v in out.items():
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not number or not math.isfinite(v) or v < 0 or (k.startswith("sigma_") and v == 0):
            need = "> 0" if k.startswith("sigma_") else ">= 0"
            raise ValueError(f"reward scale {k} must be a finite number {need}, got {v!r}")
        out[k] = float(v)
    return out


def pop_scales(params: dict) -> dict[str, float]:
    """Remove the reward scales given by name from ``params`` (a factory's keyword arguments)
    and return them."""
    return {k: params.pop(k) for k in list(params) if is_scale(k)}
