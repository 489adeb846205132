"""Tests of bcg.estimators.smoothing against closed-form Gaussian-smoothed gradients.

Smoothed objective F(x) = E_w f(x + w), w ~ N(0, SIGMA^2 I). Monte-Carlo tolerances are
K_SE standard errors of the estimator under test; the standard errors are computed here with an
independent numpy sample of the same per-sample terms (not from the estimator's own output).

Compiles dominate the runtime, so each group of checks is one jitted computation over all
estimators (module-scoped fixtures), and the PRNG key is always a jit argument (a closed-over
key makes XLA constant-fold the whole noise array at compile time).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from bcg.estimators import smoothing as sm

SIGMA = 0.3
N = 40_000
K_SE = 5.0
XS = np.array([-0.35, -0.05, 0.1, 0.4])
KEY = jax.random.key(0)

SAMPLED = {
    "global-bundle": sm.global_bundle(SIGMA, N),
    "zeroth-order": sm.zeroth_order(SIGMA, N),
    "alpha-order": sm.alpha_order(SIGMA, N),
    "bundle-mean": sm.bundle_mean(SIGMA, N),
}
NOMINAL = ("global-bundle", "zeroth-order", "alpha-order")  # forward value is f(x)
ALL = {"analytic": sm.analytic(), **SAMPLED}


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def standard_errors(f_np, df_np, x, n=N, seed=1):
    """SEs of the mean of per-sample terms for x (d,), f_np: (n, d) -> (n, m), df_np -> (n, m, d).

    Returns (se_zeroth (m, d), se_first (m, d), se_value (m,)).
    """
    x = np.atleast_1d(np.asarray(x, dtype=float))
    w = np.random.default_rng(seed).normal(0.0, SIGMA, (n, x.size))
    fs = f_np(x[None] + w)
    f0 = f_np(x[None])[0]
    zeroth = (fs - f0)[:, :, None] * w[:, None, :] / SIGMA**2
    first = df_np(x[None] + w)
    root = math.sqrt(n)
    return zeroth.std(0) / root, first.std(0) / root, fs.std(0) / root


def tolerance(name, se0, se1):
    """K_SE standard errors; alpha-order's variance is at most the larger of the two."""
    se = {"zeroth-order": se0, "alpha-order": np.maximum(se0, se1)}.get(name, se1)
    return K_SE * se + 1e-12


def step(x):
    return (x > 0).astype(x.dtype)


# scalar toys: (f, f_np (n,1)->(n,1), df_np (n,1)->(n,1,1), dF/dx closed form, F closed form)
TOYS = {
    "relu": (
        jax.nn.relu,
        lambda z: np.maximum(z, 0.0),
        lambda z: (z > 0).astype(float)[..., None],
        lambda x: norm.cdf(x / SIGMA),
        lambda x: x * norm.cdf(x / SIGMA) + SIGMA * norm.pdf(x / SIGMA),
    ),
    "abs": (
        jnp.abs,
        np.abs,
        lambda z: np.sign(z)[..., None],
        lambda x: 2.0 * norm.cdf(x / SIGMA) - 1.0,
        lambda x: x * (2 * norm.cdf(x / SIGMA) - 1) + 2 * SIGMA * norm.pdf(x / SIGMA),
    ),
    "sin": (
        jnp.sin,
        np.sin,
        lambda z: np.cos(z)[..., None],
        lambda x: np.cos(x) * np.exp(-(SIGMA**2) / 2),
        lambda x: np.sin(x) * np.exp(-(SIGMA**2) / 2),
    ),
    "step": (
        step,
        lambda z: (z > 0).astype(float),
        lambda z: np.zeros_like(z)[..., None],
        lambda x: norm.pdf(x / SIGMA) / SIGMA,
        lambda x: norm.cdf(x / SIGMA),
    ),
}


