"""The learner interface that the training harness drives (SHAC, BPTT).

A learner is a plain object holding the environment, the gradient estimator and its
hyper-parameters; all of its training state is one pytree of arrays, so the harness can jit
the iteration and checkpoint the state:

    state = learner.init(key)                          # everything, incl. RNG key and envs
    state, metrics = learner.iteration(state)          # pure, jit-able: one update
    a = learner.policy(learner.policy_params(state), obs)   # deterministic action in [-1, 1]

``metrics`` is a dict of scalar arrays; ``env_steps_per_iteration`` control steps are simulated
per iteration; ``iterations`` is the planned run length (for learning-rate decay);
``config()`` is a JSON-able description from which :func:`bcg.learners.make` rebuilds it.
"""

from __future__ import annotations

import abc


class Learner(abc.ABC):
    name: str = "learner"
    iterations: int = 1

    @property
    @abc.abstractmethod
    def env_steps_per_iteration(self) -> int: ...

    @abc.abstractmethod
    def init(self, key): ...

    @abc.abstractmethod
    def iteration(self, state): ...

    @abc.abstractmethod
    def policy_params(self, state): ...

    @abc.abstractmethod
    def policy(self, params, obs): ...

    @abc.abstractmethod
    def config(self) -> dict: ...
