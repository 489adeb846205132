"""Environments: small built-in contact tasks (:mod:`bcg.envs.tasks`) for gradient reports, and
policy environments (:mod:`bcg.envs.base`) for the learners."""

from bcg.envs.base import ContactEnv
from bcg.envs.g1.tracking import g1_hop, g1_jump, g1_squat_jump
from bcg.envs.hopper_jump import HopperJump, hopper_jump
from bcg.envs.pogo import PogoHop, pogo_hop
from bcg.envs.tasks import TASKS, Task, get, list_tasks

# policy environments (training tasks) by name: factory(stiffness=...) -> ContactEnv
POLICY_ENVS = {
    "hopper_jump": hopper_jump,
    "pogo_hop": pogo_hop,
    "g1_jump": g1_jump,
    "g1_squat_jump": g1_squat_jump,
    "g1_hop": g1_hop,
}


def make_env(name: str, **kw) -> ContactEnv:
    """A training environment by name (``bcg train --task``); unknown name: ValueError."""
    if name not in POLICY_ENVS:
        raise ValueError(f"unknown task {name!r}; choose from {', '.join(sorted(POLICY_ENVS))}")
    return POLICY_ENVS[name](**kw)


__all__ = [
    "POLICY_ENVS",
    "TASKS",
    "ContactEnv",
    "HopperJump",
    "PogoHop",
    "Task",
    "get",
    "hopper_jump",
    "list_tasks",
    "make_env",
    "pogo_hop",
]
