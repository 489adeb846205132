"""The fixed-length-scan solver equals MJX's while-loop solver and is reverse differentiable."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg.sim as bs

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx

BOX = """<mujoco><option timestep="0.005"/><worldbody><geom type="plane" size="5 5 .1"/>
<body pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/></body>
</worldbody></mujoco>"""


def _sliding(sim):
    d = bs.make_data(sim)
    return d.replace(qpos=d.qpos.at[2].set(0.099), qvel=d.qvel.at[0].set(1.5))


def test_scan_solver_matches_mjx_while_loop():
    sim = bs.load(BOX, stiffness="soft", solver_iterations=4, substeps=1)
    d = _sliding(sim)
    ours = jax.jit(lambda d: bs.control_step(sim, d, jnp.zeros(0))[0])(d)
    theirs = jax.jit(lambda d: mjx.step(sim.mjx_model, d))(d)  # MJX's while_loop solver
    np.testing.assert_allclose(ours.qacc, theirs.qacc, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours.qvel, theirs.qvel, rtol=1e-9, atol=1e-12)


def test_scan_solver_is_reverse_differentiable():
    sim = bs.load(BOX, stiffness="soft", solver_iterations=4, substeps=2)
    d = _sliding(sim)

    def final_x(vx):
        out, _ = bs.control_step(sim, d.replace(qvel=d.qvel.at[0].set(vx)), jnp.zeros(0))
        return out.qpos[0]

    g = jax.jit(jax.grad(final_x))(1.5)
    f = jax.jit(final_x)
    h = 1e-6
    fd = (f(1.5 + h) - f(1.5 - h)) / (2 * h)
    assert np.isfinite(g)
    np.testing.assert_allclose(g, fd, rtol=1e-4)


# a hinge arm with friction loss swung into the floor beside a box resting on it: contacts,
# joint friction and a free body in one small scene
ARM_BOX = """<mujoco><option timestep="0.005"/>
<worldbody><geom type="plane" size="5 5 .1"/>
<body pos="0 0 .2"><joint name="h" type="hinge" axis="0 1 0" damping=".05" frictionloss=".02"/>
<geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" mass=".4"/></body>
<body pos="0.5 0 .11"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/></body>
</worldbody><actuator><motor joint="h" gear="1"/></actuator></mujoco>"""


def _line_search_variants(monkeypatch, names):
    """{name: (value, gradient)} of one control step of ``ARM_BOX`` (1 solver iteration, far
    from converged) with each solve of ``names``, and the step's function ``f``."""
    import functools

    from bcg.sim import solver

    sim = bs.load(ARM_BOX, stiffness="stiff", solver_iterations=1, name="arm_box")
    d = bs.make_data(sim)
    d = d.replace(
        qpos=d.qpos.at[0].set(0.62), qvel=d.qvel.at[0].set(3.0).at[3].set(0.3).at[5].set(-1.0)
    )
    w = jax.random.normal(jax.random.PRNGKey(0), (2 * sim.nv,))

    def f(v):
        out = bs.control_step(sim, d.replace(qvel=v), jnp.array([0.5]))[0]
        return jnp.dot(w, jnp.concatenate([out.qvel, out.qpos[: sim.nv]]))

    frozen = functools.partial(solver.fixed_step_linesearch, implicit=False)
    solves = {
        "default": solver.scan_solve_fixed_step,
        "through": lambda m, dd: solver.scan_solve(m, dd),  # MJX's line search, differentiated
        "frozen": lambda m, dd: solver.scan_solve(m, dd, linesearch=frozen),
    }
    results = {}
    for name in names:
        monkeypatch.setattr(solver, "scan_solve_fixed_step", solves[name])
        v, g = jax.jit(jax.value_and_grad(f))(d.qvel)
        results[name] = (float(v), np.asarray(g))
    monkeypatch.undo()
    return results, f, d.qvel


def test_fixed_step_line_search_keeps_the_values_and_the_gradient(monkeypatch):
    """The solver's line search out of the backward pass (``fixed_step_linesearch``, the
    default): the values are MJX's bit for bit; the step's derivative by the implicit function
    theorem gives the gradient through the line search's iterations (and finite differences)
    even with one solver iteration, far from converged."""
    results, f, qvel = _line_search_variants(monkeypatch, ("through", "default"))
    f_jit = jax.jit(f)
    h = 1e-6
    fd = np.array(
        [(f_jit(qvel.at[i].add(h)) - f_jit(qvel.at[i].add(-h))) / (2 * h) for i in range(len(qvel))]
    )
    (v0, g0), (v1, g1) = results["through"], results["default"]
    assert v0 == v1
    np.testing.assert_allclose(g0, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g1, g0, rtol=1e-8, atol=1e-10)


@pytest.mark.slow  # two more contact-step gradient compiles; the default is tested fast above
def test_a_frozen_line_search_step_misses_the_step_derivative(monkeypatch):
    """``implicit=False`` (d alpha = 0) leaves out ``(d alpha) s``: off where the solver has
    not converged, so the implicit term is what makes the default match."""
    results = _line_search_variants(monkeypatch, ("through", "frozen"))[0]
    (v0, g0), (v2, g2) = results["through"], results["frozen"]
    assert v0 == v2
    assert np.linalg.norm(g2 - g0) > 1e-3 * np.linalg.norm(g0)
