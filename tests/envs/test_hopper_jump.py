"""Reward and eval metrics of the hopper-jump task (cheap: no training, no physics steps)."""

from __future__ import annotations

import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.envs import hopper_jump
from bcg.envs.hopper_jump import FOOT_RADIUS, Z_STAND, foot_clearance
from bcg.sim.step import make_data


def _state(env, z, vz, hip=0.2, knee=-0.4, time=1.0):
    d = make_data(env.sim)
    q = jnp.asarray([0.0, z, 0.0, hip, knee], d.qpos.dtype)
    v = jnp.asarray([0.0, vz, 0.0, 0.0, 0.0], d.qvel.dtype)
    return d.replace(qpos=q, qvel=v, time=jnp.asarray(time, d.time.dtype))


def test_foot_clearance_matches_mujoco_kinematics():
    env = hopper_jump("stiff")
    m = env.sim.mj_model
    d = mujoco.MjData(m)
    foot = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "foot")
    rng = np.random.default_rng(0)
    for _ in range(5):
        d.qpos[:] = m.key_qpos[0] + rng.uniform(-0.5, 0.5, m.nq)
        mujoco.mj_forward(m, d)
        want = d.geom_xpos[foot][2] - FOOT_RADIUS
        np.testing.assert_allclose(float(foot_clearance(jnp.asarray(d.qpos))), want, atol=1e-6)


def test_airborne_rising_beats_standing_and_crouch_is_not_penalised():
    env = hopper_jump("stiff")
    a = jnp.zeros(2)
    stand = _state(env, Z_STAND, 0.0)
    air = _state(env, Z_STAND + 0.1, 1.0)  # 10 cm above standing, foot ~10 cm up, rising
    crouch = _state(env, 0.6, 0.0, hip=0.7, knee=-1.4)  # torso 14 cm below standing
    r_stand = float(env.reward(stand, a, stand))
    r_air = float(env.reward(stand, a, air))
    r_crouch = float(env.reward(stand, a, crouch))
    assert r_air > r_stand + 2.0
    assert abs(r_stand - env.alive_weight) < 0.05  # standing: ~ the alive bonus only
    # the crouch a jump needs costs at most the ramps' lower bound, (w_h + w_foot + w_v) log2 / k
    bound = (env.height_weight + env.foot_weight + env.velocity_weight) * np.log(2.0)
    assert r_crouch > r_stand - bound / env.ramp_sharpness - env.pitch_weight * 1e-6


def test_eval_metrics_gate_on_settle_time():
    env = hopper_jump("stiff")
    air = _state(env, Z_STAND + 0.1, 1.0)
    m = env.eval_metrics(air)
    assert float(m["airborne"]) == 1.0
    np.testing.assert_allclose(float(m["jump_height"]), 0.1, atol=1e-6)
    assert float(m["foot_clearance"]) > 0.05
    early = env.eval_metrics(_state(env, Z_STAND + 0.1, 1.0, time=0.0))
    assert float(early["airborne"]) == 0.0 and float(early["jump_height"]) == 0.0
    assert "torso_height" in m
