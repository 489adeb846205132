"""Environments: small built-in contact tasks (:mod:`bcg.envs.tasks`) for gradient reports, and
policy environments (:mod:`bcg.envs.base`) for the learners."""

from bcg.envs.base import ContactEnv
from bcg.envs.hopper_jump import HopperJump, hopper_jump
from bcg.envs.tasks import TASKS, Task, get, list_tasks

__all__ = ["TASKS", "ContactEnv", "HopperJump", "Task", "get", "hopper_jump", "list_tasks"]