@functools.cache
def toy_errors(toy):
    """(se_zeroth, se_first, se_value), each of shape XS.shape."""
    _, f_np, df_np, _, _ = TOYS[toy]
    out = [standard_errors(f_np, df_np, x) for x in XS]
    return tuple(np.array([o[k].item() for o in out]) for k in range(3))


# ------------------------------------------------------------------------------------------
# scalar toys: one jit for values, gradients and alpha diagnostics of every estimator
# ------------------------------------------------------------------------------------------

THRESHOLDED = sm.alpha_order(SIGMA, N, bias_threshold=0.25)


@pytest.fixture(scope="module")
def scalar():
    ests = {**ALL, "alpha-threshold": THRESHOLDED}

    def run(xs, key):
        out = {}
        for toy, (f, *_) in TOYS.items():
            out[toy, "nominal"] = jax.vmap(f)(xs)
            out[toy, "autodiff"] = jax.vmap(jax.grad(f))(xs)
            for name, est in ests.items():
                vg = jax.value_and_grad(lambda x, est=est, f=f: est(f, x, key))
                value, grad = jax.vmap(vg)(xs)
                out[toy, name] = {"value": value, "grad": grad}
                if isinstance(est, sm.AlphaOrder):
                    info = jax.vmap(lambda x, est=est, f=f: est.with_info(f, x, key)[1])(xs)
                    out[toy, name]["info"] = info
        return out

    return jax.device_get(jax.jit(run)(jnp.asarray(XS), KEY))


@pytest.mark.parametrize("name", list(SAMPLED))
@pytest.mark.parametrize("toy", ["relu", "abs", "sin"])
def test_smoothed_gradient_continuous_toys(scalar, toy, name):
    dF = TOYS[toy][3](XS)
    se0, se1, _ = toy_errors(toy)
    got = scalar[toy, name]["grad"]
    np.testing.assert_array_less(np.abs(got - dF), tolerance(name, se0, se1))


def test_analytic_is_plain_autodiff(scalar):
    for toy in TOYS:
        np.testing.assert_array_equal(scalar[toy, "analytic"]["grad"], scalar[toy, "autodiff"])
    np.testing.assert_allclose(scalar["sin", "analytic"]["grad"], np.cos(XS), rtol=1e-14)


def test_step_zeroth_order_matches_smoothed_gradient(scalar):
    dF = TOYS["step"][3](XS)
    se0, _, _ = toy_errors("step")
    got = scalar["step", "zeroth-order"]["grad"]
    np.testing.assert_array_less(np.abs(got - dF), K_SE * se0)


@pytest.mark.parametrize("name", ["analytic", "global-bundle", "bundle-mean"])
def test_step_first_order_is_biased(scalar, name):
    """Documented bias: the pathwise derivative of a step is 0 a.e., so the first-order
    estimate is exactly 0 although dF/dx = phi(x / sigma) / sigma is far from 0."""
    dF = TOYS["step"][3](XS)
    se0, _, _ = toy_errors("step")
    got = scalar["step", name]["grad"]
    np.testing.assert_array_equal(got, 0.0)
    assert np.all(np.abs(got - dF) > 20 * se0)


def test_step_alpha_order_bias_threshold_switches_to_zeroth_order(scalar):
    dF = TOYS["step"][3](XS)
    se0, _, _ = toy_errors("step")
    # default (no bias test): var1 == 0 so alpha == 1 picks the biased zero gradient
    default = scalar["step", "alpha-order"]
    np.testing.assert_array_equal(default["info"]["var1"], 0.0)
    np.testing.assert_array_equal(default["info"]["alpha"], 1.0)
    np.testing.assert_array_equal(default["grad"], 0.0)
    # finite threshold: ||J1 - J0|| ~ dF > 0.25 on all of XS, so alpha == 0 (zeroth order)
    thresholded = scalar["step", "alpha-threshold"]
    assert np.all(thresholded["info"]["bias"] > 0.25)
    np.testing.assert_array_equal(thresholded["info"]["alpha"], 0.0)
    np.testing.assert_array_less(np.abs(thresholded["grad"] - dF), K_SE * se0)
    zeroth = scalar["step", "zeroth-order"]["grad"]
    np.testing.assert_allclose(thresholded["grad"], zeroth, rtol=1e-12, atol=1e-14)


