"""Pogo-hop environment: kinematics and standing height against native MuJoCo, reward terms."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg.envs import make_env
from bcg.envs.pogo import FOOT_RADIUS, Z_STAND, foot_clearance, pogo_hop
from bcg.sim.step import make_data


@pytest.fixture(scope="module")
def env():
    return pogo_hop("stiff")


def _native_run(m, ctrl, steps):
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    zs = []
    for _ in range(steps):
        d.ctrl[:] = ctrl
        for _ in range(4):
            mujoco.mj_step(m, d)
        zs.append(d.qpos[0])
    return np.array(zs), d


def test_registered():
    assert make_env("pogo_hop").sim.nu == 1


def test_foot_clearance_matches_mujoco_geometry(env):
    m = env.sim.mj_model
    d = mujoco.MjData(m)
    foot = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "foot")
    rng = np.random.default_rng(0)
    for _ in range(5):
        d.qpos[:] = [rng.uniform(0.2, 1.0), rng.uniform(-0.1, 0.1)]
        mujoco.mj_kinematics(m, d)
        want = d.geom_xpos[foot, 2] - FOOT_RADIUS
        assert float(foot_clearance(jnp.asarray(d.qpos))) == pytest.approx(want, abs=1e-9)


def test_stands_at_z_stand_with_zero_action(env):
    zs, d = _native_run(env.sim.mj_model, [0.0], 100)
    assert np.mean(zs[-25:]) == pytest.approx(Z_STAND, abs=0.01)
    assert abs(foot_clearance(d.qpos)) < 0.005  # foot on the floor


def test_constant_thrust_does_not_hop(env):
    """Pushing the leg out all the time raises the body but keeps the foot down: a hop needs
    timing (what the policy has to learn)."""
    zs, d = _native_run(env.sim.mj_model, [1.0], 100)
    assert zs[-25:].mean() > Z_STAND + 0.03
    assert abs(foot_clearance(d.qpos)) < 0.005


def test_reward_terms(env):
    d = make_data(env.sim)
    a = jnp.zeros(1)
    stand = d.replace(qpos=jnp.array([Z_STAND, 0.0]), qvel=jnp.zeros(2))
    up = d.replace(qpos=jnp.array([Z_STAND + 0.5, 0.0]), qvel=jnp.array([1.0, 0.0]))
    r_stand = float(env.reward(stand, a, stand))
    r_up = float(env.reward(stand, a, up))
    assert r_stand == pytest.approx(env.alive_weight, abs=1e-6)
    # s(x) ~ x for x >> 1/k: 20 * 0.5 + 1 * 1.0 above the alive bonus, within log(2)/k each
    assert r_up == pytest.approx(env.alive_weight + 10.0 + 1.0, abs=(20 + 1) * np.log(2) / 50)
    g = jax.grad(lambda z: env.reward(stand, a, stand.replace(qpos=jnp.array([z, 0.0]))))(1.0)
    assert float(g) == pytest.approx(env.height_weight, rel=1e-3)


def test_observation_and_metrics(env):
    d = env.initial_data(jax.random.PRNGKey(0))
    assert env.observe(d).shape == (4,)
    assert env.observation_size == 4 and env.action_size == 1
    air = d.replace(qpos=jnp.array([Z_STAND + 0.2, 0.0]))
    m = env.eval_metrics(air)
    assert float(m["hop_height"]) == pytest.approx(0.2, abs=1e-6)
    assert float(m["airborne"]) == 1.0
    assert float(foot_clearance(d.qpos)) >= -1e-9  # reset never puts the foot in the floor


@pytest.mark.parametrize("stiffness", ["gated", "gated:0.01", "stiff", 0.03])
def test_ppo_rebuilds_the_same_contact(stiffness):
    """PPO rebuilds the env from a stiffness spec: a gated contact must keep its impedance."""
    from bcg.learners.ppo import _stiffness_spec

    env = pogo_hop(stiffness)
    again = pogo_hop(_stiffness_spec(env))
    np.testing.assert_array_equal(again.sim.mj_model.geom_solimp, env.sim.mj_model.geom_solimp)
    np.testing.assert_array_equal(again.sim.mj_model.geom_solref, env.sim.mj_model.geom_solref)
