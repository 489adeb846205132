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
    assert dr == pytest.approx(env.scales["w_action_rate"], rel=1e-9)


def test_foot_height_term_weighs_the_flight(env):
    """w_feet exp(-(h - h*)^2 / sigma_feet^2): on the reference it adds w_feet; at the flight's
    peak frame, feet 5 cm lower than the reference's cost exactly w_feet (1 - exp(-0.05^2 /
    sigma^2)) more than the other terms' loss of the same shift (the root moves with them)."""

    feet = env.with_scales(w_feet=2.0)
    k = int(np.argmax(env.reference.foot_height))
    assert env.reference.foot_height[k] > 0.1  # the jump's flight
    _, dx = _data(env, k)
    assert float(feet.reward(dx, jnp.zeros(29), dx)) == pytest.approx(feet.max_reward, abs=1e-9)
    assert feet.max_reward == pytest.approx(env.max_reward + 2.0)
    _, low = _data(env, k, z_shift=-0.05)
    added = float(feet.reward(dx, jnp.zeros(29), low)) - float(env.reward(dx, jnp.zeros(29), low))
    assert added == pytest.approx(2.0 * np.exp(-(0.05**2) / 0.1**2), rel=1e-6)


def test_flight_term_is_the_reached_share_of_the_clearance(env):
    """w_flight [h* > 5 mm] min(h / h*, 1): w_flight on the reference at the flight's peak,
    the reached share of h* with the feet 5 cm lower, and nothing in a stance frame."""

    fly = env.with_scales(w_flight=3.0)
    k = int(np.argmax(env.reference.foot_height))
    h = float(env.reference.foot_height[k])
    _, dx = _data(env, k)
    assert float(fly.reward(dx, jnp.zeros(29), dx)) == pytest.approx(fly.max_reward, abs=1e-9)
    _, low = _data(env, k, z_shift=-0.05)
    added = float(fly.reward(dx, jnp.zeros(29), low)) - float(env.reward(dx, jnp.zeros(29), low))
    assert added == pytest.approx(3.0 * (h - 0.05) / h, rel=1e-4)
    _, stand = _data(env, 0)
    assert env.reference.foot_height[0] < 0.005
    gap = float(fly.reward(stand, jnp.zeros(29), stand)) - float(
        env.reward(stand, jnp.zeros(29), stand)
    )
    assert gap == 0.0


def test_flight_term_pulls_up_a_foot_still_on_the_floor(env):
    """In a flight frame with the feet pressed 1 mm into the floor, d(flight term)/d(root z)
    is w_flight / h*: the term's gradient reaches feet that have not left the ground yet (a
    share clipped at 0 would give no gradient there)."""

    fly = env.with_scales(w_flight=3.0)
    k = int(np.argmax(env.reference.foot_height))
    h = float(env.reference.foot_height[k])
    _, dx = _data(env, k, z_shift=-h - 0.001)  # lowest foot 1 mm below the floor

    def flight(z):
        d = dx.replace(qpos=dx.qpos.at[2].add(z))
        return fly.tracking_errors(d)["flight"]

    assert float(flight(0.0)) == pytest.approx(-0.001 / h, rel=1e-3)
    assert float(jax.grad(flight)(0.0)) == pytest.approx(1.0 / h, rel=1e-6)


def test_takeoff_term_asks_for_the_reference_vertical_speed(env):
    """w_takeoff: in a push-off frame (reference root rising faster than 0.3 m/s) the term is
    v_z / v*_z below v*_z, with gradient 1 / v*_z in the root's vertical speed, and 1 above;
    outside those frames it is 0 and has no gradient."""

    push = env.with_scales(w_takeoff=2.0)
    vref = np.asarray(env._ref["qvel"])[:, 2]
    k = int(np.argmax(vref))
    assert vref[k] > 0.3
    _, dx = _data(env, k)

    def takeoff(vz, d=dx):
        return push.tracking_errors(d.replace(qvel=d.qvel.at[2].set(vz)))["takeoff"]

    assert float(takeoff(0.25 * vref[k])) == pytest.approx(0.25, rel=1e-4)
    assert float(jax.grad(takeoff)(0.0)) == pytest.approx(1.0 / vref[k], rel=1e-5)
    assert float(takeoff(2.0 * vref[k])) == pytest.approx(1.0)
    _, still = _data(env, 0)
    assert float(takeoff(1.0, still)) == 0.0 and float(jax.grad(takeoff)(1.0, still)) == 0.0
    assert push.max_reward == pytest.approx(env.max_reward + 2.0)


