"""Planar hopper that learns to jump (the built-in training task).

The one-legged hopper of :mod:`bcg.envs.tasks` (4 kg, hip and knee motors, gear 10 Nm, 50 Hz
control, 200 Hz physics). It starts standing (foot 5 cm above the floor, dropped). A jump needs
a deep crouch (torso down to ~0.55 m) and an explosive extension: open-loop controls found by
a cross-entropy search in native MuJoCo lift the torso to 0.85 m (11 cm above standing) with
the foot 14 cm off the floor. The push-off and the landing are the stiff contacts that make
analytic gradients explode.

Reward (all terms smooth, so that SHAC can differentiate them):

    r_t = w_alive + w_h s(zc_{t+1} - zc_stand) + w_v s(vzc_{t+1})
          - w_pitch pitch_{t+1}^2 - w_ctrl |a_t|^2

    (w_alive, w_h, w_v, w_pitch, w_ctrl) = (0.5, 30, 5, 1, 0.01)

with zc the height of the centre of mass (from qpos by the planar kinematics, masses torso 2,
thigh 1, shin 0.5, foot 0.5 kg), zc_stand = 0.5246 m its standing value in the keyframe pose,
vzc = (d zc / dq) qdot its vertical velocity, and the smooth ramp

    s(x) = (softplus(k x) - log 2) / k,     k = ``ramp_sharpness`` = 50 per m (per m/s)

(s(0) = 0, s(x) -> x for x >> 1/k, s(x) > -log(2)/k everywhere). Standing scores ~w_alive per
step; with the foot on the floor the centre of mass can rise only ~1 cm above zc_stand (leg
straight), so the height term pays for flight. The centre of mass (not the torso or the foot)
is what a jump must raise: a term on foot clearance was exploited by tucking the leg while
falling (SHAC, 150 iterations: foot 16 cm up, torso never above standing), and tucking lowers
the centre of mass. Crouching below standing height costs at most (w_h + w_v) log(2) / k =
0.51 per step, unlike a linear height term, which made the crouch that every jump needs cost
more than the jump earned (the previous reward, ``10 (z - z_stand) + 1 - pitch^2``: policies
learned to balance, not to jump). The alive bonus is small, so standing still for the full 200
steps scores at most ~100. Native MuJoCo, keyframe start: zero action (stands, tips over at
step 61) scores 15; the open-loop CEM jump above (centre of mass 11 cm up, tips over at step 49)
scores 94; tucking the leg for 0.3 s scores 15-26. The upward-velocity weight w_v = 5 (rather
than 1) rewards the push-off of small hops enough for SHAC to find them: SHAC + analytic,
150 iterations, seed 0, 8 eval episodes: w_v = 1 learned to balance (airborne 0%), w_v = 5 to
hop (foot off the floor 26% of the steps, up to 15 cm).

Observation (9): torso height, pitch, hip and knee angles, and the 5 joint velocities (scaled
by 0.1). Terminated when the torso drops below ``min_height`` or tilts beyond ``max_pitch``.
Actions in [-1, 1]^2 are the motor controls (ctrlrange [-1, 1]).

Evaluation metrics (:meth:`HopperJump.eval_metrics`, reported as mean over alive steps and max
by :func:`bcg.learners.harness.evaluate`): ``torso_height``, ``jump_height`` (torso height
above z_stand), ``com_rise`` (centre-of-mass height above zc_stand), ``foot_clearance`` and
``airborne`` (1 when the foot is more than 1 cm above the floor); the last four count only
after ``settle_time`` (0.3 s, past the initial drop; 0 before), so ``airborne_mean`` is the
fraction of alive steps in the air after settling.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from bcg.envs.base import ContactEnv
from bcg.envs.tasks import get as get_task
from bcg.sim.model import Sim

Z_STAND = 0.74  # torso height standing on the floor in the keyframe pose (m)
ZC_STAND = 0.5246  # centre-of-mass height standing in the keyframe pose (m)
HIP_OFFSET = 0.1  # torso centre to hip (m)
THIGH, SHIN = 0.3, 0.3  # segment lengths (m)
FOOT_RADIUS = 0.05  # m
MASSES = (2.0, 1.0, 0.5, 0.5)  # torso, thigh, shin, foot (kg)
AIRBORNE_CLEARANCE = 0.01  # foot clearance (m) above which the eval metric counts airborne


def smooth_ramp(x, sharpness):
    """(softplus(k x) - log 2) / k: 0 at 0, ~x for x >> 1/k, > -log(2)/k everywhere."""
    return (jax.nn.softplus(sharpness * x) - math.log(2.0)) / sharpness


def _joint_heights(qpos):
    """Heights (m) of the torso centre, hip, knee and foot centre from qpos (planar chain)."""
    z, pitch, hip, knee = qpos[1], qpos[2], qpos[3], qpos[4]
    z_hip = z - HIP_OFFSET * jnp.cos(pitch)
    z_knee = z_hip - THIGH * jnp.cos(pitch - hip)
    z_foot = z_knee - SHIN * jnp.cos(pitch - hip - knee)
    return z, z_hip, z_knee, z_foot


def foot_clearance(qpos):
    """Height of the foot sphere's bottom above the floor (m) from qpos (planar kinematics)."""
    return _joint_heights(qpos)[3] - FOOT_RADIUS


