"""One test per MJX-internals accessor of :mod:`bcg.sim.mjx_compat`, each against native
MuJoCo where there is a native equivalent, so that an MJX upgrade that moves an internal fails
here by name."""

import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

from bcg.sim import mjx_compat as C

BALL = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="ball" pos="0 0 .0495">
      <freejoint/>
      <geom type="sphere" size=".05" mass="1"/>
      <body name="arm" pos=".05 0 0">
        <joint name="hinge" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 .2 0 0" size=".01" mass=".1" contype="0"
              conaffinity="0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def model():
    m = mujoco.MjModel.from_xml_string(BALL)
    d = mujoco.MjData(m)
    d.qpos[3:7] = [np.cos(0.2), 0.0, np.sin(0.2), 0.0]
    d.qpos[7] = 0.3
    mujoco.mj_forward(m, d)
    mx = mjx.put_model(m)
    dx = jax.jit(mjx.forward)(mx, mjx.put_data(m, d))
    return m, d, mx, dx


def test_version_check():
    assert C.check_version(C.SUPPORTED[0])
    with pytest.warns(RuntimeWarning, match="outside the range"):
        assert not C.check_version((2, 0, 0))
    assert len(C.mjx_version()) >= 2


def test_contact_slots_match_native(model):
    m, d, mx, dx = model
    assert C.num_contact_slots(dx) == 1 == d.ncon
    c = C.contacts(dx)
    assert sorted(np.asarray(c.geom).ravel().tolist()) == sorted([d.contact[0].geom1, 1])
    np.testing.assert_allclose(float(c.dist[0]), d.contact[0].dist, atol=1e-9)
    np.testing.assert_allclose(np.asarray(c.pos[0]), d.contact[0].pos, atol=1e-9)
    assert int(np.asarray(c.efc_address)[0]) >= 0


def test_efc_force_is_the_constraint_force(model):
    m, d, mx, dx = model
    f = np.asarray(C.efc_force(dx))
    assert f.shape == (d.nefc,) and np.all(np.isfinite(f))
    # J^T f is the constraint force in joint space (qfrc_constraint), as in native MuJoCo
    np.testing.assert_allclose(
        np.asarray(dx._impl.efc_J).T @ f, np.asarray(dx.qfrc_constraint), rtol=1e-9, atol=1e-12
    )


def test_point_jacobian_matches_mj_jac(model):
    m, d, mx, dx = model
    point = np.array([0.1, 0.02, 0.03])
    body = m.body("arm").id
    jacp = np.zeros((3, m.nv))
    mujoco.mj_jac(m, d, jacp, None, point, body)
    J = np.asarray(C.point_jacobian(mx, dx, jnp.asarray(point), body))
    np.testing.assert_allclose(J.T, jacp, atol=1e-9)


def test_integrate_qpos_matches_mj_integrate_pos(model):
    m, d, mx, dx = model
    dq = np.linspace(-0.3, 0.4, m.nv)
    q = d.qpos.copy()
    mujoco.mj_integratePos(m, q, dq, 1.0)
    np.testing.assert_allclose(np.asarray(C.integrate_qpos(mx, jnp.asarray(d.qpos), dq)), q)


def test_public_fields_leave_out_the_private_struct(model):
    fields = C.public_fields(model[3])
    assert "qpos" in fields and "qvel" in fields and not any(f.startswith("_") for f in fields)


def test_solver_swap_is_scoped_and_guarded():
    original = C.active_solve()

    def mine(m, d):
        return d

    def other(m, d):
        return d

    with C.solver_replaced(mine):
        assert C.active_solve() is mine
        with C.solver_replaced(mine):  # re-entrant with the same solver
            assert C.active_solve() is mine
        assert C.active_solve() is mine
        with pytest.raises(RuntimeError, match="different solvers"), C.solver_replaced(other):
            pass
    assert C.active_solve() is original
    with pytest.raises(ValueError), C.solver_replaced(mine):
        raise ValueError("restored on errors too")
    assert C.active_solve() is original

    C.solver_internals.solve = other  # someone else's monkeypatch
    try:
        with warnings.catch_warnings(), pytest.raises(RuntimeError, match="outside bcg"):
            with C.solver_replaced(mine):
                pass
    finally:
        C.solver_internals.solve = original


def test_the_traced_step_is_reused_only_under_the_same_swapped_solver(monkeypatch):
    """control_step traces MJX's step once per model, layout and swapped-in solver: a second
    trace under the same solver reuses it (the solver is not called again), a trace under
    another solver traces the step anew with that solver."""
    import bcg.sim as bs
    from bcg.sim import step as step_module
    from bcg.sim.solver import scan_solve_fixed_step

    sim = bs.load(BALL, stiffness="soft", name="swap-cache-ball")
    calls = []

    def counting(m, d):
        calls.append(1)
        return scan_solve_fixed_step(m, d)

    def trace():
        jax.make_jaxpr(lambda d: bs.control_step(sim, d, jnp.zeros(0)))(bs.make_data(sim))

    trace()  # today's differentiable solver
    monkeypatch.setattr(step_module, "differentiable_solver", lambda: C.solver_replaced(counting))
    trace()
    assert len(calls) == 1  # not the step traced under the other solver
    trace()
    assert len(calls) == 1  # the same solver: the traced step is reused
    monkeypatch.undo()
    with C.solver_replaced(counting):  # what the key holds outside the block: nothing
        assert C.swapped_functions() == (("solve", counting),)
    assert C.swapped_functions() == ()


TENDON_XML = """
<mujoco>
  <worldbody>
    <geom type="plane" size="1 1 .1"/>
    <site name="anchor" pos="0 0 1"/>
    <body pos="0 0 .5">
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="sphere" size=".05" mass="1"/>
      <site name="s1" pos="0 0 .05"/>
    </body>
  </worldbody>
  <tendon>
    <spatial limited="true" range="0 0.6"><site site="anchor"/><site site="s1"/></spatial>
  </tendon>
</mujoco>
"""


def test_a_tendon_model_steps_in_a_float64_scan():
    """MJX makes a spatial tendon's wrap fields int32 and its step returns them int64 under
    float64: the control step's scan must keep the carry's types (dm_control's manipulator)."""
    from bcg.sim import load
    from bcg.sim.step import control_step

    assert jax.config.jax_enable_x64  # the tests run in float64 (conftest)
    sim = load(TENDON_XML, stiffness="stiff", substeps=3)
    d0 = mjx.make_data(sim.mjx_model)
    d1, _ = jax.jit(lambda d: control_step(sim, d, jnp.zeros(0)))(d0)
    for a, b in zip(jax.tree_util.tree_leaves(d1), jax.tree_util.tree_leaves(d0), strict=True):
        assert a.dtype == b.dtype
    assert d1.qpos.dtype == jnp.float64 and np.isfinite(np.asarray(d1.qpos)).all()
