"""Pogo stick that learns to hop: the small built-in training task of the README's main job.

A 2 kg body on a vertical slide carries a 0.3 kg leg on a spring-loaded prismatic joint (spring
600 N/m, damping 2 N s/m) that ends in a foot sphere (r 3 cm); one motor pushes the leg out or
pulls it in (gear 40 N, ctrl in [-1, 1]). 50 Hz control, 200 Hz physics. Two degrees of
freedom, one contact: the model compiles in seconds, and every landing and push-off is a stiff
impact (the contact the learners differentiate through).

Standing, the spring carries the body at ``Z_STAND`` = 0.30 m (native MuJoCo, zero action). A hop
needs the leg pushed out against the floor and pulled in during flight: constant full thrust only
raises the body about 6 cm and keeps the foot on the floor (both tested), while a hand-written
feedback (thrust while the foot is down and the body not falling faster than 0.2 m/s, retract
otherwise) hops it 1.09 m above standing (native MuJoCo, stiff and gated contact).

Reward (smooth, so that SHAC can differentiate it):

    r_t = w_alive + w_h s(z_{t+1} - Z_STAND) + w_v s(vz_{t+1}) - w_ctrl a_t^2,
    (w_alive, w_h, w_v, w_ctrl) = (0.5, 20, 1, 0.01),

``s(x) = (softplus(k x) - log 2) / k`` with k = 50 (see :func:`bcg.envs.hopper_jump.smooth_ramp`):
height above standing pays, sinking below it costs at most ``(w_h + w_v) log 2 / k``. Episodes
last 100 control steps (2 s) and never terminate (the body cannot fall over).

Observation (4): body height above standing, leg extension, and their velocities x 0.1.
Evaluation metrics: ``hop_height`` (body height above standing) and ``airborne`` (foot more than
1 cm above the floor), reported as mean and max over the episode.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bcg.envs.base import ContactEnv
from bcg.envs.hopper_jump import smooth_ramp
from bcg.envs.tasks import POGO_XML
from bcg.sim.model import Sim
from bcg.sim.model import load as _load_sim

LEG_LENGTH = 0.3  # body centre to foot centre at zero extension (m)
FOOT_RADIUS = 0.03
Z_STAND = 0.30  # body height standing, zero action (native MuJoCo; see the tests)
AIRBORNE_CLEARANCE = 0.01


def foot_clearance(qpos):
    """Height of the foot sphere's bottom above the floor (m): z - (L + ext) - r."""
    return qpos[0] - (LEG_LENGTH + qpos[1]) - FOOT_RADIUS


@dataclasses.dataclass(frozen=True, eq=False)
class PogoHop(ContactEnv):
    episode_length: int = 100
    height_weight: float = 20.0
    velocity_weight: float = 1.0
    alive_weight: float = 0.5
    ctrl_weight: float = 0.01
    ramp_sharpness: float = 50.0
    reset_noise: float = 0.02

    def reset_state(self, key):
        kq, kv = jax.random.split(key)
        n = self.reset_noise
        q = jnp.array([Z_STAND, 0.0]) + jax.random.uniform(kq, (2,), minval=-n, maxval=n)
        q = q.at[0].set(jnp.maximum(q[0], LEG_LENGTH + q[1] + FOOT_RADIUS))  # foot not in floor
        v = jax.random.uniform(kv, (2,), minval=-10 * n, maxval=10 * n)
        return q, v

    def observe(self, data):
        q, v = data.qpos, data.qvel
        return jnp.stack([q[0] - Z_STAND, q[1], 0.1 * v[0], 0.1 * v[1]])

    def reward(self, data, action, next_data):
        q, v = next_data.qpos, next_data.qvel
        k = self.ramp_sharpness
        return (
            self.alive_weight
            + self.height_weight * smooth_ramp(q[0] - Z_STAND, k)
            + self.velocity_weight * smooth_ramp(v[0], k)
            - self.ctrl_weight * jnp.sum(action**2)
        )

    def eval_metrics(self, data):
        """Per-state quantities reported by evaluations (mean over alive steps and max)."""
        c = foot_clearance(data.qpos)
        return {
            "hop_height": data.qpos[0] - Z_STAND,
            "airborne": jnp.where(c > AIRBORNE_CLEARANCE, 1.0, 0.0).astype(c.dtype),
        }


def pogo_hop(stiffness="stiff", **kw) -> PogoHop:
    """Spring-leg pogo stick learning to hop (:mod:`bcg.envs.pogo`)."""
    sim: Sim = _load_sim(POGO_XML, stiffness=stiffness, name="pogo")
    return PogoHop(sim=sim, **kw)
