"""Backward-only armature (``backward_armature`` of the analytic step): the forward pass is the
true model's, the gradient is the chain of the step VJPs of a model with more armature, taken
at the true states. The heavier model is built independently, from an MJCF that declares the
armature, and the chain by hand."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg.sim as bs
from bcg import estimators as E
from bcg.estimators.backward_armature import (
    joint_dof_mask,
    surrogate_vjp,
    with_added_armature,
)
from bcg.estimators.bcg import BCG

# a hinged arm swung into the floor (stiff contact) by a motor, on a free-floating base body
# elsewhere in the scene (colliding with nothing: no box-plane collision to compile), so that the
# model has a free joint whose DOFs must stay untouched
ARM = """<mujoco><option timestep="0.005"/>
<worldbody><geom type="plane" size="5 5 .1"/>
<body pos="0 0 .2"><joint name="hinge" type="hinge" axis="0 1 0" armature="{a}" damping=".05"/>
<geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" mass=".4"/></body>
<body pos="2 0 1"><freejoint/>
<geom type="box" size=".1 .1 .1" mass="1" contype="0" conaffinity="0"/></body>
</worldbody>
<actuator><motor joint="hinge" gear="1"/></actuator></mujoco>"""
A = 0.02
T = 6
KEY = jax.random.PRNGKey(0)


@pytest.fixture(scope="module")
def sims():
    """The true model, and the heavier one: its joint-space inertia with the armature that an
    MJCF declaring ``armature=A`` compiles to; everything else (the constraint regularisation
    from ``dof_invweight0``, which the compiler also derives from the armature) stays the true
    model's, since only the mass matrix of the backward pass changes."""
    light = bs.load(ARM.format(a=0.0), stiffness="stiff", name="arm")
    declared = bs.load(ARM.format(a=A), stiffness="stiff", name="arm_declared")
    heavy = dataclasses.replace(
        light, mjx_model=light.mjx_model.replace(dof_armature=declared.mjx_model.dof_armature)
    )
    return light, heavy


def _batch(sim):
    tmpl = bs.make_data(sim)
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (3,) + x.shape), tmpl)
    return d.replace(
        qpos=d.qpos.at[:, 0].set(jnp.array([0.45, 0.5, 0.55])),
        qvel=d.qvel.at[:, 0].set(jnp.array([1.0, 2.0, 3.0])),
    )


CTRLS = jnp.broadcast_to(jnp.array([[0.4], [0.6], [0.8]]), (T, 3, 1))


def _loss(d):
    return jnp.sum(d.qpos[:, 0] ** 2 + 0.1 * d.qvel[:, 0])


def _grad(sim, est):
    d0 = _batch(sim)

    def loss(dv):
        dT, _ = E.rollout(sim, est, d0.replace(qvel=d0.qvel + dv), CTRLS, KEY)
        return _loss(dT), dT

    (val, dT), g = jax.jit(jax.value_and_grad(loss, has_aux=True))(jnp.zeros_like(d0.qvel))
    return float(val), np.asarray(dT.qpos), np.asarray(g)


def test_surrogate_vjp_returns_f_forward_and_f_bwd_gradient():
    g = surrogate_vjp(jnp.sin, lambda x: 3.0 * x**2)
    x = jnp.array([0.3, -1.2])
    np.testing.assert_array_equal(g(x), jnp.sin(x))
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(g(x)))(x), 6.0 * x, rtol=1e-6)


def test_armature_goes_to_joint_dofs_only(sims):
    light, _ = sims
    mask = joint_dof_mask(light.mj_model)
    assert mask.tolist() == [True] + [False] * 6
    heavy = with_added_armature(light, A)
    np.testing.assert_allclose(
        np.asarray(heavy.mjx_model.dof_armature), [A, 0, 0, 0, 0, 0, 0], atol=1e-12
    )
    # composed after a per-state model (domain randomisation), not replaced by it
    randomised = dataclasses.replace(
        light, model_at=lambda m, d: m.replace(dof_armature=m.dof_armature + 0.5)
    )
    m = with_added_armature(randomised, A).model_for(bs.make_data(light))
    np.testing.assert_allclose(np.asarray(m.dof_armature), [0.5 + A] + [0.5] * 6, atol=1e-6)


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), True, "0.1"])
def test_backward_armature_is_validated(bad):
    with pytest.raises(ValueError, match="backward_armature"):
        E.make("analytic", backward_armature=bad)


# four rollout/VJP compiles (~200 s cold); the surrogate VJP and the DOF mask are tested fast
@pytest.mark.slow
def test_forward_is_the_true_model_and_gradient_the_heavier_chain(sims):
    light, heavy = sims
    val, qT, g = _grad(light, E.make("analytic", backward_armature=A))
    val0, qT0, g0 = _grad(light, E.make("analytic"))
    assert val == val0  # the forward pass is untouched, bit for bit
    np.testing.assert_array_equal(qT, qT0)
    # the arm reaches the floor, and the added armature changes the gradient
    assert np.abs(g - g0).max() > 1e-3 * np.abs(g0).max()

    # by hand: the true trajectory, then the heavier model's one-step VJPs along it
    est = E.make("analytic")
    step = jax.jit(lambda sim, x, u: E.rollout(sim, est, x, u[None], KEY)[0], static_argnums=0)
    states = [_batch(light)]
    for t in range(T):
        states.append(step(light, states[-1], CTRLS[t]))
    # the tip (0.3 m from a hinge 0.2 m up) touches the floor beyond 0.6 rad
    assert float(jnp.max(jnp.stack([s.qpos[:, 0] for s in states]))) > 0.6
    np.testing.assert_array_equal(np.asarray(states[-1].qpos), qT)

    @jax.jit
    def heavy_vjp(x, u, ct):
        return jax.vjp(lambda x: step(heavy, x, u), x)[1](ct)[0]

    ct = jax.vjp(_loss, states[-1])[1](jnp.ones(()))[0]
    for t in reversed(range(T)):
        ct = heavy_vjp(states[t], CTRLS[t], ct)
    np.testing.assert_allclose(g, np.asarray(ct.qvel), rtol=2e-4, atol=1e-6 * np.abs(g).max())


@pytest.mark.slow  # a BCG rollout compile (~200 s cold); the analytic surrogate is tested fast
def test_bcg_backward_armature_equals_the_analytic_one_where_nothing_triggers(sims):
    """BCG's plain step and branches take the same surrogate VJP: with a trigger no contact
    reaches it equals the analytic step with the same ``backward_armature``."""
    light, _ = sims
    _, _, g = _grad(light, BCG(tau=1e9, num_branches=2, horizon=1, backward_armature=A))
    _, _, g_an = _grad(light, E.make("analytic", backward_armature=A))
    np.testing.assert_allclose(g, g_an, rtol=1e-9, atol=1e-12)