def test_tuck_term_rewards_the_reference_leg_retraction_even_on_the_floor(env):
    """w_tuck: in a flight frame, 1 - |(z - h) - (z* - h*)| / 0.2 m; the reference state
    scores 1 and the same posture lowered onto the floor too (a function of the joints), and
    bending the knees changes it with a non-zero gradient while a foot is pressed into the
    floor; outside the flight frames it is 0."""

    tuck = env.with_scales(w_tuck=1.5)
    k = int(np.argmax(env.reference.foot_height))
    h = float(env.reference.foot_height[k])
    _, dx = _data(env, k)
    assert float(tuck.tracking_errors(dx)["tuck"]) == pytest.approx(1.0, abs=1e-5)
    _, down = _data(env, k, z_shift=-h - 0.001)
    assert float(tuck.tracking_errors(down)["tuck"]) == pytest.approx(1.0, abs=1e-5)
    knees = [
        i
        for i, j in enumerate(env.sim.mj_model.actuator_trnid[:, 0])
        if "knee" in env.sim.mj_model.joint(int(j)).name
    ]

    def share(dq, d=down):
        q = d.qpos.at[jnp.asarray(knees) + 7].add(dq)
        return tuck.tracking_errors(d.replace(qpos=q))["tuck"]

    assert abs(float(jax.grad(share)(0.05))) > 0.05  # (1 / 0.2 m) d(leg height)/d(knees)
    assert float(share(0.05)) < 1.0
    _, still = _data(env, 0)
    assert float(tuck.tracking_errors(still)["tuck"]) == 0.0
    assert tuck.max_reward == pytest.approx(env.max_reward + 1.5)


def test_balance_term_is_the_capture_point_offset_from_the_feet(env):
    """w_balance: in a stance frame the reference scores w_balance; the whole robot moved 10 cm
    sideways keeps it (the offset is relative to the feet, unlike the root term); a root
    velocity change dv gives exp(-|dv|^2 (z / g) / sigma^2) (the capture point moves by
    dv sqrt(z / g)); in a flight frame the term is 0."""

    bal = env.with_scales(w_balance=2.0, sigma_balance=0.1)
    assert bal.max_reward == pytest.approx(env.max_reward + 2.0)
    k = env.num_frames - 1
    assert env.reference.foot_height[k] < 0.005  # standing after the landing
    _, dx = _data(env, k)
    e = bal.tracking_errors(dx)
    assert float(e["balance"]) == pytest.approx(0.0, abs=1e-12)
    assert float(e["balance_on"]) == 1.0
    q = np.array(env.reference_qpos[k])
    q[1] += 0.1
    m = env.sim.mj_model
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.time = q, env.reference.qvel[k], k * env.sim.control_dt
    moved = mjx.put_data(m, d)
    assert float(bal.tracking_errors(moved)["balance"]) == pytest.approx(0.0, abs=1e-12)
    assert float(bal.tracking_errors(moved)["root_pos"]) == pytest.approx(0.01, rel=1e-6)
    qvel = np.array(env.reference.qvel[k])
    qvel[0] += 0.3
    _, fast = _data(env, k, qvel=qvel)
    z = float(env.reference.body_pos[k, 0, 2])
    expected = 0.3**2 * max(z, 0.3) / 9.81
    assert float(bal.tracking_errors(fast)["balance"]) == pytest.approx(expected, rel=1e-6)
    added = float(bal.reward(dx, jnp.zeros(29), fast)) - float(env.reward(dx, jnp.zeros(29), fast))
    assert added == pytest.approx(2.0 * np.exp(-expected / 0.1**2), rel=1e-6)
    f = int(np.argmax(env.reference.foot_height))
    _, fly = _data(env, f)
    assert float(bal.tracking_errors(fly)["balance_on"]) == 0.0
    with pytest.raises(ValueError, match="sigma_balance"):
        env.with_scales(sigma_balance=0.0)


