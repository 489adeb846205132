"""Environments: small built-in contact tasks (:mod:`bcg.envs.tasks`)."""

from bcg.envs.tasks import TASKS, Task, get, list_tasks

__all__ = ["TASKS", "Task", "get", "list_tasks"]
