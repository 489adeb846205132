"""The settings a user may override per learner (run.json ``config``, ``bcg train --param
LEARNER.NAME=VALUE``, a recipe's ``[learner.NAME]``) and their defaults."""

from __future__ import annotations

import dataclasses

# set by their own command-line flags (--num-envs, --horizon), not through --param
SIZE_SETTINGS = ("num_envs", "horizon")


def learner_settings(learner: str) -> dict:
    """``{name: default}`` of the settings a user may override for ``learner`` (run.json
    ``config``, ``bcg train --param LEARNER.NAME=VALUE``)."""
    if learner == "ppo":
        from bcg.learners.ppo import NETWORK_DEFAULTS, PPO_DEFAULTS

        out = {**PPO_DEFAULTS, **NETWORK_DEFAULTS, "batch_size": PPO_DEFAULTS["num_envs"]}
    else:
        from bcg.learners.bptt import BPTTConfig
        from bcg.learners.shac import SHACConfig

        cfg = {"shac": SHACConfig, "bptt": BPTTConfig}[learner]
        out = {f.name: f.default for f in dataclasses.fields(cfg)}
    return {k: v for k, v in out.items() if k not in SIZE_SETTINGS}