def test_alpha_threshold_inactive_on_continuous_function(scalar):
    """On relu the two estimates agree (bias << 0.25), so the threshold changes nothing."""
    plain, thresholded = scalar["relu", "alpha-order"], scalar["relu", "alpha-threshold"]
    assert np.all(thresholded["info"]["bias"] < 0.25)
    np.testing.assert_array_equal(thresholded["grad"], plain["grad"])


def test_alpha_matches_inverse_variance_weighting(scalar):
    """alpha = var0 / (var0 + var1) with var_k the variance of the mean (relu, smooth case)."""
    se0, se1, _ = toy_errors("relu")
    info = scalar["relu", "alpha-order"]["info"]
    np.testing.assert_allclose(info["alpha"], se0**2 / (se0**2 + se1**2), atol=0.02)
    np.testing.assert_allclose(info["var0"], se0**2, rtol=0.05)
    np.testing.assert_allclose(info["var1"], se1**2, rtol=0.05)


@pytest.mark.parametrize("toy", list(TOYS))
def test_bundle_mean_value_is_smoothed_value(scalar, toy):
    F = TOYS[toy][4](XS)
    _, _, sev = toy_errors(toy)
    got = scalar[toy, "bundle-mean"]["value"]
    np.testing.assert_array_less(np.abs(got - F), K_SE * sev)
    assert np.all(got != scalar[toy, "nominal"])  # the mean replaces the nominal value


@pytest.mark.parametrize("name", ["analytic", *NOMINAL, "alpha-threshold"])
def test_forward_value_is_nominal(scalar, name):
    for toy, (f, *_) in TOYS.items():
        np.testing.assert_array_equal(scalar[toy, name]["value"], scalar[toy, "nominal"])
        if toy != "sin":  # exact elementwise ops: also equal to eager f(x)
            expected = jax.vmap(f)(jnp.asarray(XS))
            np.testing.assert_array_equal(scalar[toy, name]["value"], expected)


# ------------------------------------------------------------------------------------------
# 3-D functions: vector-output relu(A x) and a quadratic; reverse and forward mode
# ------------------------------------------------------------------------------------------

A = np.array([[1.0, -0.5, 0.2], [0.3, 0.8, -1.0], [-0.7, 0.1, 0.4], [0.5, 0.5, 0.5]])
X3 = np.array([0.1, -0.15, 0.05])
Q = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, -0.4], [0.0, -0.4, 1.5]])
B = np.array([0.2, -0.1, 0.3])


def relu_A(x):
    return jax.nn.relu(jnp.asarray(A) @ x)


def quadratic(x):
    return 0.5 * x @ jnp.asarray(Q) @ x + jnp.asarray(B) @ x


@pytest.fixture(scope="module")
def three_d():
    def run(x, key):
        out = {"nominal": relu_A(x)}
        for name, est in ALL.items():

            def g(z, est=est):
                return est(relu_A, z, key)

            out[name] = {
                "value": g(x),
                "rev": jax.jacrev(g)(x),
                "fwd": jax.jacfwd(g)(x),
                "quad": jax.grad(lambda z, est=est: est(quadratic, z, key))(x),
            }
        return out

    return jax.device_get(jax.jit(run)(jnp.asarray(X3), KEY))


