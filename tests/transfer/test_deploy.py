"""Deploy runner over LowCmd / LowState with native MuJoCo standing in for the robot: the same
trajectory as running the policy directly in native MuJoCo with the model's actuators."""

import sys
from pathlib import Path

import jax
import mujoco
import numpy as np
import pytest

from bcg.learners.networks import Actor, mean_action
from bcg.transfer import deploy, lowlevel, native
from bcg.transfer.policy import load_policy

sys.path.insert(0, str(Path(__file__).parent))
from hoppers import CommandSeeingHopper  # noqa: E402
from pdbot import pdbot_env  # noqa: E402


def direct_native(env, m, policy, key, steps):
    """Reference: the policy in native MuJoCo with the model's own actuators."""
    bridge = native.NativeBridge(env, m)
    d = native.data_from_mjx(m, env.initial_data(key))
    qs = []
    for _ in range(steps):
        qs.append(d.qpos.copy())
        a = policy(bridge.observe(d))
        d.ctrl[:] = bridge.ctrl(a, d)
        for _ in range(env.sim.substeps):
            mujoco.mj_step(m, d)
    return np.array(qs), d


def via_runner(env, m, policy, key, steps, motor_joints=None):
    mm = lowlevel.MotorMap.from_model(env.sim.mj_model, motor_joints)
    d = native.data_from_mjx(m, env.initial_data(key))
    tr = deploy.MujocoTransport(m, mm, substeps=env.sim.substeps, data=d)
    runner = deploy.make_runner(env, policy, tr, motor_joints=motor_joints, m=m)
    qs = []
    for _ in range(steps):
        qs.append(tr.d.qpos.copy())
        runner.run(1, log=False)
    return np.array(qs), tr


def test_runner_matches_native_hopper(hopper_run):
    run_dir, env, _, _ = hopper_run
    pol = load_policy(run_dir)
    m, _ = native.native_model(env, "hopper_jump")
    f = deploy.jax_policy(pol)
    key = jax.random.PRNGKey(5)
    want, _ = direct_native(env, m, f, key, 40)
    got, tr = via_runner(env, m, f, key, 40)
    assert np.abs(want[1:] - want[0]).max() > 0.05  # it moves
    np.testing.assert_allclose(got, want, atol=1e-9)
    st, base = tr.read()
    assert st.motor_state[0].q == tr.d.qpos[3] and st.motor_state[1].dq == tr.d.qvel[4]
    np.testing.assert_array_equal(base.qpos, tr.d.qpos[:3])  # rootx, rootz, rooty


def test_runner_observes_the_last_command_sent(hopper_run):
    """An env that observes ``data.ctrl`` sees the last command sent (the first step: a zero
    action's), in the runner as in native MuJoCo: the trajectories agree, stepping the runner
    one control period per call."""
    _, env, _, _ = hopper_run
    cenv = CommandSeeingHopper(sim=env.sim)
    m, _ = native.native_model(cenv, "hopper_jump")
    f = _random_actor_policy(cenv.observation_size, cenv.action_size, seed=3)
    key = jax.random.PRNGKey(5)
    want, _ = direct_native(cenv, m, f, key, 30)
    got, tr = via_runner(cenv, m, f, key, 30)
    assert np.abs(want[1:] - want[0]).max() > 0.05  # it moves
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_simulated_robot_blow_up_is_an_error(hopper_run):
    """A simulated robot whose state MuJoCo reset after a blow-up stops the run with an error
    that says so, instead of going on from the reset state."""
    run_dir, env, _, _ = hopper_run
    m, _ = native.native_model(env, "hopper_jump")
    f = deploy.jax_policy(load_policy(run_dir))
    _, tr = via_runner(env, m, f, jax.random.PRNGKey(5), 2)
    tr.d.qvel[:] = 1e11  # beyond mjMAXVAL: the next mj_step resets the data
    with pytest.raises(RuntimeError, match="blew up"):
        tr.wait()


def test_simulated_robot_flung_root_is_an_error():
    """A free root faster than the transport's bound stops the run with an error, as a
    blow-up that MuJoCo does not flag."""
    env = pdbot_env()
    m, _ = native.native_model(env, None)
    policy = _random_actor_policy(env.observation_size, env.action_size)
    _, tr = via_runner(env, m, policy, jax.random.PRNGKey(2), 2, motor_joints=env.motor_joint_names)
    tr.wait()  # a normal step passes
    tr.d.qvel[2] = 30.0
    with pytest.raises(RuntimeError, match="faster than 10"):
        tr.wait()