def test_stance_term_is_the_feet_spread_against_the_reference(env):
    """w_stance: 1 - |d - d*| / 0.3 m with d the left-minus-right foot centre in the root's
    heading frame: 1 on the reference, unchanged by a yaw of the whole robot, and for a leg
    spread by the hip roll the share of native kinematics' spread, with a gradient."""

    st = env.with_scales(w_stance=3.0)
    assert st.max_reward == pytest.approx(env.max_reward + 3.0)
    k = 0
    m = env.sim.mj_model
    feet = env.foot_geom_ids
    ref = env.reference.stance[k]
    assert abs(ref[0]) < 0.01 and 0.15 < ref[1] < 0.35  # left foot to the left
    _, dx = _data(env, k)
    assert float(st.tracking_errors(dx)["stance"]) == pytest.approx(1.0, abs=1e-5)
    d = mujoco.MjData(m)
    d.qpos[:] = env.reference_qpos[k]
    yaw = 0.3
    d.qpos[3:7] = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]  # (the reference root is level)
    mujoco.mj_kinematics(m, d)
    turned = mjx.put_data(m, d)
    assert float(st.tracking_errors(turned)["stance"]) == pytest.approx(1.0, abs=1e-5)
    hip = m.joint("left_hip_roll_joint").qposadr[0]
    d.qpos[:] = env.reference_qpos[k]
    d.qpos[hip] += 0.2
    mujoco.mj_kinematics(m, d)
    spread = d.geom_xpos[feet[:4], :2].mean(0) - d.geom_xpos[feet[4:], :2].mean(0)
    expected = 1.0 - np.linalg.norm(spread - ref) / 0.3
    assert 0.3 < expected < 0.95
    wide = mjx.put_data(m, d)
    assert float(st.tracking_errors(wide)["stance"]) == pytest.approx(expected, abs=1e-5)

    def share(dq):
        return st.tracking_errors(wide.replace(qpos=wide.qpos.at[hip].add(dq)))["stance"]

    assert float(jax.grad(share)(0.0)) < -0.3  # more spread, less share


def test_observe_command_appends_the_command_in_flight(env):
    """observe_command: the 327 features, then (ctrl - q) / s of the state's ctrl (the last
    command sent)."""
    import dataclasses

    cmd = dataclasses.replace(env, observe_command=True)
    k = 60
    _, dx = _data(env, k)
    u = env.reference_qpos[k, 7:] + np.linspace(-0.2, 0.2, 29)
    dx = dx.replace(ctrl=jnp.asarray(u, dx.ctrl.dtype))
    o, oc = np.asarray(env.observe(dx)), np.asarray(cmd.observe(dx))
    assert oc.shape == (356,) and cmd.observation_size == 356 and env.observation_size == 327
    np.testing.assert_array_equal(oc[:327], o)
    want = (u - np.asarray(dx.qpos[7:])) / env._action_map[1]
    np.testing.assert_allclose(oc[327:], want, rtol=1e-5, atol=1e-7)


def test_termination_by_root_height(env):
    _, low = _data(env, 0, z_shift=-0.45)  # pelvis at about 0.31 m
    assert not bool(env.terminated(low))
    _, lower = _data(env, 0, z_shift=-0.5)
    assert bool(env.terminated(lower))


def test_feet_error_limit_terminates_a_robot_that_keeps_its_feet_down(env):
    """``feet_error_limit``: at the flight's peak the reference state goes on, the same pose
    with the lowest foot on the floor ends the episode (|h - h*| = h* > limit), one with the
    feet 2 cm low does not; in a stance frame a foot lifted beyond the limit ends it too. A
    fall in transfer (``fell``) stays the root height."""
    import dataclasses

    strict = dataclasses.replace(env, feet_error_limit=0.08)
    k = int(np.argmax(env.reference.foot_height))
    h = float(env.reference.foot_height[k])
    assert h > 0.1
    _, dx = _data(env, k)
    assert not bool(strict.terminated(dx)) and not bool(env.terminated(dx))
    _, down = _data(env, k, z_shift=-h)
    assert bool(strict.terminated(down)) and not bool(strict.fell(down))
    assert not bool(env.terminated(down))
    _, near = _data(env, k, z_shift=-0.02)
    assert not bool(strict.terminated(near))
    _, up = _data(env, 0, z_shift=0.09)
    assert bool(strict.terminated(up)) and not bool(strict.fell(up))
    _, fallen = _data(env, 0, z_shift=-0.5)
    assert bool(strict.fell(fallen)) and bool(strict.terminated(fallen))
    with pytest.raises(ValueError, match="feet_error_limit must be > 0"):
        dataclasses.replace(env, feet_error_limit=0.0)


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


