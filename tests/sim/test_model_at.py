"""Per-state models (``Sim.model_at``): each environment steps with the model its state selects,
in the analytic step and in every BCG branch, checked against native MuJoCo."""

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import bcg.sim as bs
from bcg import estimators as E
from bcg.estimators.bcg import BCG

# a 1 kg sphere on a vertical slide; userdata[0] scales gravity
BALL = """<mujoco><option timestep="0.005"/><size nuserdata="1"/><worldbody>
<geom type="plane" size="50 50 .1"/>
<body><joint name="z" type="slide" axis="0 0 1"/><geom type="sphere" size=".1" mass="1"/></body>
</worldbody></mujoco>"""
SCALE = [1.0, 0.5, 1.0, 0.5]
Z, VZ = [0.13, 0.13, 3.0, 3.0], [-1.5, -1.5, 1.0, 1.0]  # two impacts, two free flights
T = 4


def _gravity_from_userdata(m, d):
    return m.replace(opt=m.opt.replace(gravity=m.opt.gravity * d.userdata[0]))


@pytest.fixture(scope="module")
def sim():
    s = bs.load(BALL, stiffness="stiff", name="ball")
    return dataclasses.replace(s, model_at=_gravity_from_userdata)


def _batch(sim):
    tmpl = bs.make_data(sim)
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (len(Z),) + x.shape), tmpl)
    return d.replace(
        qpos=jnp.asarray(Z, d.qpos.dtype)[:, None],
        qvel=jnp.asarray(VZ, d.qvel.dtype)[:, None],
        userdata=jnp.asarray(SCALE, d.userdata.dtype)[:, None],
    )


def _native(sim, i):
    """Native MuJoCo with the MJX solver settings and env i's gravity, T control steps."""
    m = sim.native_with_mjx_solver()
    m.opt.gravity[:] = m.opt.gravity * SCALE[i]
    d = mujoco.MjData(m)
    d.qpos[0], d.qvel[0] = Z[i], VZ[i]
    for _ in range(T * sim.substeps):
        mujoco.mj_step(m, d)
    return d.qpos[0], d.qvel[0]


@pytest.fixture(scope="module")
def rolled(sim):
    d0 = _batch(sim)
    key = jax.random.PRNGKey(0)
    zero = dict(num_branches=1, sigma_p=0.0, sigma_v=0.0, tau=0.0)
    out = {}
    for label, est in {"analytic": E.make("analytic"), "bcg": BCG(**zero, capacity=2)}.items():
        run = jax.jit(lambda d, est=est: E.rollout(sim, est, d, jnp.zeros((T, len(Z), 0)), key))
        dT, st = run(d0)
        out[label] = (np.asarray(dT.qpos[:, 0]), np.asarray(dT.qvel[:, 0]), st)
    return out


def test_each_env_steps_with_its_own_model(sim, rolled):
    q, v, _ = rolled["analytic"]
    for i in range(len(Z)):
        nq, nv = _native(sim, i)
        np.testing.assert_allclose(q[i], nq, atol=2e-4)
        np.testing.assert_allclose(v[i], nv, atol=2e-2)
    assert abs(q[2] - q[3]) > 0.01  # free flight under half gravity rises higher


