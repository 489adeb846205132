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
import mujoco
import numpy as np

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

    @property
    def action_scales(self) -> np.ndarray:
        """(action_size,) d ctrl / d action of :meth:`action_to_ctrl` away from its clips: how
        far one unit of action moves each command (here half the actuator's ctrl range). An
        env that overrides :meth:`action_to_ctrl` overrides this too; ``bcg pack
        --action-range`` reads it to rescale a policy."""
        lo, hi = self.sim.mj_model.actuator_ctrlrange.T
        return 0.5 * (hi - lo)

    def observe(self, data) -> jax.Array:
        """Observation vector of one environment's state."""
        raise NotImplementedError

    def reward(self, data, action, next_data) -> jax.Array:
        """Scalar reward of the transition ``data --action--> next_data``."""
        raise NotImplementedError

    def terminated(self, data) -> jax.Array:
        """True where the state is a failure (episode ends, no bootstrap)."""
        return jnp.zeros((), bool)

    # ------------------------------------------------------------------ optional hooks
    # Learners, evaluation and transfer call these; each default means "the env has none".

    def eval_metrics(self, data) -> dict:
        """Per-state quantities an evaluation reports (mean over alive steps and max), e.g.
        ``{"hop_height": ...}``; default none."""
        return {}

    @property
    def evaluation_env(self) -> ContactEnv:
        """The env to evaluate a policy on without its learner (an env with a learned reward
        returns its fixed-reward twin); default ``self``."""
        return self

    @property
    def reward_model(self):
        """The learned part of the reward (e.g. the G1's ADD discriminator), or None. A learner
        that trains it gets it explicitly (``SHAC(..., reward_model=env.reward_model)``)."""
        return None

    def reward_model_input(self, data) -> jax.Array:
        """The learned reward's input of a state (only with a :attr:`reward_model`)."""
        raise NotImplementedError(f"{type(self).__name__} has no learned reward")

    def fell(self, data) -> jax.Array:
        """Whether the state counts as a fall in transfer evaluations; default
        :meth:`terminated`."""
        return self.terminated(data)

    def tracking_error(self, data) -> jax.Array | None:
        """Tracking error of a state in metres (data with fresh kinematics), or None (Python
        None, decided at trace time) for an env without a reference motion."""
        return None

    @property
    def foot_geom_ids(self) -> np.ndarray | None:
        """Geom ids of the feet (foot clearance and penetration in transfer), or None:
        transfer then takes geoms named ``*foot*``, else every robot geom."""
        return None

    @property
    def motor_joint_names(self) -> tuple[str, ...] | None:
        """The robot's motor order (deploy), or None: the actuators' joints in model order."""
        return None

    def native_model(self) -> mujoco.MjModel | None:
        """The native-MuJoCo model for transfer, or None: the training model with the task's
        own MJCF contact (:func:`bcg.transfer.model.native_model`)."""
        return None

    def randomize(self, mj_model: mujoco.MjModel, rng: np.random.Generator):
        """Domain randomisation of a native model for one transfer run: return a randomised
        model, or change ``mj_model`` (a copy) in place and return None; default: unchanged."""
        return None

    def native_randomization(self, spec: str | None):
        """The env's own transfer randomisation (an object with ``model(m, rng)``,
        ``episode(rng, steps, control_dt) -> (latency, pushes)``, ``init_env`` and ``notes``;
        ``spec`` selects items), or None: :meth:`randomize` plus generic latency and pushes
        (:class:`bcg.transfer.randomizer.Randomizer`)."""
        return None

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
