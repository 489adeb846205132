"""Build a learner from a JSON-able run description (what ``bcg train`` stores in run.json).

{"task": "hopper_jump", "stiffness": "stiff", "learner": "shac", "estimator": "bcg",
 "estimator_params": {...}, "iterations": 200, "num_envs": 16, "horizon": 32,
 "config": {...SHACConfig / BPTTConfig overrides...}}
"""

from __future__ import annotations

import dataclasses

from bcg import estimators as E
from bcg.envs import make_env

GRADIENT_LEARNERS = ("shac", "bptt")
LEARNERS = (*GRADIENT_LEARNERS, "ppo")
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


def build(run: dict):
    """``(env, learner)`` for a gradient learner described by ``run``."""
    from bcg.learners.bptt import BPTT, BPTTConfig
    from bcg.learners.shac import SHAC, SHACConfig

    validate(run)
    env = make_env(run["task"], stiffness=run.get("stiffness", "stiff"))
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
    return env, cls(env, est, cfg_cls(**over), iterations=int(run["iterations"]))
