"""Training tasks by name (``bcg train --task``), MuJoCo Playground style.

A task is a factory ``factory(stiffness=..., **params) -> ContactEnv``. Three ways to name one:

* a built-in name (``hopper_jump``, ``pogo_hop``, ``g1_jump``, ...);
* a name registered from Python with :func:`register_env`;
* an import path ``"package.module:attribute"`` of any importable factory (the module on
  ``PYTHONPATH``), e.g. ``bcg train --task my_robot.envs:make_env --param env.target=1.5``.

``bcg train`` records :func:`factory_path` of the factory in ``run.json`` (``task_factory``), so
that ``bcg eval`` / ``transfer`` / ``export`` rebuild a registered or imported task in a new
process without the registering code having run.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bcg.envs.base import ContactEnv
from bcg.imports import import_factory, lookup

# name -> factory(stiffness=..., **params) -> ContactEnv; built-ins are added by bcg.envs, the
# G1 tasks lazily (imported when one is asked for: importing bcg.envs loads no G1 code)
POLICY_ENVS: dict[str, Callable[..., ContactEnv]] = {}


class _Lazy:
    """A factory known by import path, imported on first use."""

    def __init__(self, path: str):
        self.path = path

    def load(self) -> Callable[..., ContactEnv]:
        return import_factory(self.path)

    def __call__(self, *args, **kwargs):
        return self.load()(*args, **kwargs)


def register_lazy(name: str, path: str) -> None:
    """A task by import path ``"package.module:factory"``, imported the first time it is asked
    for (:func:`env_factory`) or called."""
    POLICY_ENVS[name] = _Lazy(path)


def register_env(name: str, factory: Callable[..., ContactEnv], *, overwrite: bool = False):
    """Make ``factory`` available as ``--task name``. ``factory(stiffness=..., **params)``
    returns a :class:`ContactEnv`; ``stiffness`` is the ``--stiffness`` value (``"soft"``,
    ``"stiff"``, ...), ``params`` the ``--param env.KEY=VALUE`` pairs. Returns ``factory``."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"task name must be a non-empty string without ':', got {name!r}")
    if not callable(factory):
        raise TypeError(f"register_env({name!r}, ...): the factory {factory!r} is not callable")
    if name in POLICY_ENVS and not overwrite and POLICY_ENVS[name] is not factory:
        raise ValueError(f"task {name!r} is already registered (pass overwrite=True to replace)")
    POLICY_ENVS[name] = factory
    return factory


def env_factory(task: str) -> Callable[..., ContactEnv]:
    """The factory of a task name or import path; ValueError naming the choices if unknown."""
    found = lookup(task, POLICY_ENVS, "task", "bcg.envs.register_env")
    if isinstance(found, _Lazy):  # registered lazily: import it now, once
        found = POLICY_ENVS[task] = found.load()
    return found


def factory_path(factory: Callable) -> str | None:
    """``"module:qualname"`` that :func:`import_factory` resolves back to ``factory``, or None
    (a lambda, a local function, an object defined in ``__main__``)."""
    module = getattr(factory, "__module__", None)
    name = getattr(factory, "__qualname__", None)
    if not module or not name or module == "__main__" or "<" in name:
        return None
    try:
        found = import_factory(f"{module}:{name}")
    except ValueError:
        return None
    return f"{module}:{name}" if found is factory else None


def make_env(task: str, task_factory: str | None = None, **params) -> ContactEnv:
    """The env of ``task`` (name or import path) built with ``params``. ``task_factory``: an import
    path used when ``task`` is not known in this process (``run.json``'s ``task_factory``)."""
    if task not in POLICY_ENVS and ":" not in task and task_factory:
        make = import_factory(task_factory)
    else:
        make = env_factory(task)
    env = make(**params)
    if not isinstance(env, ContactEnv):
        raise TypeError(
            f"task {task!r}: the factory returned {type(env).__name__}, not a bcg.envs.ContactEnv"
        )
    return env


def task_summaries() -> list[tuple[str, str]]:
    """``(name, summary)`` of every training task by name: the first line of its factory's
    docstring, Sphinx cross-references dropped."""
    out = []
    for name in list(POLICY_ENVS):
        factory = env_factory(name)
        doc = (factory.__doc__ or "").strip().splitlines()
        out.append((name, re.sub(r"\s*\(:\w+:`[^`]*`\)", "", doc[0]) if doc else ""))
    return out
