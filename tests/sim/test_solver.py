"""The fixed-length-scan solver equals MJX's while-loop solver and is reverse differentiable."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np

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