def test_start_focus_draws_its_share_of_resets_from_the_window(env):
    import dataclasses

    dt = env.sim.control_dt
    focus = dataclasses.replace(env, start_focus=[60, 70], start_focus_prob=0.5)
    assert focus.start_focus == (60, 70)  # a JSON list from --param becomes a tuple
    keys = jax.random.split(jax.random.PRNGKey(0), 400)
    frames = np.asarray(jax.vmap(lambda k: jnp.round(focus.initial_data(k).time / dt))(keys))
    inside = np.mean((frames >= 60) & (frames < 70))
    # 0.5 from the window + 0.5 * 10 / 155 from the uniform draw; 400 draws: sd ~0.025
    assert 0.42 < inside < 0.64 and len(set(frames[(frames < 60) | (frames >= 70)])) > 50
    only = dataclasses.replace(env, start_focus=(60, 70), start_focus_prob=1.0)
    f_only = np.asarray(jax.vmap(lambda k: jnp.round(only.initial_data(k).time / dt))(keys[:50]))
    assert f_only.min() >= 60 and f_only.max() <= 69
    for bad, msg in [((70, 60), "start_focus"), ((0, 500), "start_focus"), ((0,), "start_focus")]:
        with pytest.raises(ValueError, match=msg):
            dataclasses.replace(env, start_focus=bad)
    with pytest.raises(ValueError, match="start_focus_prob"):
        dataclasses.replace(env, start_focus_prob=1.5)


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


def test_residual_actions_are_around_the_current_reference_frame():
    env = g1_tracking("jump", actions="residual", residual_scale=0.2)
    _, _, lo, hi = env._action_map
    dt = env.sim.control_dt
    for k in (0, 17, env.num_frames - 1):
        d = env.initial_data(jax.random.PRNGKey(0)).replace(time=jnp.asarray(k * dt))
        ref = np.clip(env.reference_qpos[k, 7:], lo, hi)
        np.testing.assert_allclose(np.asarray(env.action_to_ctrl(jnp.zeros(29), d)), ref, atol=1e-6)
        up = np.asarray(env.action_to_ctrl(jnp.ones(29) * 3.0, d))
        np.testing.assert_allclose(up, np.clip(env.reference_qpos[k, 7:] + 0.2, lo, hi), atol=1e-6)
    with pytest.raises(ValueError, match="need the state"):
        env.action_to_ctrl(jnp.zeros(29))
    with pytest.raises(ValueError, match="action mode"):
        g1_tracking("jump", actions="torque")