def test_runner_sends_the_gain_schedule():
    """With ``sim.servo_scale_at``, every LowCmd carries the scheduled kp / kd of its control
    step (the G1's LowCmd holds the gains per message)."""
    import dataclasses

    env = pdbot_env()

    def at(time):  # the first actuator (lhip) x2 from control step 2 on
        f = np.ones(4)
        f[0] = 2.0 if round(time / 0.02) >= 2 else 1.0
        return f, np.sqrt(f)

    env = dataclasses.replace(env, sim=dataclasses.replace(env.sim, servo_scale_at=at))
    m, _ = native.native_model(env, None)
    policy = _random_actor_policy(env.observation_size, env.action_size)
    mm = lowlevel.MotorMap.from_model(env.sim.mj_model, env.motor_joint_names)
    slot = int(mm.slot[0])
    d = native.data_from_mjx(m, env.initial_data(jax.random.PRNGKey(0)))
    tr = deploy.MujocoTransport(m, mm, substeps=env.sim.substeps, data=d)
    runner = deploy.make_runner(env, policy, tr, motor_joints=env.motor_joint_names, m=m)
    kp, kv = float(m.actuator_gainprm[0, 0]), float(-m.actuator_biasprm[0, 2])
    for t in range(4):
        runner.run(1, log=False)
        f = 2.0 if t >= 2 else 1.0
        assert tr.cmd.motor_cmd[slot].kp == pytest.approx(f * kp)
        assert tr.cmd.motor_cmd[slot].kd == pytest.approx(np.sqrt(f) * kv)
        assert tr.cmd.motor_cmd[int(mm.slot[1])].kp == pytest.approx(m.actuator_gainprm[1, 0] * 4)


def _random_actor_policy(obs_size, act_size, seed=0):
    actor = Actor(act_size, (16,))
    params = actor.init(jax.random.PRNGKey(seed), np.zeros((1, obs_size), np.float32))
    f = jax.jit(lambda o: mean_action(actor, params, 2.0 * o[None])[0])
    return lambda obs: np.asarray(f(np.asarray(obs, np.float32)))


def test_runner_matches_native_pd_floating_base():
    """Position (PD) actuators with gears and a force limit, a free-joint root observed through
    the IMU (quaternion, gyroscope), motors in a different order than the actuators."""
    env = pdbot_env()
    m, _ = native.native_model(env, None)  # not a registered task: the training model
    policy = _random_actor_policy(env.observation_size, env.action_size)
    key = jax.random.PRNGKey(1)
    want, _ = direct_native(env, m, policy, key, 40)
    got, tr = via_runner(env, m, policy, key, 40, motor_joints=env.motor_joint_names)
    assert np.abs(want[:, 7:] - want[0, 7:]).max() > 0.05
    np.testing.assert_allclose(got, want, atol=1e-7)
    st, _ = tr.read()
    np.testing.assert_allclose(st.imu_state.quaternion, tr.d.qpos[3:7], atol=1e-12)
    np.testing.assert_allclose(st.imu_state.gyroscope, tr.d.qvel[3:6], atol=1e-12)
    assert st.motor_state[0].q == tr.d.qpos[9]  # slot 0 is rhip (qpos 9)


def test_motor_map_torques_equal_mujoco_actuators():
    env = pdbot_env()
    m = env.sim.mj_model
    mm = lowlevel.MotorMap.from_model(m, ("rhip", "rknee", "lhip", "lknee"))
    kinds = [a["kind"] for a in mm.actuators]
    assert kinds == ["position"] * 4
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    d.qpos[:] = m.key_qpos[0]
    d.qpos[7:] += rng.uniform(-0.3, 0.3, 4)
    d.qvel[:] = rng.uniform(-1, 1, m.nv)
    d.ctrl[:] = [0.9, -1.7, 0.8, -0.1]  # rhip's PD force exceeds its 15 N m limit
    mujoco.mj_forward(m, d)
    jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in mm.motor_joints]
    dofs = [m.jnt_dofadr[j] for j in jids]
    tau = lowlevel.pd_torque(
        mm.command(d.ctrl), d.qpos[[m.jnt_qposadr[j] for j in jids]], d.qvel[dofs], 4
    )
    lim = mm.torque_limits()
    tau = np.clip(tau, lim[:, 0], lim[:, 1])
    np.testing.assert_allclose(tau, d.qfrc_actuator[dofs], atol=1e-9)
    assert abs(tau[0]) == 15.0

    hop = mujoco.MjModel.from_xml_string(__import__("bcg.envs.tasks").envs.tasks.HOPPER_XML)
    cmd = lowlevel.MotorMap.from_model(hop).command([0.5, -2.0])  # motor, gear 10, clipped
    assert (cmd.motor_cmd[0].tau, cmd.motor_cmd[1].tau) == (5.0, -10.0)
    assert cmd.motor_cmd[0].kp == 0 and cmd.motor_cmd[2].mode == 0


def test_sdk_copy_and_missing_sdk():
    cmd = lowlevel.LowCmd(mode_machine=3)
    cmd.motor_cmd[2].q, cmd.motor_cmd[2].kp, cmd.motor_cmd[2].mode = 0.4, 60.0, 1
    sdk_like = lowlevel.to_sdk(cmd, lowlevel.LowCmd())
    assert sdk_like == cmd
    st = lowlevel.LowState(tick=7)
    st.imu_state.quaternion = [0.0, 1.0, 0.0, 0.0]
    st.motor_state[4].dq = -1.5
    assert lowlevel.from_sdk(st) == st
    assert len(cmd.motor_cmd) == lowlevel.NUM_MOTORS == 35
    with pytest.raises(ImportError, match="unitree_sdk2py"):
        deploy.UnitreeSdkTransport("lo")
