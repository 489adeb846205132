"""Gain schedules (``Sim.servo_scale_at``): the scaled servo parameters, MJX stepping with the
scheduled gains, and native MuJoCo with the same schedule giving the same motion."""

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

import bcg.sim as bs
from bcg.sim.servo_schedule import apply_native, scaled_servo_params

# a pendulum under a position servo (kp 20, kv 1) and a motor (gain 1)
ARM = """<mujoco><option timestep="0.005"/><worldbody>
<body><joint name="a" type="hinge" axis="0 1 0" damping="0.1"/>
<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
<body pos="0.3 0 0"><joint name="b" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5"/></body></body>
</worldbody><actuator><position joint="a" kp="20" kv="1"/><motor joint="b"/></actuator>
</mujoco>"""


def test_scaled_params_scale_kp_columns_and_kd_only():
    g = np.arange(20.0).reshape(2, 10) + 1
    b = -np.arange(20.0).reshape(2, 10) - 1
    f_kp, f_kd = np.array([2.0, 3.0]), np.array([5.0, 7.0])
    gain, bias = scaled_servo_params(g, b, f_kp, f_kd)
    np.testing.assert_allclose(gain[:, 0], g[:, 0] * f_kp)
    np.testing.assert_allclose(gain[:, 1:], g[:, 1:])
    np.testing.assert_allclose(bias[:, :2], b[:, :2] * f_kp[:, None])
    np.testing.assert_allclose(bias[:, 2], b[:, 2] * f_kd)
    np.testing.assert_allclose(bias[:, 3:], b[:, 3:])
    jg, jb = scaled_servo_params(jnp.asarray(g), jnp.asarray(b), f_kp, f_kd)
    assert isinstance(jg, jax.Array)
    np.testing.assert_allclose(np.asarray(jg), gain)
    np.testing.assert_allclose(np.asarray(jb), bias)
    np.testing.assert_array_equal(g[:, 0], np.arange(0, 20, 10) + 1)  # inputs unchanged


def _schedule(dt):
    """Servo 0 twice as stiff (kd x sqrt 2) in control steps [2, 5); the motor never changes
    (its factor would scale gainprm[0], so it must stay 1)."""

    def at(time):
        xp = jnp if isinstance(time, jax.Array) else np
        k = xp.round(xp.asarray(time) / dt)
        on = (k >= 2) & (k < 5)
        f = xp.stack([xp.where(on, 2.0, 1.0), xp.ones_like(k, dtype=float)])
        return f, xp.sqrt(f)

    return at


def test_mjx_and_native_follow_the_same_schedule():
    """Seven control steps from a swinging start with fixed targets: MJX under the schedule
    equals native MuJoCo whose gains are set per step by ``apply_native`` (same solver), and
    differs from the unscheduled motion (the test can tell)."""
    sim = bs.load(ARM, stiffness="stiff", name="arm")
    sim = dataclasses.replace(sim, servo_scale_at=_schedule(sim.control_dt))
    ctrl = np.array([0.8, 0.3])
    steps = 7

    def mjx_run(s):
        d = bs.make_data(s).replace(qvel=jnp.asarray([1.0, -1.0], jnp.float64))
        out = []
        for _ in range(steps):
            d, _ = bs.control_step(s, d, jnp.asarray(ctrl, d.ctrl.dtype))
            out.append(np.asarray(d.qpos))
        return np.array(out)

    m = sim.native_with_mjx_solver()
    d = mujoco.MjData(m)
    d.qvel[:] = [1.0, -1.0]
    base = (m.actuator_gainprm.copy(), m.actuator_biasprm.copy())
    native = []
    for _ in range(steps):
        apply_native(m, base, *sim.servo_scale_at(float(d.time)))
        d.ctrl[:] = ctrl
        for _ in range(sim.substeps):
            mujoco.mj_step(m, d)
        native.append(d.qpos.copy())
    got = mjx_run(sim)  # float64 (tests/conftest.py)
    plain = mjx_run(dataclasses.replace(sim, servo_scale_at=None))
    np.testing.assert_allclose(got, np.array(native), atol=1e-6)
    np.testing.assert_allclose(got[:2], plain[:2], atol=1e-9)  # before the window: the same
    assert np.abs(got[4:] - plain[4:]).max() > 1e-3