def test_vector_relu_jacobian_matches_closed_form(three_d):
    # row j of dF/dx: Phi(a_j . x / (sigma |a_j|)) a_j
    exact = norm.cdf(A @ X3 / (SIGMA * np.linalg.norm(A, axis=1)))[:, None] * A
    se0, se1, _ = standard_errors(
        lambda z: np.maximum(z @ A.T, 0.0),
        lambda z: (z @ A.T > 0)[:, :, None] * A[None],
        X3,
    )
    for name in SAMPLED:
        rev = three_d[name]["rev"]
        assert rev.shape == (4, 3)
        np.testing.assert_array_less(np.abs(rev - exact), tolerance(name, se0, se1), err_msg=name)
    # analytic is the unsmoothed Jacobian 1[a_j . x > 0] a_j
    np.testing.assert_array_equal(three_d["analytic"]["rev"], (A @ X3 > 0)[:, None] * A)


@pytest.mark.parametrize("name", list(ALL))
def test_forward_mode_equals_reverse_mode(three_d, name):
    np.testing.assert_allclose(three_d[name]["fwd"], three_d[name]["rev"], rtol=1e-10, atol=1e-12)


def test_vector_forward_value(three_d):
    for name in ["analytic", *NOMINAL]:
        np.testing.assert_array_equal(three_d[name]["value"], three_d["nominal"])
    np.testing.assert_array_equal(three_d["nominal"], relu_A(jnp.asarray(X3)))
    assert np.all(three_d["bundle-mean"]["value"] > three_d["nominal"])  # Jensen, convex relu


def test_quadratic_all_estimators_agree_with_exact_gradient(three_d):
    exact = Q @ X3 + B  # smoothing a quadratic leaves its gradient unchanged
    se0, se1, _ = standard_errors(
        lambda z: (0.5 * np.einsum("ni,ij,nj->n", z, Q, z) + z @ B)[:, None],
        lambda z: (z @ Q + B)[:, None, :],
        X3,
    )
    for name in ALL:
        tol = 1e-12 if name == "analytic" else tolerance(name, se0[0], se1[0])
        np.testing.assert_array_less(np.abs(three_d[name]["quad"] - exact), tol, err_msg=name)


# ------------------------------------------------------------------------------------------
# pytrees
# ------------------------------------------------------------------------------------------


def tree_fn(p):
    return jnp.sum(jax.nn.relu(p["a"])) + jnp.sum(jnp.sin(p["b"]))


def dict_out(x):
    return {"u": jnp.sum(jax.nn.relu(jnp.asarray(A) @ x)), "v": jnp.sin(x)}


def flat_out(x):
    d = dict_out(x)
    return jnp.concatenate([d["u"][None], d["v"]])


TREE_A, TREE_B = np.array([0.1, -0.2]), np.array([0.3, 1.0, -0.5])


@pytest.fixture(scope="module")
def trees():
    def run(params, x, key):
        out = {"nominal_in": tree_fn(params), "nominal_out": dict_out(x)}
        for name, est in SAMPLED.items():
            value, grads = jax.value_and_grad(lambda p, est=est: est(tree_fn, p, key))(params)
            out[name] = {
                "value": value,
                "grads": grads,
                "y": est(dict_out, x, key),
                "tree_jac": jax.jacrev(lambda z, est=est: est(dict_out, z, key))(x),
                "flat_jac": jax.jacrev(lambda z, est=est: est(flat_out, z, key))(x),
            }
        return out

    params = {"a": jnp.asarray(TREE_A), "b": jnp.asarray(TREE_B)}
    return jax.device_get(jax.jit(run)(params, jnp.asarray(X3), KEY))


def test_pytree_input_gradients(trees):
    exact = np.concatenate([norm.cdf(TREE_A / SIGMA), np.cos(TREE_B) * np.exp(-(SIGMA**2) / 2)])
    se0, se1, _ = standard_errors(
        lambda z: (np.maximum(z[:, :2], 0).sum(1) + np.sin(z[:, 2:]).sum(1))[:, None],
        lambda z: np.concatenate([(z[:, :2] > 0), np.cos(z[:, 2:])], axis=1)[:, None, :],
        np.concatenate([TREE_A, TREE_B]),
    )
    for name in SAMPLED:
        grads = trees[name]["grads"]
        assert set(grads) == {"a", "b"}
        assert grads["a"].shape == (2,) and grads["b"].shape == (3,)
        got = np.concatenate([grads["a"], grads["b"]])
        tol = tolerance(name, se0[0], se1[0])
        np.testing.assert_array_less(np.abs(got - exact), tol, err_msg=name)
        if name in NOMINAL:
            assert trees[name]["value"] == trees["nominal_in"]