def test_velocity_feedforward_makes_the_servo_track_the_reference_velocity():
    """``velocity_feedforward=1``: MuJoCo's servo force at the env's command is
    ``kp (q* + s a - q) + kd (qdot* - qdot)``; at 0 it is ``kp (q* + s a - q) - kd qdot``."""
    k, s = 70, 0.2  # the push-off: the reference's knees extend fast
    forces = {}
    for c in (0.0, 1.0):
        env = g1_tracking("jump", actions="residual", residual_scale=s, velocity_feedforward=c)
        m = env.sim.mj_model
        d = mujoco.MjData(m)
        d.qpos[:] = env.reference_qpos[k]
        d.qpos[7:] += 0.01 * np.sin(np.arange(29))
        d.qvel[:] = env.reference.qvel[k]
        d.qvel[6:] += 0.3 * np.cos(np.arange(29))
        d.time = k * env.sim.control_dt
        a = 0.1 * np.sin(3.0 * np.arange(29))
        dx = mjx.put_data(m, d)
        d.ctrl[:] = np.asarray(env.action_to_ctrl(jnp.asarray(a, jnp.float32), dx))
        d.act[:] = d.ctrl  # the servo filter's state at its input
        mujoco.mj_forward(m, d)
        kp, kd = m.actuator_gainprm[:, 0], -m.actuator_biasprm[:, 2]
        q, qd = d.qpos[7:], d.qvel[6:]
        qs, qds = env.reference_qpos[k, 7:], env.reference.qvel[k, 6:]
        want = kp * (qs + s * a - q) + kd * (c * qds - qd)
        u = qs + s * a + c * kd / kp * qds
        lo, hi = m.actuator_ctrlrange.T
        limit = np.where(m.actuator_forcelimited, m.actuator_forcerange[:, 1], np.inf)
        inside = (np.abs(want) < 0.9 * limit) & (u > lo + 0.01) & (u < hi - 0.01)
        assert inside.sum() >= 10
        np.testing.assert_allclose(d.actuator_force[inside], want[inside], rtol=2e-4, atol=2e-3)
        forces[c] = d.actuator_force.copy()
    knee = [i for i in range(29) if "knee" in m.joint(int(m.actuator_trnid[i, 0])).name]
    assert np.all(np.abs(forces[1.0][knee] - forces[0.0][knee]) > 1.0)  # the term matters there
    with pytest.raises(ValueError, match="velocity_feedforward"):
        g1_tracking("jump", actions="residual", velocity_feedforward=-1.0)


def test_legs_get_their_own_residual_range():
    """``leg_residual_scale``: the 12 hip, knee and ankle joints move by it per unit action,
    the waist and arms by ``residual_scale``; ``action_scales`` says the same."""
    env = g1_tracking("jump", actions="residual", residual_scale=0.2, leg_residual_scale=0.4)
    _, _, lo, hi = env._action_map
    d = env.initial_data(jax.random.PRNGKey(0)).replace(time=jnp.asarray(0.0))
    ref = env.reference_qpos[0, 7:]
    inside = (ref - 0.45 > lo) & (ref + 0.45 < hi)
    a = 0.5 * np.ones(29, np.float32)
    moved = (np.asarray(env.action_to_ctrl(jnp.asarray(a), d)) - ref) / a
    m = env.sim.mj_model
    names = [m.joint(int(j)).name for j in m.actuator_trnid[:, 0]]
    legs = np.array([any(p in n for p in ("hip", "knee", "ankle")) for n in names])
    assert legs.sum() == 12 and legs[:12].all()
    np.testing.assert_allclose(moved[inside & legs], 0.4, atol=1e-5)
    np.testing.assert_allclose(moved[inside & ~legs], 0.2, atol=1e-5)
    np.testing.assert_allclose(env.action_scales, np.where(legs, 0.4, 0.2))
    with pytest.raises(ValueError, match="leg_residual_scale must be > 0"):
        g1_tracking("jump", actions="residual", leg_residual_scale=0.0)


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


# ----------------------------------------------------------------------------- current-state
# observation: a numpy reimplementation on native MuJoCo kinematics of the same qpos / qvel


def _rot6_np(R):
    return np.concatenate([R[..., :, 0], R[..., :, 1]], axis=-1)


def _native_observation(env, qpos, qvel, time):
    """The 327 features from native ``mj_kinematics`` of (qpos, qvel) (module docstring)."""
    m = env.sim.mj_model
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_kinematics(m, d)
    bodies = [m.body(n).id for n in gm.TRACKED_BODIES]
    p, R = d.xpos[bodies[0]], d.xmat[bodies[0]].reshape(3, 3)
    rel = np.stack([R.T @ d.xmat[b].reshape(3, 3) for b in bodies[1:]])
    keys = np.stack([d.site(n).xpos - p for n in gm.KEY_SITES]) @ R
    T = env.num_frames
    k = min(int(round(time / env.sim.control_dt)), T - 1)
    ref = env.reference
    out = [
        [p[2]],
        _rot6_np(R),
        R.T @ qvel[:3],
        qvel[3:6],
        _rot6_np(rel).reshape(-1),
        qpos[7:],
        qvel[6:],
        keys.reshape(-1),
        [k / (T - 1)],
    ]
    for h in (1, 2, 3):
        j = min(k + h, T - 1)
        pr, Rr = ref.body_pos[j, 0], ref.body_mat[j, 0]
        out += [
            [pr[2]],
            _rot6_np(R.T @ Rr),
            R.T @ (pr - p),
            ref.qpos[j, 7:],
            ((ref.key_pos[j] - pr) @ Rr).reshape(-1),
        ]
    return np.concatenate([np.asarray(x, float).reshape(-1) for x in out])


