"""Build a learner from a JSON-able run description (what ``bcg train`` stores in run.json,
for every learner, PPO included).

{"task": "hopper_jump", "stiffness": "stiff", "learner": "shac", "estimator": "bcg",
 "estimator_params": {...}, "iterations": 200, "num_envs": 16, "horizon": 32,
 "config": {...SHACConfig / BPTTConfig / PPO overrides...}, "env_params": {...},
 "task_factory": "package.module:factory", "estimator_factory": "package.module:factory"}

``task``: a name or import path (:mod:`bcg.envs.registry`); ``task_factory`` (optional): the
factory's import path, which rebuilds a task registered by name in another process;
``estimator_factory`` the same for an estimator registered by name.

``config`` keys are the learner's tunable settings (:func:`learner_settings`: the fields of
``SHACConfig`` / ``BPTTConfig``, or brax PPO's :data:`bcg.learners.ppo.PPO_DEFAULTS` and
network sizes), ``bcg train --param shac.gamma=0.98``. :func:`validate` rejects unknown keys
and values of the wrong type by name, before anything is built or compiled.

``env_params`` (optional; ``bcg train --param env.NAME=VALUE``) are keyword arguments of the
task's env factory, e.g. ``{"reward": "add"}`` for the G1 tasks (:mod:`bcg.envs.g1.add`).
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings

from bcg import estimators as E
from bcg.envs import env_factory, make_env
from bcg.learners.settings import SIZE_SETTINGS, learner_settings  # noqa: F401

GRADIENT_LEARNERS = ("shac", "bptt")
LEARNERS = (*GRADIENT_LEARNERS, "ppo")
LEARNED_REWARD = ("shac",)  # learners that train a learned reward (env.reward_model)
STEP_ESTIMATORS = ("analytic", "bcg", "bcg-stein", "global-bundle")


def _type_error(value, default) -> str | None:
    """Why ``value`` cannot replace ``default`` (None when it can)."""
    if default is None:
        return None
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "expects true or false"
    if isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else "expects an integer"
    if isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else "expects a number"
    if isinstance(default, (tuple, list)):
        return None if isinstance(value, (list, tuple)) else "expects a list, e.g. [64,64]"
    if isinstance(default, str):
        return None if isinstance(value, str) else "expects a string"
    return None


def check_config(learner: str, config: dict) -> None:
    """ValueError naming every unknown or mistyped ``config`` key of ``learner``."""
    allowed = learner_settings(learner)
    unknown = sorted(set(config) - set(allowed))
    if unknown:
        names = ", ".join(f"{learner}.{k}" for k in unknown)
        sized = [k for k in unknown if k in SIZE_SETTINGS]
        hint = (
            f" (set {', '.join('--' + k.replace('_', '-') for k in sized)} instead)"
            if sized
            else ""
        )
        raise ValueError(
            f"unknown {learner} setting(s) {names}{hint}; valid: {', '.join(sorted(allowed))}"
        )
    for k, v in config.items():
        why = _type_error(v, allowed[k])
        if why:
            raise ValueError(f"{learner}.{k}={v!r}: {why} (default {allowed[k]!r})")


def check_env_params(task: str, params: dict) -> None:
    """ValueError naming env parameters that ``task``'s factory does not take."""
    if not params:
        return
    try:
        factory = env_factory(task)
    except ValueError:
        return  # rebuilt from run.json's task_factory: the factory reports unknown ones
    sig = inspect.signature(factory)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return  # forwarded further: the factory itself reports unknown ones
    unknown = sorted(set(params) - set(sig.parameters))
    if unknown:
        valid = sorted(set(sig.parameters) - {"stiffness"})
        raise ValueError(
            f"task {task!r} takes no env parameter(s) "
            f"{', '.join('env.' + k for k in unknown)}; valid: {', '.join(valid) or 'none'}"
        )