@pytest.mark.parametrize("name", list(SAMPLED))
def test_pytree_output_matches_flat_output(trees, name):
    res = trees[name]
    assert set(res["y"]) == {"u", "v"}
    assert res["y"]["u"].shape == () and res["y"]["v"].shape == (3,)
    if name in NOMINAL:
        jax.tree_util.tree_map(np.testing.assert_array_equal, res["y"], trees["nominal_out"])
    got = np.concatenate([res["tree_jac"]["u"][None], res["tree_jac"]["v"]])
    np.testing.assert_allclose(got, res["flat_jac"], rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------
# jit / vmap / static-ness
# ------------------------------------------------------------------------------------------

SMALL = {
    "global-bundle": sm.global_bundle(SIGMA, 300),
    "zeroth-order": sm.zeroth_order(SIGMA, 300),
    "alpha-order": sm.alpha_order(SIGMA, 300, bias_threshold=0.5),
    "bundle-mean": sm.bundle_mean(SIGMA, 300),
}


def sum_relu_A(x):
    return jnp.sum(relu_A(x))


def small_value_and_grads(x, key):
    """{name: (value, grad)} of every SMALL estimator on sum(relu(A x))."""
    return {
        name: jax.value_and_grad(lambda z, est=est: est(sum_relu_A, z, key))(x)
        for name, est in SMALL.items()
    }


small_jit = jax.jit(small_value_and_grads)


def test_jit_equals_eager_for_fixed_key():
    x = jnp.asarray(X3)
    eager = small_value_and_grads(x, KEY)
    compiled = small_jit(x, KEY)
    other = small_jit(x, jax.random.key(7))
    for name in SMALL:
        np.testing.assert_allclose(compiled[name][0], eager[name][0], rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(
            compiled[name][1], eager[name][1], rtol=1e-10, atol=1e-12, err_msg=name
        )
        assert not np.allclose(other[name][1], compiled[name][1]), name  # the key is used


def test_vmap_equals_python_loop():
    xs = jnp.asarray(X3 + np.array([[0.0, 0.0, 0.0], [0.2, -0.1, 0.3], [-0.3, 0.4, 0.1]]))
    keys = jax.random.split(KEY, 3)

    @jax.jit
    def batched(xs, keys, key):
        per_key = jax.vmap(small_value_and_grads)(xs, keys)
        shared_key = jax.vmap(small_value_and_grads, in_axes=(0, None))(xs, key)
        return per_key, shared_key

    per_key, shared_key = batched(xs, keys, KEY)
    for i in range(3):
        looped, looped_shared = small_jit(xs[i], keys[i]), small_jit(xs[i], KEY)
        for name in SMALL:
            for k in range(2):  # value, grad
                np.testing.assert_allclose(
                    per_key[name][k][i], looped[name][k], rtol=1e-10, atol=1e-12
                )
                np.testing.assert_allclose(
                    shared_key[name][k][i], looped_shared[name][k], rtol=1e-10, atol=1e-12
                )


def test_estimators_are_static_and_hashable():
    assert sm.zeroth_order(0.3, 10) == sm.zeroth_order(0.3, 10)
    assert hash(sm.alpha_order(0.3, 10, 1.0)) == hash(sm.alpha_order(0.3, 10, 1.0))
    assert sm.global_bundle(0.3, 10) != sm.global_bundle(0.3, 11)
    est = sm.global_bundle(0.3, 10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.sigma = 1.0  # type: ignore[misc]

    @functools.partial(jax.jit, static_argnums=0)
    def fn(e, x, key):
        return jax.grad(lambda z: e(sum_relu_A, z, key))(x)

    fn(est, jnp.asarray(X3), KEY)
    fn(sm.make("global-bundle", sigma=0.3, num_samples=10), jnp.asarray(X3), KEY)
    assert fn._cache_size() == 1  # equal estimators hit the same compiled function
    # registered as leafless pytrees: also usable as ordinary (non-static) jit arguments
    assert jax.tree_util.tree_leaves(est) == []
    plain = jax.jit(fn.__wrapped__)
    np.testing.assert_array_equal(plain(est, jnp.asarray(X3), KEY), fn(est, jnp.asarray(X3), KEY))


# ------------------------------------------------------------------------------------------
# registry and validation
# ------------------------------------------------------------------------------------------


def test_registry_and_make():
    assert set(sm.ESTIMATORS) == {
        "analytic",
        "global-bundle",
        "zeroth-order",
        "alpha-order",
        "bundle-mean",
    }
    assert sm.make("analytic") == sm.analytic()
    assert sm.make("bundle-mean", sigma=0.2, num_samples=5) == sm.bundle_mean(0.2, 5)
    est = sm.make("alpha-order", sigma=0.2, num_samples=5, bias_threshold=2)
    assert isinstance(est, sm.AlphaOrder) and est.bias_threshold == 2.0
    assert isinstance(est.sigma, float) and isinstance(est.num_samples, int)
    with pytest.raises(ValueError, match=r"unknown estimator 'nope'.*global-bundle"):
        sm.make("nope")
    with pytest.raises(ValueError, match="num_samples"):
        sm.make("zeroth-order", sigma=0.3)
    with pytest.raises(ValueError, match="sigma"):
        sm.make("analytic", sigma=0.3)


SAMPLED_FACTORIES = [sm.global_bundle, sm.zeroth_order, sm.alpha_order, sm.bundle_mean]
BAD_SIGMA = [0, 0.0, -0.1, math.nan, math.inf, -math.inf, "0.3", None, True, jnp.asarray(0.3)]
BAD_N = [0, -3, 2.5, 2.0, True, False, "10", None]


@pytest.mark.parametrize("factory", SAMPLED_FACTORIES)
@pytest.mark.parametrize("sigma", BAD_SIGMA, ids=repr)
def test_bad_sigma_raises(factory, sigma):
    with pytest.raises(ValueError, match=r"sigma must be a finite number > 0, got"):
        factory(sigma=sigma, num_samples=10)


@pytest.mark.parametrize("factory", SAMPLED_FACTORIES)
@pytest.mark.parametrize("num_samples", BAD_N, ids=repr)
def test_bad_num_samples_raises(factory, num_samples):
    with pytest.raises(ValueError, match=r"num_samples must be an integer >= \d, got"):
        factory(sigma=0.3, num_samples=num_samples)


def test_alpha_order_needs_two_samples_and_positive_threshold():
    with pytest.raises(ValueError, match=r"num_samples must be an integer >= 2, got 1"):
        sm.alpha_order(0.3, 1)
    for bad in (0, -1.0, math.nan, "1", None, True):
        with pytest.raises(ValueError, match=r"bias_threshold must be a number > 0"):
            sm.alpha_order(0.3, 10, bias_threshold=bad)
    assert sm.alpha_order(0.3, 10, bias_threshold=math.inf).bias_threshold == math.inf
    est = sm.global_bundle(np.float32(0.3), np.int64(4))  # numpy scalars are accepted
    assert type(est.sigma) is float and type(est.num_samples) is int


def test_integer_input_is_rejected():
    with pytest.raises(TypeError, match="floating-point"):
        jax.eval_shape(lambda x: SMALL["zeroth-order"](sum_relu_A, x, KEY), jnp.arange(3))
