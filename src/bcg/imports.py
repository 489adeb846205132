"""Named tables of factories that also accept import paths (``"package.module:attribute"``):
the lookup behind ``--task`` (:mod:`bcg.envs.registry`) and ``--estimator``
(:mod:`bcg.estimators.registry`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def import_factory(path: str) -> Callable:
    """The object at ``"package.module:attribute"`` (attribute may be dotted)."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"import path must be 'package.module:factory', got {path!r}")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(
            f"cannot import module {module_name!r} of {path!r} ({e}); is it on PYTHONPATH?"
        ) from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module_name!r} has no attribute {attr!r} ({path!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{path!r} is not callable")
    return obj


def lookup(name: str, table: dict[str, Callable], kind: str, register: str) -> Callable:
    """``table[name]``, or the object at the import path ``name``; ValueError naming the
    choices otherwise (``kind``: "task", "estimator"; ``register``: the function that adds a
    name)."""
    if name in table:
        return table[name]
    if ":" in name:
        return import_factory(name)
    raise ValueError(
        f"unknown {kind} {name!r}; choose from {', '.join(table)}, a name given to "
        f"{register}, or an import path 'package.module:factory'"
    )
