"""Gradient estimators for rollouts through contact.

Two levels, one registry (:mod:`bcg.estimators.registry`: :func:`make`,
:func:`register_estimator`; the step contract: :mod:`bcg.estimators.protocol`):

* step level (``analytic``, ``bcg``, ``bcg-stein``, ``global-bundle``): transforms of the
  control step used
  inside :func:`bcg.estimators.rollout.rollout`;
* objective level (``zeroth-order``, ``alpha-order``): transforms of the whole rollout
  objective theta -> J(theta), wrapped in :class:`ObjectiveLevel`.
"""

from __future__ import annotations

from bcg.estimators import smoothing
from bcg.estimators.bcg import BCG, BundleCarry
from bcg.estimators.protocol import StepEstimator
from bcg.estimators.registry import (
    BUILTIN,
    DEFAULTS,
    ObjectiveLevel,
    is_step_level,
    make,
    names,
    parameters,
    register_estimator,
    unregister_estimator,
)
from bcg.estimators.rollout import PlainStep, rollout
from bcg.estimators.stats import StepStats
from bcg.estimators.trigger import Trigger
from bcg.estimators.wrappers import EnvClip, env_clip, unwrap

NAMES = BUILTIN  # the built-in names; names() also lists the registered ones

__all__ = [
    "BCG",
    "BUILTIN",
    "BundleCarry",
    "DEFAULTS",
    "EnvClip",
    "NAMES",
    "ObjectiveLevel",
    "PlainStep",
    "StepEstimator",
    "StepStats",
    "Trigger",
    "env_clip",
    "is_step_level",
    "make",
    "names",
    "parameters",
    "register_estimator",
    "rollout",
    "smoothing",
    "unregister_estimator",
    "unwrap",
]
