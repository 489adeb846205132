"""A :class:`~bcg.envs.base.ContactEnv` as a ``brax.envs.base.Env`` (for brax's PPO).

brax's training stack (``brax.envs.wrappers.training.wrap``: ``VmapWrapper`` ->
``EpisodeWrapper`` -> ``AutoResetWrapper``, then ``brax.training.agents.ppo.train``) only needs
an ``Env`` with single-environment ``reset(rng) -> State`` / ``step(State, action) -> State``
and the ``observation_size`` / ``action_size`` / ``backend`` properties. The physics transition
is :meth:`ContactEnv.plain_step` (the analytic MJX control step; PPO never differentiates it).

brax 0.14.2 semantics kept here (read from ``brax/envs/wrappers/training.py`` and
``brax/training/agents/ppo/losses.py``):

* ``State.pipeline_state`` is the environment's ``mjx.Data`` (brax only tree-maps it: the
  auto-reset selects ``info['first_pipeline_state']`` where ``done``).
* ``State.done`` is the **termination** flag only (1.0 = failure state). The
  ``EpisodeWrapper`` raises ``done`` at the time limit too and sets
  ``info['truncation'] = 1 - terminated`` there; PPO's loss recovers
  ``termination = done * (1 - truncation)`` and does not bootstrap only through terminations.
* ``obs`` is float32 (brax's networks and running statistics are float32) whatever the
  simulator's precision (the state stays in the simulator's dtype); ``reward`` and ``done`` are
  jax's default float (float64 under x64), the dtype of the wrappers' own counters
  (``jp.zeros``), so that their scan carries keep one dtype in both precisions.
* ``metrics`` is carried over from the input state (brax's convention); the wrappers add
  per-episode sums to ``info['episode_metrics']``.
* A transition whose state, observation or reward is not finite (the simulation diverged) ends
  the episode as a termination with reward 0 and observation 0, so that brax's auto-reset
  replaces the state and no NaN reaches PPO's losses or its observation normaliser (the same
  rule as the differentiable rollout's, :mod:`bcg.learners.rollout`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from brax.envs.base import Env, State

from bcg.envs.base import ContactEnv


def patch_jax_for_brax() -> None:
    """Restore ``jax.device_put_replicated`` for brax 0.14.2 under jax 0.10.

    jax 0.10 removed the public ``jax.device_put_replicated`` (the module attribute raises),
    but brax 0.14.2's ``ppo.train`` and ``brax.training.pmap`` still call it. The function
    itself still lives in ``jax._src.api``; re-exporting it is the least invasive fix (no
    dependency change, same semantics). Idempotent.
    """
    if "device_put_replicated" not in vars(jax):
        from jax._src import api as _api

        jax.device_put_replicated = _api.device_put_replicated


patch_jax_for_brax()


def _float():
    """jax's default float (float64 under x64): the dtype brax's wrappers give their counters."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


class BraxContactEnv(Env):
    """brax ``Env`` view of one :class:`ContactEnv` (unbatched; wrap it for training)."""

    def __init__(self, env: ContactEnv):
        self.env = env
        self._obs_size = int(env.observation_size)
        self._act_size = int(env.action_size)

    def reset(self, rng: jax.Array) -> State:
        data = self.env.initial_data(rng)
        return State(
            pipeline_state=data,
            obs=self.env.observe(data).astype(jnp.float32),
            reward=jnp.zeros((), _float()),
            done=jnp.zeros((), _float()),
            metrics={},
            info={},
        )

    def step(self, state: State, action: jax.Array) -> State:
        nxt, reward, terminated = self.env.plain_step(state.pipeline_state, action)
        obs = self.env.observe(nxt).astype(jnp.float32)
        finite = jnp.isfinite(nxt.qpos).all() & jnp.isfinite(nxt.qvel).all()
        finite &= jnp.isfinite(obs).all() & jnp.isfinite(reward)
        return state.replace(
            pipeline_state=nxt,
            obs=jnp.where(finite, obs, 0.0),
            reward=jnp.where(finite, jnp.asarray(reward), 0.0).astype(_float()),
            done=(jnp.asarray(terminated) | ~finite).astype(_float()),
        )

    @property
    def observation_size(self) -> int:
        return self._obs_size

    @property
    def action_size(self) -> int:
        return self._act_size

    @property
    def backend(self) -> str:
        return "mjx"

    @property
    def dt(self) -> float:
        return float(self.env.sim.control_dt)


def to_brax(env: ContactEnv) -> BraxContactEnv:
    """Expose ``env`` as a brax ``Env`` (see :class:`BraxContactEnv`)."""
    return BraxContactEnv(env)