def _check_current_state(env, d):
    q, v, t = np.asarray(d.qpos), np.asarray(d.qvel), float(d.time)
    np.testing.assert_allclose(
        np.asarray(env.observe(d)), _native_observation(env, q, v, t), atol=1e-9
    )
    m = env.sim.mj_model
    nd = mujoco.MjData(m)
    nd.qpos[:] = q
    mujoco.mj_kinematics(m, nd)
    root = m.body("pelvis").id
    e = env.tracking_errors(d)
    k = int(env.frame_of(t))
    ids = [m.body(n).id for n in gm.TRACKED_BODIES]
    err = np.mean(np.linalg.norm(nd.xpos[ids] - env.reference.body_pos[k], axis=-1))
    assert float(e["body_pos_error"]) == pytest.approx(err, abs=1e-9)
    assert float(env.eval_metrics(d)["root_height"]) == pytest.approx(nd.xpos[root, 2])


def test_observation_of_initial_data_is_current_state(env):
    """initial_data runs no kinematics (xpos / xmat zero): observe must not depend on them."""
    for s in range(3):
        _check_current_state(env, env.initial_data(jax.random.PRNGKey(s)))


def test_observation_after_native_step_is_current_state(env):
    """Like after mjx.step, native mj_step leaves xpos / xmat at the last physics step's start
    (no MJX compile here; the MJX step itself is the slow test below)."""
    m = env.sim.mj_model
    d0 = env.initial_data(jax.random.PRNGKey(4))
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = d0.qpos, d0.qvel, d0.act, d0.ctrl
    d.time = float(d0.time)
    for _ in range(env.sim.substeps):
        mujoco.mj_step(m, d)
    assert np.max(np.abs(d.xpos[1] - d.qpos[:3])) > 1e-5  # stale derived fields
    _check_current_state(env, mjx.put_data(m, d))


@pytest.mark.slow
def test_observation_after_plain_step_is_current_state(env):
    """After an MJX step xpos / xmat lag one physics step behind qpos; observe, tracking
    errors and metrics must still equal native kinematics of the new (qpos, qvel)."""
    d = env.initial_data(jax.random.PRNGKey(3))
    a = 0.3 * jnp.sin(jnp.arange(29.0))
    d1, _, _ = jax.jit(env.plain_step)(d, a)
    assert float(jnp.max(jnp.abs(d1.xpos[1] - d1.qpos[:3]))) > 1e-5  # the lag is real
    _check_current_state(env, d1)


def test_cached_properties_first_used_inside_jit():
    """A cache first filled inside a jit trace must not hold (and later leak) a tracer."""
    import functools

    env = g1_tracking("hop")
    a = jnp.full(29, 0.1)

    def fn(key):
        d = env.initial_data(key)
        return (
            env.observe(d),
            env.reward(d, a, d),
            env.terminated(d),
            env.eval_metrics(d),
            env.action_to_ctrl(a),
        )

    jitted = jax.jit(fn)(jax.random.PRNGKey(0))
    names = [
        n
        for klass in type(env).__mro__
        for n, v in vars(klass).items()
        if isinstance(v, functools.cached_property)
    ]
    assert names and all(n in vars(env) for n in names)
    for n in names:
        for leaf in jax.tree_util.tree_leaves(vars(env)[n]):
            assert not isinstance(leaf, (jax.core.Tracer, jax.Array)), n
    eager = fn(jax.random.PRNGKey(0))  # a leaked tracer would raise UnexpectedTracerError
    for x, y in zip(
        jax.tree_util.tree_leaves(jitted), jax.tree_util.tree_leaves(eager), strict=True
    ):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=1e-12)
