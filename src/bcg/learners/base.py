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

Data parallelism: ``learner.sharded(devices)`` is a copy whose environment batch is sharded
over a 1-D device mesh (``learner.mesh``, axis ``"envs"``; see :mod:`bcg.learners.parallel`);
``state_shardings(state)`` gives the matching sharding of every state leaf (env-batch leaves
split over the devices, the rest replicated), with which the harness commits the state and
compiles the iteration. The iteration's result equals the single-device one up to float
summation order. Across hosts the same code runs after ``jax.distributed.initialize()``
(the mesh then spans every process's devices; not tested, see :mod:`bcg.learners.parallel`).
"""

from __future__ import annotations

import abc
import copy
import dataclasses

from bcg.learners import networks as nets
from bcg.learners import normalization as rms


class Learner(abc.ABC):
    name: str = "learner"
    iterations: int = 1
    mesh = None  # jax.sharding.Mesh with axis "envs", or None: one device, no constraints
    env_state_fields: tuple[str, ...] = ()  # top-level state fields with leading env axis

    @property
    def num_envs(self) -> int:
        return int(self.cfg.num_envs)

    def sharded(self, devices=None):
        """A copy of this learner whose environment batch is sharded over ``devices`` (a
        count, a device list, or None for all of ``jax.devices()``). ValueError when
        ``num_envs`` is not divisible by the device count."""
        from bcg.learners import parallel

        mesh = parallel.make_mesh(devices)
        parallel.check_divisible(self.num_envs, mesh)
        new = copy.copy(self)
        new.mesh = mesh
        return new

    def state_shardings(self, state):
        """Pytree of shardings matching ``state`` (None without a mesh)."""
        if self.mesh is None:
            return None
        from bcg.learners import parallel

        return parallel.tree_shardings(state, self.mesh, self.env_state_fields)

    @property
    @abc.abstractmethod
    def env_steps_per_iteration(self) -> int: ...

    @abc.abstractmethod
    def init(self, key): ...

    @abc.abstractmethod
    def iteration(self, state): ...

    # An actor learner: ``self.actor`` (networks.Actor), ``self.cfg`` (a dataclass with
    # ``normalize_obs``), and a state with ``actor`` and ``obs_rms`` fields.

    def config(self) -> dict:
        return {"learner": self.name, "iterations": self.iterations, **dataclasses.asdict(self.cfg)}

    def policy_params(self, state):
        return {"actor": state.actor, "obs_rms": state.obs_rms}

    def with_policy_params(self, state, params):
        """``state`` with the policy parameters ``params`` (:meth:`policy_params`: actor and
        observation normaliser) and fresh actor optimiser moments; the rest (critic, return
        normaliser, environments) is kept: how a run starts from a packed policy."""
        return dataclasses.replace(
            state,
            actor=params["actor"],
            obs_rms=params["obs_rms"],
            actor_opt=self.actor_optimizer.init(params["actor"]),
        )

    def policy(self, params, obs):
        """Deterministic action tanh(mu(o)) on the normalised observation."""
        o = self._norm_obs(params["obs_rms"], obs)
        return nets.mean_action(self.actor, params["actor"], o)

    def _norm_obs(self, obs_rms, obs):
        return rms.normalize(obs_rms, obs) if self.cfg.normalize_obs else obs

    def _sampling_policy(self, obs_rms):
        """policy(actor_params, obs, t, key): the stochastic actor of the rollouts."""

        def policy(p, obs, t, k):
            return nets.sample_action(self.actor, p, self._norm_obs(obs_rms, obs), k)

        return policy
