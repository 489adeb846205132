"""Policy environments on a differentiable contact simulator (MuJoCo-Playground style).

An :class:`ContactEnv` is a set of pure, single-environment functions around a :class:`Sim`;
the physics transition itself is *not* part of it, so that a learner can route it through any
step estimator (``analytic``, ``bcg``, ...) over a batch of environments:

    x_{t+1} = Estimator.step(sim, carry_t, ctrl(a_t))          (batched, see bcg.estimators)
    r_t     = reward(x_t, a_t, x_{t+1})
    o_{t+1} = observe(x_{t+1})
    terminated_{t+1} = terminated(x_{t+1}),   truncated when t + 1 = episode_length

:meth:`ContactEnv.plain_step` is the plain (analytic) transition of one environment, for
learners that do not differentiate through the physics (PPO) and for evaluation.
Termination (the state is a failure: no bootstrap from it) and truncation (time limit: the
value of the state still counts) are kept separate.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bcg.sim.model import Sim
from bcg.sim.step import control_step, make_data


@dataclasses.dataclass(frozen=True, eq=False)
class ContactEnv:
    """Base class: subclasses define the task by overriding the methods below.

    Attributes:
      sim: the simulator (its stiffness and substeps are the task's physics).
      episode_length: control steps before truncation.
    """

    sim: Sim
    episode_length: int = 500

    # ------------------------------------------------------------------ task definition

    @property
    def observation_size(self) -> int:
        return int(self.observe(make_data(self.sim)).shape[-1])

    @property
    def action_size(self) -> int:
        return self.sim.nu

    def reset_state(self, key) -> tuple[jax.Array, jax.Array]:
        """A random initial ``(qpos (nq,), qvel (nv,))`` of one environment."""
        raise NotImplementedError

    def action_to_ctrl(self, action: jax.Array, data=None) -> jax.Array:
        """MuJoCo ``ctrl`` (nu,) from a policy action in [-1, 1]^action_size, taken in the
        state ``data`` (one environment's ``mjx.Data``; an env whose actions are relative to
        the state, e.g. residuals on a reference, reads it; this default ignores it). Every
        caller (the rollouts, the native and deploy bridges) passes the state."""
        lo, hi = self.sim.mjx_model.actuator_ctrlrange.T
        a = jnp.clip(action, -1.0, 1.0)
        return lo + 0.5 * (a + 1.0) * (hi - lo)

    def observe(self, data) -> jax.Array:
        """Observation vector of one environment's state."""
        raise NotImplementedError

    def reward(self, data, action, next_data) -> jax.Array:
        """Scalar reward of the transition ``data --action--> next_data``."""
        raise NotImplementedError

    def terminated(self, data) -> jax.Array:
        """True where the state is a failure (episode ends, no bootstrap)."""
        return jnp.zeros((), bool)

    # ------------------------------------------------------------------ helpers

    def initial_data(self, key):
        """``mjx.Data`` of one environment at :meth:`reset_state`."""
        qpos, qvel = self.reset_state(key)
        d = make_data(self.sim)
        return d.replace(qpos=qpos.astype(d.qpos.dtype), qvel=qvel.astype(d.qvel.dtype))

    def plain_step(self, data, action):
        """Analytic transition of one environment: ``(next_data, reward, terminated)``."""
        nxt, _ = control_step(self.sim, data, self.action_to_ctrl(action, data))
        nxt = nxt.replace(time=data.time + self.sim.control_dt)
        return nxt, self.reward(data, action, nxt), self.terminated(nxt)
