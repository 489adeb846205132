"""Aggregation transforms on state tuples: the plain-forward (straight-through) state."""

import jax
import jax.numpy as jnp
import numpy as np

import bcg.sim as bs
from bcg.estimators.aggregation import plain_forward
from bcg.estimators.bcg import BranchState
from bcg.sim.step import differentiate_qpos

# a free body with a hinged arm: qpos = (pos 3, quat 4, hinge 1), nv = 7
FREE_ARM = """<mujoco><worldbody><body><freejoint/><geom type="sphere" size=".1" mass="1"/>
<body pos=".2 0 0"><joint name="h" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 .2 0 0" size=".02" mass=".2"/></body></body>
</worldbody></mujoco>"""


def _state(qpos, qvel):
    return BranchState(qpos, qvel, jnp.zeros(0, qvel.dtype), jnp.zeros_like(qvel))


def test_plain_forward_value_is_plain_and_tangent_derivative_is_the_means():
    """sg(x_plain) (+) (x_bar (-) sg(x_bar)): the value is x_plain bit for bit; the derivative of
    the result's tangent coordinates at x_plain, d [x (-) x_plain] / d x_bar, equals that of the
    mean's own tangent coordinates, d [x_bar (-) x_bar0] / d x_bar (rotation vectors for the
    quaternion, identity for the rest)."""
    sim = bs.load(FREE_ARM, name="free_arm")
    rng = np.random.default_rng(0)

    def unit(v):
        return v / np.linalg.norm(v)

    q_plain = jnp.asarray(np.r_[0.1, -0.2, 0.5, unit([0.9, 0.1, -0.3, 0.2]), 0.4])
    q_mean = jnp.asarray(np.r_[0.12, -0.19, 0.48, unit([0.85, 0.15, -0.33, 0.25]), 0.37])
    v_plain, v_mean = jnp.asarray(rng.normal(size=7)), jnp.asarray(rng.normal(size=7))
    plain, mean = _state(q_plain, v_plain), _state(q_mean, v_mean)

    out = jax.jit(lambda m: plain_forward(sim, plain, m))(mean)
    assert np.array_equal(out.qpos, q_plain) and np.array_equal(out.qvel, v_plain)

    def tangent_out(q):
        res = plain_forward(sim, plain, mean._replace(qpos=q))
        return differentiate_qpos(sim, jax.lax.stop_gradient(res.qpos), res.qpos)

    def tangent_mean(q):
        return differentiate_qpos(sim, q_mean, q)

    J_out = jax.jit(jax.jacfwd(tangent_out))(q_mean)
    J_ref = jax.jit(jax.jacfwd(tangent_mean))(q_mean)
    np.testing.assert_allclose(J_out, J_ref, rtol=1e-10, atol=1e-12)
    assert np.linalg.matrix_rank(np.asarray(J_ref)) == 7  # 3 position + 3 rotation + 1 hinge
    J_v = jax.jit(jax.jacfwd(lambda v: plain_forward(sim, plain, mean._replace(qvel=v)).qvel))(
        v_mean
    )
    np.testing.assert_allclose(J_v, np.eye(7), rtol=0, atol=0)
    J_vp = jax.jit(jax.jacfwd(lambda v: plain_forward(sim, plain._replace(qvel=v), mean).qvel))(
        v_plain
    )
    assert not np.any(J_vp)  # the plain state carries no derivative