def test_bundle_branches_keep_the_env_model(rolled):
    """One unperturbed branch is the plain step: equal only if the branch copies carry the
    environment's model (the impacting envs 0 and 1 are bundled)."""
    qa, va, _ = rolled["analytic"]
    qb, vb, st = rolled["bcg"]
    assert int(np.sum(st.bundled)) >= 2
    np.testing.assert_allclose(qb, qa, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(vb, va, rtol=1e-6, atol=1e-7)


def test_model_for_without_hook_is_the_model():
    s = bs.load(BALL, stiffness="stiff", name="ball")
    assert s.model_for(bs.make_data(s)) is s.mjx_model


# a 1 kg slider pushed up by a motor (force = ctrl); userdata[0] > 0.5: hold the previous ctrl
MOTOR = """<mujoco><option timestep="0.005" gravity="0 0 0"/><size nuserdata="1"/><worldbody>
<body><joint name="z" type="slide" axis="0 0 1"/><geom type="sphere" size=".1" mass="1"/></body>
</worldbody><actuator><motor joint="z"/></actuator></mujoco>"""


def test_hold_applies_the_previous_control_one_step_late():
    """Two control steps under controls (2, 5) from ctrl 0: a holding env applies (0, 2), as
    native MuJoCo under those delayed controls; the other applies (2, 5). Analytic and BCG."""
    s = dataclasses.replace(
        bs.load(MOTOR, stiffness="stiff", name="motor"), hold_at=lambda d: d.userdata[0] > 0.5
    )
    tmpl = bs.make_data(s)
    d0 = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (2,) + x.shape), tmpl)
    d0 = d0.replace(userdata=jnp.asarray([[1.0], [0.0]], d0.userdata.dtype))
    ctrls = jnp.asarray([[[2.0], [2.0]], [[5.0], [5.0]]], d0.ctrl.dtype)

    def native(applied):
        m = s.native_with_mjx_solver()
        d = mujoco.MjData(m)
        for c in applied:
            d.ctrl[0] = c
            for _ in range(s.substeps):
                mujoco.mj_step(m, d)
        return d.qpos[0], d.qvel[0]

    want = [native([0.0, 2.0]), native([2.0, 5.0])]
    for est in (E.make("analytic"), BCG(num_branches=1, sigma_p=0.0, sigma_v=0.0, tau=0.0)):
        dT, _ = jax.jit(lambda d, est=est: E.rollout(s, est, d, ctrls, jax.random.PRNGKey(0)))(d0)
        for i, (q, v) in enumerate(want):
            np.testing.assert_allclose(float(dT.qpos[i, 0]), q, atol=1e-6)
            np.testing.assert_allclose(float(dT.qvel[i, 0]), v, atol=1e-5)
        np.testing.assert_allclose(np.asarray(dT.ctrl[:, 0]), [5.0, 5.0])


def test_push_adds_its_velocity_change_before_the_step():
    """A push due at the second control step (``push_at`` reads the state's time) adds its
    velocity change before that step's physics, as native MuJoCo with ``qvel += dv`` does; the
    env without draws (``userdata[0] = 0``) is not pushed. Analytic and BCG (whose branch gets
    the same push)."""
    dv = 0.7

    def push_at(d):
        due = (d.userdata[0] > 0.5) & (jnp.round(d.time / s.control_dt) == 1)
        return jnp.where(due, dv, 0.0) * jnp.ones(1, d.qvel.dtype)

    s = dataclasses.replace(bs.load(MOTOR, stiffness="stiff", name="motor"), push_at=push_at)
    tmpl = bs.make_data(s)
    d0 = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (2,) + x.shape), tmpl)
    d0 = d0.replace(userdata=jnp.asarray([[1.0], [0.0]], d0.userdata.dtype))
    ctrls = jnp.asarray([[[2.0], [2.0]], [[-1.0], [-1.0]], [[0.5], [0.5]]], d0.ctrl.dtype)

    def native(push):
        m = s.native_with_mjx_solver()
        d = mujoco.MjData(m)
        for t, c in enumerate([2.0, -1.0, 0.5]):
            d.ctrl[0] = c
            if push and t == 1:
                d.qvel[0] += dv
            for _ in range(s.substeps):
                mujoco.mj_step(m, d)
        return d.qpos[0], d.qvel[0]

    want = [native(True), native(False)]
    assert abs(want[0][1] - want[1][1] - dv) < 1e-9  # (no gravity, no contact: dv persists)
    for est in (E.make("analytic"), BCG(num_branches=1, sigma_p=0.0, sigma_v=0.0, tau=0.0)):
        dT, _ = jax.jit(lambda d, est=est: E.rollout(s, est, d, ctrls, jax.random.PRNGKey(0)))(d0)
        for i, (q, v) in enumerate(want):
            np.testing.assert_allclose(float(dT.qpos[i, 0]), q, atol=1e-6)
            np.testing.assert_allclose(float(dT.qvel[i, 0]), v, atol=1e-5)
