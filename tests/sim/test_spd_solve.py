"""The SPD solve's derivative (no Cholesky derivative) against JAX's own rule, finite
differences, and a whole MJX control step differentiated through MJX's own linear solves."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from jax.scipy.linalg import cho_factor, cho_solve

import bcg.sim as bs
from bcg.sim import mjx_compat as C
from bcg.sim import step as step_module
from bcg.sim.solver import scan_solve
from bcg.sim.spd_solve import spd_solve


def _spd(key, n):
    g = jax.random.normal(key, (n, n))
    return g @ g.T + n * jnp.eye(n)


@pytest.mark.parametrize("rhs", [(5,), (5, 3)])
def test_spd_solve_gradient_matches_jax_cholesky_rule_and_finite_differences(rhs):
    ka, kb, kw = jax.random.split(jax.random.PRNGKey(0), 3)
    a, b = _spd(ka, 5), jax.random.normal(kb, rhs)
    w = jax.random.normal(kw, rhs)

    def ours(a, b):
        a = (a + a.T) / 2  # only symmetric perturbations are admissible
        return jnp.sum(w * spd_solve(a, b))

    def theirs(a, b):
        a = (a + a.T) / 2
        return jnp.sum(w * cho_solve(cho_factor(a), b))

    np.testing.assert_allclose(ours(a, b), theirs(a, b), rtol=1e-14)
    ga, gb = jax.grad(ours, (0, 1))(a, b)
    ra, rb = jax.grad(theirs, (0, 1))(a, b)
    np.testing.assert_allclose(ga, ra, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gb, rb, rtol=1e-10, atol=1e-12)
    # forward mode, and central differences, along a direction of A and one of b
    da = jax.random.normal(jax.random.PRNGKey(1), a.shape)
    db = jax.random.normal(jax.random.PRNGKey(2), b.shape)
    jvp = jax.jvp(ours, (a, b), (da, db))[1]
    np.testing.assert_allclose(jvp, jax.jvp(theirs, (a, b), (da, db))[1], rtol=1e-10)
    np.testing.assert_allclose(jvp, jnp.sum(ga * da) + jnp.sum(gb * db), rtol=1e-10)
    eps = 1e-6
    fd = (ours(a + eps * da, b + eps * db) - ours(a - eps * da, b - eps * db)) / (2 * eps)
    np.testing.assert_allclose(jnp.sum(ga * da) + jnp.sum(gb * db), fd, rtol=1e-7)


BIPED = """<mujoco><option timestep="0.005" solver="Newton" cone="pyramidal"/>
<worldbody><geom type="plane" size="5 5 .1"/>
 <body pos="0 0 0.298"><freejoint/><geom type="box" size="0.1 0.1 0.05" mass="3"/>
  <body pos="0.05 0 -0.05"><joint name="hl" type="hinge" axis="0 1 0" damping="0.5"/>
   <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.5"/>
   <geom type="sphere" pos="0 0 -0.22" size="0.03" mass="0.1"/></body>
  <body pos="-0.05 0 -0.05"><joint name="hr" type="hinge" axis="0 1 0" damping="0.5"/>
   <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.5"/>
   <geom type="sphere" pos="0 0 -0.22" size="0.03" mass="0.1"/></body>
 </body></worldbody>
<actuator><position joint="hl" kp="30"/><position joint="hr" kp="30"/></actuator></mujoco>"""


def _triangular_solves(loss, qvel, u) -> int:
    return str(jax.make_jaxpr(jax.grad(lambda v: loss(v, u)[0]))(qvel)).count("triangular_solve")


# two contact-step gradient compiles (~100 s cold); spd_solve is tested fast against JAX's
# Cholesky rule and finite differences, and in a control step by tests/sim/test_solver.py
@pytest.mark.slow
def test_control_step_gradient_equals_the_one_through_mjx_linear_solves(monkeypatch):
    """In contact (feet on the floor, Newton, damping integrated implicitly by Euler): the
    same next state and the same gradient as with MJX's own mass-matrix and Hessian solves."""
    sim = bs.load(BIPED, stiffness="stiff", solver_iterations=2, substeps=1)
    native = mujoco.MjData(sim.mj_model)
    for _ in range(4):  # settle into contact (native MuJoCo: no compile)
        mujoco.mj_step(sim.mj_model, native)
    d0 = bs.make_data(sim).replace(qpos=jnp.asarray(native.qpos), qvel=jnp.asarray(native.qvel))
    w = jax.random.normal(jax.random.PRNGKey(3), (d0.qpos.size + d0.qvel.size,))

    def loss(qvel, u):
        out, forces = bs.control_step(sim, d0.replace(qvel=qvel), u)
        return jnp.dot(w, jnp.concatenate([out.qpos, out.qvel])), forces

    u = jnp.array([0.3, -0.2])
    grad = jax.jit(jax.grad(loss, (0, 1), has_aux=True))
    (ours, our_forces) = grad(d0.qvel, u)
    assert float(jnp.max(our_forces)) > 0  # the feet are in contact
    assert C.active_internal("solve_m") is C.original_internal("solve_m")  # restored
    ours_solves = _triangular_solves(loss, d0.qvel, u)
    monkeypatch.setattr(step_module, "differentiable_solver", lambda: C.solver_replaced(scan_solve))
    (theirs, _) = jax.jit(jax.grad(loss, (0, 1), has_aux=True))(d0.qvel, u)
    # ours ran: fewer triangular solves (MJX's backward solves with n x n right-hand sides)
    assert ours_solves < _triangular_solves(loss, d0.qvel, u)
    for g, r in zip(ours, theirs, strict=True):
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-9 * float(jnp.max(jnp.abs(r))))
