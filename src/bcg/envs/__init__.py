"""Environments: small built-in contact tasks (:mod:`bcg.envs.tasks`) for gradient reports, and
policy environments (:mod:`bcg.envs.base`) for the learners."""

from bcg.envs.base import ContactEnv
from bcg.envs.g1.tracking import g1_hop, g1_jump, g1_squat_jump
from bcg.envs.hopper_jump import HopperJump, hopper_jump
from bcg.envs.pogo import PogoHop, pogo_hop
from bcg.envs.registry import (
    POLICY_ENVS,
    env_factory,
    factory_path,
    import_factory,
    make_env,
    register_env,
)
from bcg.envs.tasks import TASKS, Task, get, list_tasks

for _name, _factory in {
    "hopper_jump": hopper_jump,
    "pogo_hop": pogo_hop,
    "g1_jump": g1_jump,
    "g1_squat_jump": g1_squat_jump,
    "g1_hop": g1_hop,
}.items():
    register_env(_name, _factory)


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
    "env_factory",
    "factory_path",
    "import_factory",
    "make_env",
    "register_env",
    "pogo_hop",
]
