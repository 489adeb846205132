"""Planar hopper that learns to jump (the built-in training task).

The one-legged hopper of :mod:`bcg.envs.tasks` (4 kg, hip and knee motors, gear 10 Nm, 50 Hz
control, 200 Hz physics). It starts standing (foot 5 cm above the floor, dropped) and is
rewarded for torso height above its standing height, so the policy must push off the floor,
the stiff contact that makes analytic gradients explode:

    r_t = w_h (z_{t+1} - z_stand) + w_alive - w_pitch pitch_{t+1}^2 - w_ctrl |a_t|^2

Observation (9): torso height, pitch, hip and knee angles, and the 5 joint velocities (scaled
by 0.1). Terminated when the torso drops below ``min_height`` or tilts beyond ``max_pitch``.
Actions in [-1, 1]^2 are the motor controls (ctrlrange [-1, 1]).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bcg.envs.base import ContactEnv
from bcg.envs.tasks import get as get_task
from bcg.sim.model import Sim

Z_STAND = 0.74  # torso height standing on the floor in the keyframe pose (m)


@dataclasses.dataclass(frozen=True, eq=False)
class HopperJump(ContactEnv):
    episode_length: int = 200
    height_weight: float = 10.0
    alive_weight: float = 1.0
    pitch_weight: float = 1.0
    ctrl_weight: float = 0.01
    min_height: float = 0.45
    max_pitch: float = 1.0
    reset_noise: float = 0.02

    def reset_state(self, key):
        m = self.sim.mj_model
        q0 = jnp.asarray(m.key_qpos[0])
        v0 = jnp.asarray(m.key_qvel[0])
        kq, kv = jax.random.split(key)
        n = self.reset_noise
        q = q0 + jax.random.uniform(kq, q0.shape, q0.dtype, -n, n).at[0].set(0.0)
        v = v0 + jax.random.uniform(kv, v0.shape, v0.dtype, -n, n)
        return q, v

    def observe(self, data):
        return jnp.concatenate([data.qpos[1:], 0.1 * data.qvel])

    def reward(self, data, action, next_data):
        z, pitch = next_data.qpos[1], next_data.qpos[2]
        return (
            self.height_weight * (z - Z_STAND)
            + self.alive_weight
            - self.pitch_weight * pitch**2
            - self.ctrl_weight * jnp.sum(action**2)
        )

    def terminated(self, data):
        return (data.qpos[1] < self.min_height) | (jnp.abs(data.qpos[2]) > self.max_pitch)

    def eval_metrics(self, data):
        """Per-state quantities reported by evaluations (mean over alive steps and max)."""
        return {"torso_height": data.qpos[1]}


def hopper_jump(stiffness="stiff", **kw) -> HopperJump:
    """The hopper-jump environment at a contact stiffness (see :func:`bcg.sim.load`)."""
    sim: Sim = get_task("hopper").load(stiffness=stiffness)
    return HopperJump(sim=sim, **kw)
