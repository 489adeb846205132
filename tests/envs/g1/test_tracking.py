"""G1 tracking environment: phase, reset, observation, reward, termination (no MJX step)."""

import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg.envs import POLICY_ENVS, make_env
from bcg.envs.g1 import model as gm
from bcg.envs.g1.randomization import Randomization
from bcg.envs.g1.tracking import G1Tracking, g1_tracking

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx


@pytest.fixture(scope="module")
def env():
    return make_env("g1_jump")


def _data(env, k, qvel=None, act=None, z_shift=0.0):
    """MJX data of the reference frame k (native forward kinematics, put on device)."""
    m = env.sim.mj_model
    d = mujoco.MjData(m)
    d.qpos[:] = env.reference_qpos[k]
    d.qpos[2] += z_shift
    d.qvel[:] = env.reference.qvel[k] if qvel is None else qvel
    d.act[:] = env.reference_qpos[k, 7:] if act is None else act
    d.time = k * env.sim.control_dt
    mujoco.mj_forward(m, d)
    return d, mjx.put_data(m, d)


def test_registered():
    for name in ("g1_jump", "g1_squat_jump", "g1_hop"):
        assert name in POLICY_ENVS
    env = POLICY_ENVS["g1_hop"](stiffness="soft")
    assert isinstance(env, G1Tracking) and env.clip.name == "hop"
    assert env.sim.stiffness.label == "soft"


def test_sizes_and_exposed_reference(env):
    assert env.action_size == 29 and env.observation_size == 327
    T = env.num_frames
    assert env.episode_length == T and env.clip.fps == 50.0
    assert env.reference_body_pos.shape == (T, 14, 3)
    assert env.tracked_bodies[0] == "pelvis"
    # the pelvis body origin is the free joint position: independent of the FK tables
    np.testing.assert_allclose(env.reference_body_pos[:, 0], env.reference_qpos[:, :3], atol=1e-12)
    assert len(env.foot_geom_ids) == 8
    assert env.reference.foot_height.max() > 0.1 and abs(env.reference.foot_height[0]) < 1e-6


def test_phase_from_time(env):
    dt = env.sim.control_dt
    assert int(env.frame_of(0.0)) == 0
    assert int(env.frame_of(7 * dt + 1e-4)) == 7
    assert int(env.frame_of(1e3)) == env.num_frames - 1


def test_observation_against_native_kinematics(env):
    k = 40
    d, dx = _data(env, k)
    o = np.asarray(env.observe(dx))
    m = env.sim.mj_model
    root = m.body("pelvis").id
    R = d.xmat[root].reshape(3, 3)
    assert o[0] == pytest.approx(d.qpos[2])
    np.testing.assert_allclose(o[1:7], np.concatenate([R[:, 0], R[:, 1]]), atol=1e-9)
    np.testing.assert_allclose(o[7:10], R.T @ d.qvel[:3], atol=1e-9)
    np.testing.assert_allclose(o[10:13], d.qvel[3:6], atol=1e-9)
    i = 13 + 78
    np.testing.assert_allclose(o[i : i + 29], d.qpos[7:], atol=1e-12)
    i += 58
    keys = np.stack([d.site(n).xpos - d.xpos[root] for n in gm.KEY_SITES]) @ R
    np.testing.assert_allclose(o[i : i + 15], keys.reshape(-1), atol=1e-9)
    i += 15
    assert o[i] == pytest.approx(k / (env.num_frames - 1))
    i += 1
    for h in (1, 2, 3):  # the reference ahead: root height and joints of frame k + h
        assert o[i] == pytest.approx(env.reference_qpos[k + h, 2])
        np.testing.assert_allclose(o[i + 10 : i + 39], env.reference_qpos[k + h, 7:], atol=1e-12)
        i += 54
    assert i == o.size


