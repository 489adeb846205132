"""Environments: small built-in contact tasks (:mod:`bcg.envs.tasks`) for gradient reports, and
policy environments (:mod:`bcg.envs.base`) for the learners. The G1 tasks (:mod:`bcg.envs.g1`)
are imported when one is asked for."""

from bcg.envs.base import ContactEnv
from bcg.envs.hopper_jump import HopperJump, hopper_jump
from bcg.envs.pogo import PogoHop, pogo_hop
from bcg.envs.registry import (
    POLICY_ENVS,
    env_factory,
    factory_path,
    import_factory,
    make_env,
    register_env,
    register_lazy,
)
from bcg.envs.tasks import TASKS, Task, get, list_tasks

register_env("hopper_jump", hopper_jump)
register_env("pogo_hop", pogo_hop)
for _name in ("g1_jump", "g1_squat_jump", "g1_hop"):
    register_lazy(_name, f"bcg.envs.g1.tracking:{_name}")


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