def com_height(qpos):
    """Height of the hopper's centre of mass (m) from qpos: torso (2 kg) at its centre, thigh
    (1 kg) and shin (0.5 kg) at their midpoints, foot (0.5 kg) at the sphere's centre."""
    z, z_hip, z_knee, z_foot = _joint_heights(qpos)
    return (
        MASSES[0] * z
        + MASSES[1] * 0.5 * (z_hip + z_knee)
        + MASSES[2] * 0.5 * (z_knee + z_foot)
        + MASSES[3] * z_foot
    ) / sum(MASSES)


def com_velocity(qpos, qvel):
    """Vertical velocity of the centre of mass (m/s): d com_height / dq . qdot (nq = nv)."""
    return jax.jvp(com_height, (qpos,), (qvel.astype(qpos.dtype),))[1]


@dataclasses.dataclass(frozen=True, eq=False)
class HopperJump(ContactEnv):
    episode_length: int = 200
    height_weight: float = 30.0
    velocity_weight: float = 5.0
    alive_weight: float = 0.5
    pitch_weight: float = 1.0
    ctrl_weight: float = 0.01
    ramp_sharpness: float = 50.0
    min_height: float = 0.45
    max_pitch: float = 1.0
    reset_noise: float = 0.02
    settle_time: float = 0.3

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
        q, v = next_data.qpos, next_data.qvel
        k = self.ramp_sharpness
        return (
            self.alive_weight
            + self.height_weight * smooth_ramp(com_height(q) - ZC_STAND, k)
            + self.velocity_weight * smooth_ramp(com_velocity(q, v), k)
            - self.pitch_weight * q[2] ** 2
            - self.ctrl_weight * jnp.sum(action**2)
        )

    def terminated(self, data):
        return (data.qpos[1] < self.min_height) | (jnp.abs(data.qpos[2]) > self.max_pitch)

    def eval_metrics(self, data):
        """Per-state quantities reported by evaluations (mean over alive steps and max)."""
        settled = data.time >= self.settle_time
        c = foot_clearance(data.qpos)
        zero = jnp.zeros_like(c)
        return {
            "torso_height": data.qpos[1],
            "jump_height": jnp.where(settled, data.qpos[1] - Z_STAND, zero),
            "com_rise": jnp.where(settled, com_height(data.qpos) - ZC_STAND, zero),
            "foot_clearance": jnp.where(settled, c, zero),
            "airborne": jnp.where(settled & (c > AIRBORNE_CLEARANCE), 1.0, 0.0).astype(c.dtype),
        }


def hopper_jump(stiffness="stiff", **kw) -> HopperJump:
    """Planar one-legged hopper learning to jump (:mod:`bcg.envs.hopper_jump`)."""
    sim: Sim = get_task("hopper").load(stiffness=stiffness)
    return HopperJump(sim=sim, **kw)
