"""Build a learner from a JSON-able run description (what ``bcg train`` stores in run.json).

{"task": "hopper_jump", "stiffness": "stiff", "learner": "shac", "estimator": "bcg",
 "estimator_params": {...}, "iterations": 200, "num_envs": 16, "horizon": 32,
 "config": {...SHACConfig / BPTTConfig overrides...}, "env_params": {...}}

``env_params`` (optional; ``bcg train --param env.NAME=VALUE``) are keyword arguments of the
task's env factory, e.g. ``{"reward": "add"}`` for the G1 tasks (:mod:`bcg.envs.g1.add`).
"""

from __future__ import annotations

import dataclasses

from bcg import estimators as E
from bcg.envs import make_env

GRADIENT_LEARNERS = ("shac", "bptt")
LEARNERS = (*GRADIENT_LEARNERS, "ppo")
LEARNED_REWARD = ("shac",)  # learners that train a learned reward (env.reward_model)
STEP_ESTIMATORS = ("analytic", "bcg", "bcg-stein", "global-bundle")


def validate(run: dict) -> None:
    """ValueError for an unknown learner / estimator or bad sizes (before anything compiles)."""
    if run["learner"] not in LEARNERS:
        raise ValueError(f"unknown learner {run['learner']!r}; choose from {', '.join(LEARNERS)}")
    if run["estimator"] not in E.NAMES:
        raise ValueError(
            f"unknown estimator {run['estimator']!r}; choose from {', '.join(STEP_ESTIMATORS)}"
        )
    if run["learner"] in GRADIENT_LEARNERS and run["estimator"] not in STEP_ESTIMATORS:
        raise ValueError(
            f"estimator {run['estimator']!r} cannot be used by {run['learner']}: choose a "
            f"step-level estimator ({', '.join(STEP_ESTIMATORS)})"
        )
    for k in ("iterations", "num_envs"):
        if int(run[k]) < 1:
            raise ValueError(f"{k} must be >= 1, got {run[k]}")
    if run.get("horizon") is not None and int(run["horizon"]) < 1:
        raise ValueError(f"horizon must be >= 1, got {run['horizon']}")


def make_run_env(run: dict):
    """The training env of ``run`` (task, stiffness, ``env_params``); ValueError for an
    unknown env parameter or a learned reward (ADD) that ``run``'s learner cannot train."""
    params = dict(run.get("env_params") or {})
    try:
        env = make_env(run["task"], stiffness=run.get("stiffness", "stiff"), **params)
    except TypeError as e:
        raise ValueError(f"task {run['task']!r} does not take env parameters {params}: {e}") from e
    if getattr(env, "reward_model", None) is not None and run["learner"] not in LEARNED_REWARD:
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
    trains on ``learner.env``."""
    from bcg.learners.bptt import BPTT, BPTTConfig
    from bcg.learners.shac import SHAC, SHACConfig

    validate(run)
    env = make_run_env(run)
    est = E.make(run["estimator"], **run.get("estimator_params", {}))
    cls, cfg_cls = {"shac": (SHAC, SHACConfig), "bptt": (BPTT, BPTTConfig)}[run["learner"]]
    fields = {f.name for f in dataclasses.fields(cfg_cls)}
    over = dict(run.get("config", {}))
    bad = set(over) - fields
    if bad:
        raise ValueError(f"{run['learner']} has no setting(s) {sorted(bad)}")
    over = {k: tuple(v) if isinstance(v, list) else v for k, v in over.items()}
    over["num_envs"] = int(run["num_envs"])
    if run.get("horizon") is not None:
        over["horizon"] = int(run["horizon"])
    learner = cls(env, est, cfg_cls(**over), iterations=int(run["iterations"]))
    return getattr(env, "evaluation_env", env), learner
