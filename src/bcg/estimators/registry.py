"""Gradient estimators by name (``bcg grad --estimators``, ``bcg train --estimator``).

Built-ins: step level ``analytic``, ``bcg``, ``bcg-stein``, ``global-bundle`` (objects with the
:class:`bcg.estimators.protocol.StepEstimator` contract), objective level ``zeroth-order``,
``alpha-order`` (:class:`ObjectiveLevel`). A user adds one without editing this package:

    register_estimator("my-est", MyEstimator)          # factory(**params) -> estimator
    make("my-est", sigma=0.1)

or passes an import path ``"package.module:factory"`` wherever a name is accepted. Parameters
are checked against the factory's signature (unknown keys: ValueError naming them).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable

from bcg.estimators import smoothing, wrappers
from bcg.estimators.bcg import BCG
from bcg.estimators.protocol import StepEstimator
from bcg.estimators.rollout import PlainStep
from bcg.imports import lookup


@dataclasses.dataclass(frozen=True)
class ObjectiveLevel:
    """A smoothing transform applied to the rollout objective theta -> J(theta)."""

    transform: Callable
    name: str


def _bcg(name):
    def make(**p):
        return BCG(**p, name=name)

    make.params = {f.name for f in dataclasses.fields(BCG)} - {"name"}
    return make


def _analytic(backward_armature=None):
    return PlainStep(name="analytic", backward_armature=backward_armature)


def _global_bundle(sigma=0.01, num_samples=10):
    return PlainStep(transform=smoothing.global_bundle(sigma, num_samples), name="global-bundle")


def _zeroth_order(sigma=0.05, num_samples=32):
    return ObjectiveLevel(smoothing.zeroth_order(sigma, num_samples), "zeroth-order")


def _alpha_order(sigma=0.05, num_samples=32, bias_threshold=float("inf")):
    return ObjectiveLevel(smoothing.alpha_order(sigma, num_samples, bias_threshold), "alpha-order")


# default parameters of the BCG built-ins (the paper's settings); the other factories' own
# keyword defaults are theirs
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
        "forward": "mean",
    },
}

_FACTORIES: dict[str, Callable] = {
    "analytic": _analytic,
    "bcg": _bcg("bcg"),
    "bcg-stein": _bcg("bcg-stein"),
    "global-bundle": _global_bundle,
    "zeroth-order": _zeroth_order,
    "alpha-order": _alpha_order,
}
BUILTIN = tuple(_FACTORIES)


def register_estimator(name: str, factory: Callable, *, overwrite: bool = False) -> Callable:
    """Make ``factory(**params)`` available as estimator ``name``. It returns a step estimator
    (:class:`StepEstimator`: usable by ``bcg train`` and ``bcg grad``) or an
    :class:`ObjectiveLevel` (``bcg grad`` only). Returns ``factory``."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"estimator name must be a non-empty string without ':', got {name!r}")
    if not callable(factory):
        raise TypeError(f"register_estimator({name!r}, ...): {factory!r} is not callable")
    if name in _FACTORIES and not overwrite and _FACTORIES[name] is not factory:
        raise ValueError(
            f"estimator {name!r} is already registered (pass overwrite=True to replace)"
        )
    _FACTORIES[name] = factory
    return factory


def unregister_estimator(name: str) -> None:
    """Remove a registered estimator (built-ins cannot be removed)."""
    if name in BUILTIN:
        raise ValueError(f"{name!r} is a built-in estimator")
    _FACTORIES.pop(name, None)


def names() -> tuple[str, ...]:
    """Every estimator name known in this process (built-ins first)."""
    return tuple(_FACTORIES)


def estimator_factory(name: str) -> Callable:
    """The factory of an estimator name or import path (ValueError if unknown)."""
    return lookup(name, _FACTORIES, "estimator", "bcg.estimators.register_estimator")


def parameters(name: str) -> set[str] | None:
    """The parameter names estimator ``name`` takes (None: any, the factory takes ``**kw``),
    ``env_clip`` (:mod:`bcg.estimators.wrappers`) included."""
    f = estimator_factory(name)
    if hasattr(f, "params"):
        return {*f.params, "env_clip"}
    sig = inspect.signature(f)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return {k for k, p in sig.parameters.items() if p.kind is not p.VAR_POSITIONAL} | {"env_clip"}


def make(name: str, **params):
    """Build an estimator by name or import path with parameters (unknown keys: ValueError).
    ``env_clip`` (every step estimator's): the estimator wrapped by
    :func:`bcg.estimators.wrappers.env_clip`."""
    f = estimator_factory(name)
    params = {**DEFAULTS.get(name, {}), **params}
    clip = params.pop("env_clip", None)
    allowed = parameters(name)
    unknown = set(params) - allowed if allowed is not None else set()
    if unknown:
        raise ValueError(
            f"estimator {name!r} has no parameter(s) {sorted(unknown)}; "
            f"valid: {sorted(allowed) or 'none'}"
        )
    est = f(**params)
    if not isinstance(est, StepEstimator | ObjectiveLevel):
        raise TypeError(
            f"estimator {name!r}: its factory returned {type(est).__name__}, which has neither "
            "init / step / state (a StepEstimator) nor is an ObjectiveLevel"
        )
    if clip is not None and not isinstance(est, StepEstimator):
        raise ValueError(f"env_clip applies to step estimators, not {name!r}")
    return wrappers.env_clip(est, clip)


def is_step_level(est) -> bool:
    """Whether ``est`` transforms the control step (learners can train with it)."""
    return isinstance(est, StepEstimator)