def test_reward_is_maximal_on_the_reference(env):
    k = 60
    _, dx = _data(env, k)
    r = float(env.reward(dx, jnp.zeros(29), dx))
    assert r == pytest.approx(env.max_reward, abs=1e-9)
    rewards = []
    for shift in (0.02, 0.05, 0.1, 0.2):
        _, off = _data(env, k, z_shift=shift)
        rewards.append(float(env.reward(dx, jnp.zeros(29), off)))
    assert all(a > b for a, b in zip([r] + rewards, rewards, strict=False))
    # action rate: servo targets jumping by the full action span cost w_action_rate
    _, moved = _data(env, k, act=env.reference_qpos[k, 7:] + env._action_map[1])
    dr = float(env.reward(dx, jnp.zeros(29), dx)) - float(env.reward(dx, jnp.zeros(29), moved))
    assert dr == pytest.approx(env.w_action_rate, rel=1e-9)


def test_termination_by_root_height(env):
    _, low = _data(env, 0, z_shift=-0.45)  # pelvis at about 0.31 m
    assert not bool(env.terminated(low))
    _, lower = _data(env, 0, z_shift=-0.5)
    assert bool(env.terminated(lower))


def test_reference_state_initialisation(env):
    dt = env.sim.control_dt
    frames = set()
    for s in range(8):
        d = env.initial_data(jax.random.PRNGKey(s))
        k = int(round(float(d.time) / dt))
        frames.add(k)
        np.testing.assert_allclose(np.asarray(d.qpos), env.reference_qpos[k], atol=1e-12)
        np.testing.assert_allclose(np.asarray(d.qvel), env.reference.qvel[k], atol=1e-12)
        np.testing.assert_allclose(np.asarray(d.act), env.reference_qpos[k, 7:], atol=1e-12)
        q, v = env.reset_state(jax.random.PRNGKey(s))
        np.testing.assert_allclose(np.asarray(q), np.asarray(d.qpos))
    assert len(frames) >= 6  # random phases


def test_reset_noise_when_randomised():
    env = g1_tracking("jump", randomization=Randomization.full().only("reset_noise"))
    dt = env.sim.control_dt
    for s in range(5):
        d = env.initial_data(jax.random.PRNGKey(s))
        k = int(round(float(d.time) / dt))
        ref = env.reference_qpos[k]
        q = np.asarray(d.qpos)
        assert 0 < np.max(np.abs(q[7:] - ref[7:])) <= 0.1 + 1e-9
        assert np.all(np.abs(q[:2] - ref[:2]) <= 0.02) and 0 <= q[2] - ref[2] <= 0.01
        assert np.linalg.norm(q[3:7]) == pytest.approx(1.0)


def test_actions_reach_every_reference_posture(env):
    q0, span, lo, hi = env._action_map
    np.testing.assert_allclose(np.asarray(env.action_to_ctrl(jnp.zeros(29))), q0)
    assert np.all(np.abs(env.reference_qpos[:, 7:] - q0) <= span)
    top = np.asarray(env.action_to_ctrl(jnp.ones(29) * 5.0))
    np.testing.assert_allclose(top, np.minimum(q0 + span, hi))


def test_csv_clip_env(tmp_path):
    from bcg.envs.g1 import clips

    p = clips.save_csv(clips.resample(clips.hop_clip(), 30.0), tmp_path / "hop.csv")
    env = g1_tracking(str(p))
    assert env.clip.fps == 50.0 and abs(env.num_frames - clips.hop_clip().num_frames) <= 2


@pytest.mark.slow
def test_mjx_plain_step_tracks_reference_briefly(env):
    """MJX G1 compile (slow): 10 control steps from a stance frame with a = 0 (targets at the
    first pose): finite, still standing, feet on the floor within a few mm."""
    d = env.initial_data(jax.random.PRNGKey(0)).replace(time=jnp.asarray(0.0))
    d = d.replace(qpos=jnp.asarray(env.reference_qpos[0]), qvel=jnp.zeros(35))
    step = jax.jit(env.plain_step)
    for _ in range(10):
        d, r, term = step(d, jnp.zeros(29))
    assert np.all(np.isfinite(np.asarray(d.qpos))) and not bool(term)
    pen = float(env.eval_metrics(d)["foot_penetration"])
    assert pen < 0.005 and float(d.qpos[2]) > 0.7
