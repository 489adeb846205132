"""Gradient estimators for rollouts through contact.

Two levels, one registry (:func:`make`):

* step level (``analytic``, ``bcg``, ``bcg-stein``, ``global-bundle``): transforms of the
  control step used
  inside :func:`bcg.estimators.rollout.rollout`;
* objective level (``zeroth-order``, ``alpha-order``): transforms of the whole rollout
  objective theta -> J(theta), wrapped in :class:`ObjectiveLevel`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from bcg.estimators import smoothing
from bcg.estimators.bcg import BCG, BundleCarry
from bcg.estimators.rollout import PlainStep, rollout
from bcg.estimators.stats import StepStats
from bcg.estimators.trigger import Trigger

NAMES = ("analytic", "bcg", "bcg-stein", "global-bundle", "zeroth-order", "alpha-order")

DEFAULTS = {
    "analytic": {},
    "bcg": {"num_branches": 10, "horizon": 2, "sigma_p": 0.01, "sigma_v": 0.02, "tau": "auto"},
    "bcg-stein": {
        "num_branches": 10,
        "horizon": 2,
        "sigma_p": 0.01,
        "sigma_v": 0.02,
        "tau": "auto",
        "gradient": "stein",
        "antithetic": True,
    },
    "global-bundle": {"sigma": 0.01, "num_samples": 10},
    "zeroth-order": {"sigma": 0.05, "num_samples": 32},
    "alpha-order": {"sigma": 0.05, "num_samples": 32, "bias_threshold": float("inf")},
}


@dataclasses.dataclass(frozen=True)
class ObjectiveLevel:
    """A smoothing transform applied to the rollout objective theta -> J(theta)."""

    transform: Callable
    name: str


def make(name: str, **params):
    """Build an estimator by name with parameters (unknown keys or bad values: ValueError)."""
    if name not in NAMES:
        raise ValueError(f"unknown estimator {name!r}; choose from {', '.join(NAMES)}")
    allowed = set(DEFAULTS[name])
    if name in ("bcg", "bcg-stein"):  # every BCG field is a parameter
        allowed = {f.name for f in dataclasses.fields(BCG)} - {"name"}
    unknown = set(params) - set(allowed)
    if unknown:
        raise ValueError(
            f"estimator {name!r} has no parameter(s) {sorted(unknown)}; "
            f"valid: {sorted(allowed) or 'none'}"
        )
    p = {**DEFAULTS[name], **params}
    if name == "analytic":
        return PlainStep(name="analytic")
    if name in ("bcg", "bcg-stein"):
        return BCG(**p, name=name)
    if name == "global-bundle":
        return PlainStep(transform=smoothing.global_bundle(**p), name=name)
    if name == "zeroth-order":
        return ObjectiveLevel(smoothing.zeroth_order(**p), name)
    return ObjectiveLevel(smoothing.alpha_order(**p), name)


__all__ = [
    "BCG",
    "BundleCarry",
    "DEFAULTS",
    "NAMES",
    "ObjectiveLevel",
    "PlainStep",
    "StepStats",
    "Trigger",
    "make",
    "rollout",
    "smoothing",
]
