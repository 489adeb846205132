"""Transforms of any step estimator's backward pass, optax style: a wrapper takes a
:class:`bcg.estimators.protocol.StepEstimator` and returns one.

    est = env_clip(make("bcg"), 3.0)     # what make("bcg", env_clip=3.0) builds

:func:`env_clip`: after every control step, each environment's cotangent of the estimator's
carry is clipped to at most c times the batch median (:func:`bcg.estimators.cotangent_clip.
clip_rows`, identity on the forward pass):

    g_e <- g_e min(1, c median_e' |g_e'| / |g_e|),

which bounds an environment whose sensitivity grows over the whole window without touching the
others (biased where it acts; docs/reports/legged_bcg.md, "Clipping diverging environments").
Every estimator takes it as the parameter ``env_clip`` (``--param bcg.env_clip=3``, a recipe's
``[estimator] env_clip``), so a run record names it with the estimator's other parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bcg.estimators.cotangent_clip import check_factor, clip_rows

__all__ = ["EnvClip", "env_clip", "unwrap"]


@dataclasses.dataclass(frozen=True)
class EnvClip:
    """``inner`` with each environment's carry cotangent clipped after every step (module
    docstring). Other attributes are ``inner``'s (``num_branches``, ``name``, ...)."""

    inner: Any
    env_clip: float

    def __post_init__(self):
        check_factor("env_clip", self.env_clip)
        if self.env_clip is None:
            raise ValueError("env_clip must be a number >= 1 (None: do not wrap)")

    def init(self, sim, data):
        return self.inner.init(sim, data)

    def step(self, sim, carry, ctrl, key):
        new, stats = self.inner.step(sim, carry, ctrl, key)
        return clip_rows(new, self.env_clip), stats

    def state(self, carry):
        return self.inner.state(carry)

    def __getattr__(self, name):
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def env_clip(estimator, factor: float | None):
    """``estimator`` whose backward pass clips each environment's cotangent to ``factor`` times
    the batch median after every step (:class:`EnvClip`); None returns ``estimator``."""
    return estimator if factor is None else EnvClip(estimator, factor)


def unwrap(estimator):
    """The estimator inside any wrappers of this module."""
    while isinstance(estimator, EnvClip):
        estimator = estimator.inner
    return estimator
