"""The native-MuJoCo finite-difference reference gradient (bcg.diagnostics.reference).

Closed forms use MuJoCo's semi-implicit Euler integrator (no damping, no constraints):

    v_{i+1} = v_i + dt a_i,   z_{i+1} = z_i + dt v_{i+1}

so after n = T * substeps physics steps  v_n = v_0 + dt sum_{i<n} a_i  and
z_n = z_0 + n dt v_0 + dt^2 sum_{i<n} (n - i) a_i.  With J = z_n + w v_n:
dJ/dv_0 = n dt + w  and  dJ/da_i = dt^2 (n - i) + w dt.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from mjcf_models import SLIDER_ON_PLANE

import bcg.sim as bs
from bcg.diagnostics.objective import VELOCITY_WEIGHT, default_objective
from bcg.diagnostics.reference import final_states, native_objective, reference_gradient

W = VELOCITY_WEIGHT
G = -9.81

FREE_SPHERE_HIGH = """
<mujoco><option timestep="0.005"/>
  <worldbody><geom type="plane" size="5 5 .1"/>
    <body pos="0 0 10"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body>
  </worldbody>
</mujoco>"""

SLIDE_MOTOR = """
<mujoco><option timestep="0.004"/>
  <worldbody>
    <body pos="0 0 5">
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.1" mass="2.5" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="z" gear="3"/></actuator>
</mujoco>"""

# SLIDER_ON_PLANE (tests/mjcf_models.py): contact model with actuators, a sphere on slide x /
# slide z joints resting on a plane

BOUNCING_SPHERE = """
<mujoco><option timestep="0.005"/>
  <worldbody><geom type="plane" size="5 5 .1"/>
    <body pos="0 0 0.3"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body>
  </worldbody>