def validate(run: dict) -> None:
    """ValueError for an unknown learner / estimator / setting / parameter or bad sizes (before
    anything is built or compiled); a scheduled run (:mod:`bcg.learners.schedule`) in each of
    its phases."""
    from bcg.learners.schedule import check_schedule, phase_starts, run_at

    if run.get("schedule"):
        check_schedule(run)
        for k in phase_starts(run):
            try:
                validate(run_at(run, k))
            except ValueError as e:
                raise ValueError(f"{e} (in the schedule's phase from iteration {k})") from e
        return
    if run["learner"] not in LEARNERS:
        raise ValueError(f"unknown learner {run['learner']!r}; choose from {', '.join(LEARNERS)}")
    if run["learner"] == "ppo":  # PPO never differentiates the step: no estimator
        if run.get("estimator") not in (None, "analytic") or run.get("estimator_params"):
            raise ValueError(
                "--learner ppo trains on the plain step: it takes no --estimator, estimator "
                "--param or --capacity"
            )
    elif run["learner"] in GRADIENT_LEARNERS:
        est = make_run_estimator(run)  # unknown name or parameter: ValueError
        if not E.is_step_level(est):
            step = [n for n in E.names() if n in STEP_ESTIMATORS or n not in E.BUILTIN]
            raise ValueError(
                f"estimator {run['estimator']!r} cannot be used by {run['learner']}: choose a "
                f"step-level estimator ({', '.join(step)})"
            )
    for k in ("iterations", "num_envs"):
        if int(run[k]) < 1:
            raise ValueError(f"{k} must be >= 1, got {run[k]}")
    if run.get("horizon") is not None and int(run["horizon"]) < 1:
        raise ValueError(f"horizon must be >= 1, got {run['horizon']}")
    check_config(run["learner"], dict(run.get("config") or {}))
    check_env_params(run["task"], dict(run.get("env_params") or {}))


def make_run_estimator(run: dict):
    """The step estimator of ``run`` (a scheduled run: its final phase): its name or import
    path, else (a name registered in another process) run.json's ``estimator_factory`` import
    path; with the record's resolved parameters under the given ones
    (:func:`bcg.learners.record.effective`)."""
    from bcg.learners.record import effective
    from bcg.learners.schedule import run_at

    run = run_at(run)

    name = run["estimator"]
    if name not in E.names() and ":" not in name and run.get("estimator_factory"):
        name = run["estimator_factory"]
    return E.make(name, **effective(run, "estimator"))


def make_run_env(run: dict):
    """The training env of ``run`` (task, stiffness, ``env_params``; the record's env settings
    where today's defaults differ, :func:`bcg.learners.record.apply_env_record`); ValueError
    for an unknown env parameter or a learned reward (ADD) that ``run``'s learner cannot
    train."""
    from bcg.learners.record import apply_env_record
    from bcg.learners.schedule import run_at

    run = run_at(run)  # a scheduled run: its final phase
    params = dict(run.get("env_params") or {})
    try:
        env = make_env(
            run["task"],
            task_factory=run.get("task_factory"),
            stiffness=run.get("stiffness", "stiff"),
            **params,
        )
    except TypeError as e:
        raise ValueError(f"task {run['task']!r} does not take env parameters {params}: {e}") from e
    env = apply_env_record(run, env)
    if env.reward_model is not None and run["learner"] not in LEARNED_REWARD:
        raise ValueError(
            f"{run['task']} with env parameters {params} has a learned reward (ADD "
            f"discriminator) that {run['learner']} cannot train: use --learner "
            f"{' / '.join(LEARNED_REWARD)} or the default reward"
        )
    return env


def build(run: dict):
    """``(env, learner)`` for a gradient learner described by ``run``.

    ``env`` is the env to evaluate on: for a learned reward (ADD) its fixed-reward twin
    (``evaluation_env``), since the learned reward needs the learner's state; the learner
    trains on ``learner.env``. A scheduled run (:mod:`bcg.learners.schedule`) is built in its
    final phase (``run_at(run, K)`` builds the phase after K iterations)."""
    from bcg.learners.bptt import BPTT, BPTTConfig
    from bcg.learners.record import RecordWarning, effective
    from bcg.learners.schedule import run_at
    from bcg.learners.shac import SHAC, SHACConfig

    run = run_at(run)
    validate(run)
    env = make_run_env(run)
    est = make_run_estimator(run)
    if run["learner"] not in GRADIENT_LEARNERS:
        raise ValueError(f"registry.build makes gradient learners, not {run['learner']!r}")
    cls, cfg_cls = {"shac": (SHAC, SHACConfig), "bptt": (BPTT, BPTTConfig)}[run["learner"]]
    over = effective(run, "learner")  # the record's settings under the given ones
    known = {f.name for f in dataclasses.fields(cfg_cls)}
    dropped = sorted(set(over) - known)
    if dropped:
        warnings.warn(
            f"the run records {run['learner']} setting(s) {dropped} that this version does not "
            "have: they are ignored",
            RecordWarning,
            stacklevel=2,
        )
    over = {k: tuple(v) if isinstance(v, list) else v for k, v in over.items() if k in known}
    over["num_envs"] = int(run["num_envs"])
    if run.get("horizon") is not None:
        over["horizon"] = int(run["horizon"])
    if cls is SHAC:
        learner = cls(
            env,
            est,
            cfg_cls(**over),
            iterations=int(run["iterations"]),
            reward_model=env.reward_model,
        )
    else:
        learner = cls(env, est, cfg_cls(**over), iterations=int(run["iterations"]))
    return env.evaluation_env, learner
