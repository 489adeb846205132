"""Reward and eval metrics of the hopper-jump task (cheap: no training, no physics steps)."""

from __future__ import annotations

import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.envs import hopper_jump
from bcg.envs.hopper_jump import (
    FOOT_RADIUS,
    Z_STAND,
    ZC_STAND,
    com_height,
    com_velocity,
    foot_clearance,
)
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


def test_com_height_and_velocity_match_mujoco():
    env = hopper_jump("stiff")
    m = env.sim.mj_model
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    for _ in range(5):
        d.qpos[:] = m.key_qpos[0] + rng.uniform(-0.5, 0.5, m.nq)
        d.qvel[:] = rng.normal(size=m.nv)
        mujoco.mj_forward(m, d)
        mujoco.mj_subtreeVel(m, d)
        q, v = jnp.asarray(d.qpos), jnp.asarray(d.qvel)
        np.testing.assert_allclose(float(com_height(q)), d.subtree_com[1][2], atol=1e-6)
        np.testing.assert_allclose(float(com_velocity(q, v)), d.subtree_linvel[1][2], atol=1e-5)


def test_tucked_leg_is_not_a_jump():
    env = hopper_jump("stiff")
    a = jnp.zeros(2)
    stand = _state(env, Z_STAND, 0.0)
    # leg tucked, foot off the floor, centre of mass 1 cm below standing (without a push from
    # the floor the centre of mass cannot rise: tucking lowers the torso instead)
    tuck = _state(env, Z_STAND, 0.0, hip=1.0, knee=-2.0)
    dz = ZC_STAND - 0.01 - float(com_height(tuck.qpos))  # com height is z + f(angles)
    tuck = _state(env, Z_STAND + dz, 0.0, hip=1.0, knee=-2.0)
    assert float(foot_clearance(tuck.qpos)) > 0.05
    assert float(env.reward(stand, a, tuck)) < float(env.reward(stand, a, stand))


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
    # the crouch a jump needs costs at most the ramps' lower bound, (w_h + w_v) log2 / k
    bound = (env.height_weight + env.velocity_weight) * np.log(2.0)
    assert r_crouch > r_stand - bound / env.ramp_sharpness - env.pitch_weight * 1e-6


def test_eval_metrics_gate_on_settle_time():
    env = hopper_jump("stiff")
    air = _state(env, Z_STAND + 0.1, 1.0)
    m = env.eval_metrics(air)
    assert float(m["airborne"]) == 1.0
    np.testing.assert_allclose(float(m["jump_height"]), 0.1, atol=1e-6)
    assert float(m["foot_clearance"]) > 0.05
    assert float(m["com_rise"]) > 0.05
    early = env.eval_metrics(_state(env, Z_STAND + 0.1, 1.0, time=0.0))
    assert float(early["airborne"]) == 0.0 and float(early["jump_height"]) == 0.0
    assert "torso_height" in m