</mujoco>"""


def _states(m, N, rng, z_sigma=0.01, v_sigma=0.1):
    qpos = np.tile(m.qpos0, (N, 1))
    qvel = np.zeros((N, m.nv))
    zdof = 2 if m.nq == 7 else m.nq - 1
    qpos[:, zdof] += rng.normal(0.0, z_sigma, N)
    qvel += rng.normal(0.0, v_sigma, (N, m.nv))
    return qpos, qvel


def test_free_fall_closed_form():
    sim = bs.load(FREE_SPHERE_HIGH, stiffness="soft", substeps=4)
    spec = default_objective(sim.mj_model)
    rng = np.random.default_rng(0)
    qpos, qvel = _states(sim.mj_model, 5, rng)
    T = 10
    n, dt = T * sim.substeps, sim.physics_dt
    ctrl = np.zeros((T, 0))

    J = native_objective(sim, spec, qpos, qvel, np.zeros(6), ctrl)
    z0, vz0 = qpos[:, 2], qvel[:, 2]
    vz = vz0 + n * dt * G
    z = z0 + n * dt * vz0 + dt**2 * G * n * (n + 1) / 2
    np.testing.assert_allclose(J, z + W * vz, rtol=0, atol=1e-10)
    assert np.all(qpos[:, 2] - 0.5 > 1.0)  # far above the floor: no contact

    ref = reference_gradient(sim, spec, qpos, qvel, ctrl)
    expected = np.zeros(6)
    expected[2] = n * dt + W
    np.testing.assert_allclose(ref["grad_vel"], expected, rtol=0, atol=1e-9)
    assert ref["grad_ctrl"].shape == (T, 0)
    assert ref["value"] == pytest.approx(np.mean(z + W * vz), abs=1e-12)

    # dvel is added to qvel[vel_dofs] of every state
    dvel = np.array([0.0, 0.0, 0.3, 0.0, 0.0, 0.0])
    J2 = native_objective(sim, spec, qpos, qvel, dvel, ctrl)
    np.testing.assert_allclose(J2 - J, 0.3 * (n * dt + W), atol=1e-10)


def test_slide_motor_closed_form():
    sim = bs.load(SLIDE_MOTOR, stiffness="soft", substeps=3)
    m = sim.mj_model
    spec = default_objective(m)
    assert spec.vel_dofs.tolist() == [0]
    mass = float(m.body_mass[1])
    gear = float(m.actuator_gear[0, 0])
    rng = np.random.default_rng(1)
    qpos, qvel = _states(m, 4, rng)
    T, s, dt = 6, sim.substeps, sim.physics_dt
    n = T * s
    ctrl = rng.normal(0.0, 1.0, (T, 1))

    # closed-form value: a_i = g + gear u_{t(i)} / mass
    a = G + gear * np.repeat(ctrl[:, 0], s) / mass
    i = np.arange(n)
    vn = qvel[:, 0] + dt * a.sum()
    zn = qpos[:, 0] + n * dt * qvel[:, 0] + dt**2 * np.sum((n - i) * a)
    J = native_objective(sim, spec, qpos, qvel, np.zeros(1), ctrl)
    np.testing.assert_allclose(J, zn + W * vn, rtol=0, atol=1e-10)

    ref = reference_gradient(sim, spec, qpos, qvel, ctrl, h_vel=1e-2, h_ctrl=1e-2)
    dJ_da = dt**2 * (n - i) + W * dt
    expected_ctrl = (gear / mass) * dJ_da.reshape(T, s).sum(axis=1)
    np.testing.assert_allclose(ref["grad_vel"], [n * dt + W], rtol=1e-9)
    np.testing.assert_allclose(ref["grad_ctrl"][:, 0], expected_ctrl, rtol=1e-7)
    assert ref["value"] == pytest.approx(np.mean(zn + W * vn), abs=1e-12)


@pytest.mark.parametrize("xml", [SLIDER_ON_PLANE, BOUNCING_SPHERE], ids=["slider", "bounce"])
def test_rollout_matches_python_loop_on_contact(xml):
    sim = bs.load(xml, stiffness="stiff", substeps=4)
    m = sim.mj_model
    spec = default_objective(m)
    rng = np.random.default_rng(2)
    qpos, qvel = _states(m, 6, rng, z_sigma=0.005, v_sigma=0.5)
    T = 12
    ctrl = rng.normal(0.0, 5.0, (T, m.nu))

    # the rollout really makes contact
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos[0], qvel[0]
    ncon = 0
    for t in range(T):
        d.ctrl[:] = ctrl[t]
        for _ in range(sim.substeps):
            mujoco.mj_step(m, d)
            ncon = max(ncon, d.ncon)
    assert ncon > 0

    # plain python loop written out here (independent of the module's own fallback)
    expected = []
    for b in range(len(qpos)):
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = qpos[b], qvel[b]
        for t in range(T):
            d.ctrl[:] = ctrl[t]
            for _ in range(sim.substeps):
                mujoco.mj_step(m, d)
        expected.append(spec.value(d.qpos.copy(), d.qvel.copy()))

    dvel = np.zeros(len(spec.vel_dofs))
    for kw in ({}, {"nthread": 1}, {"nthread": 2}, {"backend": "python"}):
        J = native_objective(sim, spec, qpos, qvel, dvel, ctrl, **kw)
        np.testing.assert_allclose(J, expected, rtol=0, atol=1e-12)

    g_c = reference_gradient(sim, spec, qpos, qvel, ctrl)
    g_p = reference_gradient(sim, spec, qpos, qvel, ctrl, backend="python")
    for key in ("grad_vel", "grad_ctrl"):
        assert np.all(np.isfinite(g_c[key]))
        np.testing.assert_allclose(g_c[key], g_p[key], rtol=0, atol=1e-9)
    assert g_c["value"] == pytest.approx(np.mean(expected), abs=1e-12)


def test_reference_gradient_is_fd_of_native_objective():
    """grad_vel[i] / grad_ctrl[t, j] are central differences of the mean native objective."""
    sim = bs.load(SLIDER_ON_PLANE, stiffness="stiff", substeps=2)
    m = sim.mj_model
    spec = default_objective(m)
    rng = np.random.default_rng(3)
    qpos, qvel = _states(m, 3, rng, z_sigma=0.003)
    ctrl = rng.normal(0.0, 2.0, (3, m.nu))
    h = 0.02
    ref = reference_gradient(sim, spec, qpos, qvel, ctrl, h_vel=h, h_ctrl=h)
    e = np.zeros(len(spec.vel_dofs))
    e[1] = h
    fd_v = (
        native_objective(sim, spec, qpos, qvel, e, ctrl).mean()
        - native_objective(sim, spec, qpos, qvel, -e, ctrl).mean()
    ) / (2 * h)
    E = np.zeros_like(ctrl)
    E[1, 0] = h
    z = np.zeros(len(spec.vel_dofs))
    fd_u = (
        native_objective(sim, spec, qpos, qvel, z, ctrl + E).mean()
        - native_objective(sim, spec, qpos, qvel, z, ctrl - E).mean()
    ) / (2 * h)
    assert ref["grad_vel"][1] == pytest.approx(fd_v, abs=1e-12)
    assert ref["grad_ctrl"][1, 0] == pytest.approx(fd_u, abs=1e-12)


def test_divergence_is_reported():
    sim = bs.load(SLIDE_MOTOR, stiffness="soft", substeps=1)
    spec = default_objective(sim.mj_model)
    qpos, qvel = sim.mj_model.qpos0[None], np.zeros((1, 1))
    with pytest.raises(RuntimeError, match="diverged"):
        native_objective(sim, spec, qpos, qvel, np.zeros(1), np.full((3, 1), 1e12))


def test_bad_inputs_raise():
    sim = bs.load(SLIDE_MOTOR, stiffness="soft", substeps=2)
    m = sim.mj_model
    spec = default_objective(m)
    qpos, qvel = np.tile(m.qpos0, (2, 1)), np.zeros((2, 1))
    ctrl = np.zeros((3, 1))
    dv = np.zeros(1)
    bad_calls = {
        "qpos0": lambda: native_objective(sim, spec, m.qpos0, qvel, dv, ctrl),
        "nq": lambda: native_objective(sim, spec, np.zeros((2, 3)), qvel, dv, ctrl),
        "qvel0": lambda: native_objective(sim, spec, qpos, np.zeros((3, 1)), dv, ctrl),
        "non-finite": lambda: native_objective(sim, spec, qpos * np.nan, qvel, dv, ctrl),
        "dvel": lambda: native_objective(sim, spec, qpos, qvel, np.zeros(2), ctrl),
        "ctrl": lambda: native_objective(sim, spec, qpos, qvel, dv, np.zeros((3, 2))),
        "T >= 1": lambda: native_objective(sim, spec, qpos, qvel, dv, np.zeros((0, 1))),
        "non-finite ": lambda: reference_gradient(sim, spec, qpos, qvel, ctrl + np.inf),
        "h_vel": lambda: reference_gradient(sim, spec, qpos, qvel, ctrl, h_vel=0.0),
        "h_ctrl": lambda: reference_gradient(sim, spec, qpos, qvel, ctrl, h_ctrl=-1e-3),
        "h_vel ": lambda: reference_gradient(sim, spec, qpos, qvel, ctrl, h_vel=float("nan")),
        "backend": lambda: native_objective(sim, spec, qpos, qvel, dv, ctrl, backend="gpu"),
        "sim": lambda: native_objective(m, spec, qpos, qvel, dv, ctrl),
        "numeric": lambda: native_objective(sim, spec, [["a"]] * 2, qvel, dv, ctrl),
    }
    for what, call in bad_calls.items():
        with pytest.raises(ValueError, match=what.strip()):
            call()


def test_final_states_batched_controls():
    """A (P, T, nu) control table with a per-rollout index equals separate calls."""
    sim = bs.load(SLIDER_ON_PLANE, stiffness="stiff", substeps=3)
    m = sim.mj_model
    rng = np.random.default_rng(4)
    qpos, qvel = _states(m, 4, rng)
    table = rng.normal(0.0, 3.0, (2, 5, m.nu))
    idx = np.array([1, 0, 0, 1])
    qT, vT = final_states(sim, qpos, qvel, table, idx)
    for r in range(4):
        q1, v1 = final_states(sim, qpos[r : r + 1], qvel[r : r + 1], table[idx[r]])
        np.testing.assert_array_equal(qT[r], q1[0])
        np.testing.assert_array_equal(vT[r], v1[0])
