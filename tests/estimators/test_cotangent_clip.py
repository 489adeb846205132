"""Median-relative cotangent clipping per row (``clip_rows``) and per environment after every
control step (``env_clip`` of the analytic step and of BCG), checked against the clip done by
hand on explicit vector-Jacobian products."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg.sim as bs
from bcg import estimators as E
from bcg.estimators.bcg import BCG
from bcg.estimators.cotangent_clip import check_factor, clip_rows

BALL = """<mujoco><option timestep="0.005"/><worldbody><geom type="plane" size="50 50 .1"/>
<body><joint name="z" type="slide" axis="0 0 1"/><geom type="sphere" size=".1" mass="1"/></body>
</worldbody></mujoco>"""

# envs 0-2 hit the floor in the first control steps, envs 3, 4 fly; env 4's loss weight is an
# outlier, so its cotangent is far above the batch median at every step
Z = [0.13, 0.15, 0.16, 3.0, 3.0]
VZ = [-1.5, -1.5, -1.5, 1.0, 1.0]
W = jnp.array([1.0, 1.3, 0.8, 1.1, 50.0])
C = 2.0


@pytest.fixture(scope="module")
def sim():
    return bs.load(BALL, stiffness="stiff", name="ball")


def _batch(sim):
    tmpl = bs.make_data(sim)
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (len(Z),) + x.shape), tmpl)
    return d.replace(
        qpos=jnp.asarray(Z, float).reshape(-1, 1), qvel=jnp.asarray(VZ, float).reshape(-1, 1)
    )


def _loss_of_state(d):
    return jnp.sum(W * (d.qpos[:, 0] + 0.1 * d.qvel[:, 0]))


def _rollout_grad(sim, est, T):
    d0 = _batch(sim)

    def loss(dv):
        dT, _ = E.rollout(sim, est, d0.replace(qvel=d0.qvel + dv), jnp.zeros((T, 5, 0)), KEY)
        return _loss_of_state(dT)

    return np.asarray(jax.jit(jax.grad(loss))(jnp.zeros_like(d0.qvel)))


KEY = jax.random.PRNGKey(0)


def _scales(tree, c):
    """Per-row min(1, c median / norm) of a cotangent pytree, in numpy."""
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]
    leaves = [x for x in leaves if np.issubdtype(x.dtype, np.inexact)]
    norm = np.sqrt(sum((x.reshape(x.shape[0], -1) ** 2).sum(1) for x in leaves))
    bound = c * np.median(norm)
    return np.where(norm > bound, bound / np.where(norm > 0, norm, 1), 1.0)


def test_clip_rows_is_the_identity_forward_and_clips_rows_backward():
    t = {"a": jnp.arange(8.0).reshape(4, 2), "i": jnp.arange(4), "b": jnp.ones((4, 1))}
    out, back = jax.vjp(lambda a, b: clip_rows({"a": a, "i": t["i"], "b": b}, 2.0), t["a"], t["b"])
    np.testing.assert_array_equal(out["a"], t["a"])
    np.testing.assert_array_equal(out["i"], t["i"])  # integer leaves pass through
    ga = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [30.0, 40.0]])
    gb = jnp.array([[0.0], [0.0], [0.0], [0.0]])
    ca, cb = back({"a": ga, "i": np.zeros(4, jax.dtypes.float0), "b": gb})
    # row norms 1, 1, 1, 50: median 1, bound 2; row 3 scaled by 2 / 50, rows 0-2 untouched
    np.testing.assert_allclose(ca, np.asarray(ga) * np.array([1, 1, 1, 2 / 50])[:, None])
    np.testing.assert_array_equal(cb, gb)
    # a bound above every row's norm leaves the cotangents as they are
    _, loose = jax.vjp(lambda a: clip_rows(a, 1e9), t["a"])
    np.testing.assert_array_equal(loose(ga)[0], ga)
    # the bound is over all leaves of a row together
    gb2 = jnp.array([[1.0], [1.0], [1.0], [0.0]])
    ca2, cb2 = back({"a": ga, "i": np.zeros(4, jax.dtypes.float0), "b": gb2})
    s = _scales({"a": ga, "b": gb2}, 2.0)
    np.testing.assert_allclose(ca2, np.asarray(ga) * s[:, None], rtol=1e-6)
    np.testing.assert_allclose(cb2, np.asarray(gb2) * s[:, None], rtol=1e-6)


def test_clip_rows_leaves_rows_alone_when_most_receive_no_gradient():
    """A reverse pass seeded with one row (median norm 0) is not clipped to zero."""
    x = jnp.ones((5, 3))
    _, back = jax.vjp(lambda x: clip_rows(x, 1.0), x)
    g = jnp.zeros((5, 3)).at[2].set(7.0)
    np.testing.assert_array_equal(back(g)[0], g)


@pytest.mark.parametrize("bad", [0.5, 0, -1.0, float("inf"), float("nan"), True, "3"])
def test_env_clip_is_validated(bad):
    with pytest.raises(ValueError, match="env_clip"):
        check_factor("env_clip", bad)
    with pytest.raises(ValueError, match="env_clip"):
        E.make("analytic", env_clip=bad)
    with pytest.raises(ValueError, match="env_clip"):
        E.make("bcg", env_clip=bad)
    with pytest.raises(ValueError, match="env_clip"):
        E.env_clip(BCG(), bad)


def test_env_clip_wraps_any_step_estimator():
    """``env_clip`` is a wrapper (bcg.estimators.wrappers), the same whether given to ``make``
    or applied by hand; None leaves the estimator as it is; it refuses objective-level ones."""
    assert E.make("bcg", env_clip=C) == E.env_clip(E.make("bcg"), C)
    assert E.make("bcg", env_clip=C).num_branches == E.make("bcg").num_branches
    assert E.unwrap(E.make("analytic", env_clip=C)) == E.make("analytic")
    assert E.env_clip(E.make("analytic"), None) == E.make("analytic")
    assert isinstance(E.make("global-bundle", env_clip=C), E.StepEstimator)
    with pytest.raises(ValueError, match="step estimators"):
        E.make("zeroth-order", env_clip=C)


def test_env_clip_after_each_step_matches_the_clip_by_hand(sim):
    """Two analytic steps with ``env_clip=c``: d L / d v0 = J1^T clip(J2^T clip(g2)), where
    clip scales each environment's cotangent of the whole state (every float field) to at
    most c times the batch median (a bound above every row leaves them alone: tested on
    ``clip_rows`` above)."""
    T = 2
    plain = E.make("analytic")
    d0 = _batch(sim)
    u = jnp.zeros((5, 0))
    k1, k2 = jax.random.split(KEY, T)  # the rollout's per-step keys

    step = jax.jit(lambda d, k: plain.step(sim, d, u, k)[0])  # compiled once, used twice

    d1, vjp1 = jax.vjp(lambda v: step(d0.replace(qvel=v), k1), d0.qvel)
    d2, vjp2 = jax.vjp(lambda d: step(d, k2), d1)
    (g2,) = jax.vjp(_loss_of_state, d2)[1](jnp.ones(()))
    s2 = _scales(g2, C)
    assert s2[4] < 0.2 and np.all(s2[:4] == 1)  # the outlier environment is clipped
    scale = jax.tree_util.tree_map  # scale every float leaf of a row

    def times(tree, s):
        return scale(
            lambda x: (
                x * s.reshape((-1,) + (1,) * (x.ndim - 1)).astype(x.dtype)
                if jnp.issubdtype(x.dtype, jnp.inexact)
                else x
            ),
            tree,
        )

    (g1,) = vjp2(times(g2, s2))
    s1 = _scales(g1, C)
    (expected,) = vjp1(times(g1, s1))
    got = _rollout_grad(sim, E.make("analytic", env_clip=C), T)
    np.testing.assert_allclose(got, np.asarray(expected), rtol=1e-6, atol=1e-10)
    unclipped = _rollout_grad(sim, plain, T)
    assert abs(got[4, 0]) < 0.5 * abs(unclipped[4, 0])
    kept = (s1 == 1) & (s2 == 1)  # environments never clipped keep their plain gradient
    assert kept.sum() >= 2
    np.testing.assert_allclose(got[kept], unclipped[kept], rtol=1e-6)


@pytest.mark.slow  # two rollout compiles (~100 s cold); the analytic clip is tested fast
def test_bcg_env_clip_equals_the_analytic_one_where_nothing_triggers(sim):
    """BCG clips its whole carry per environment: with a trigger no contact reaches it equals
    the analytic step with the same ``env_clip``."""
    T = 4
    never = E.env_clip(BCG(tau=1e9), C)
    np.testing.assert_allclose(
        _rollout_grad(sim, never, T),
        _rollout_grad(sim, E.make("analytic", env_clip=C), T),
        rtol=1e-9,
        atol=1e-12,
    )
