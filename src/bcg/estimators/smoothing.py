"""Gaussian-smoothing gradient estimators (the baselines of docs/method.md, "Related estimators").

Every estimator is built by a small factory (optax style) and is a frozen, hashable dataclass
that is called as

    y = est(f, x, key)

where ``f`` maps a pytree ``x`` of float arrays to a pytree ``y`` and ``key`` is a JAX PRNG key.
The *forward value* of ``y`` and the *derivative* that autodiff (``jax.grad``, ``jax.jacrev``,
``jax.jvp``, ``jax.jacfwd``) sees through ``y`` are what distinguish the estimators. With
``d = dim(x)`` (all leaves raveled jointly with ``jax.flatten_util.ravel_pytree``) the noise is

    w_i ~ N(0, sigma^2 I_d),  i = 1..N  (N = num_samples),

drawn from ``key`` and held constant for autodiff (``jax.lax.stop_gradient``). The smoothed
objective is ``F_sigma(x) = E_w[f(x + w)]`` and all estimators except ``analytic`` target its
Jacobian ``dF_sigma/dx = E_w[df(x + w)]`` (first-order form) ``= E_w[(f(x + w) - f(x)) w^T] /
sigma^2`` (zeroth-order form, Stein's lemma).

    name            forward value          derivative seen by autodiff
    analytic        f(x)                   df(x)
    global-bundle   f(x)                   J1 = (1/N) sum_i df(x + w_i)
    zeroth-order    f(x)                   J0 = (1/N) sum_i (f(x + w_i) - f(x)) w_i^T / sigma^2
    alpha-order     f(x)                   alpha J1 + (1 - alpha) J0
    bundle-mean     (1/N) sum_i f(x + w_i) J1  (plain autodiff of the sample mean)

Straight-through form: the estimators whose forward value is the nominal ``f(x)`` but whose
derivative is an estimate return ``stop_gradient(f(x)) + (g(x) - stop_gradient(g(x)))`` where
``g`` has the desired derivative; the bracket is exactly zero in the forward pass, so the value
equals ``f(x)`` bit for bit, and its derivative (reverse and forward mode) is that of ``g``.

The estimators are static: their parameters are Python ``float``/``int`` validated at
construction (``ValueError`` naming the parameter); the classes are hashable and registered as
leafless pytrees (``jax.tree_util.register_static``), so they can be closed over, passed to
``jax.jit`` as ordinary or static arguments, and used inside ``jax.vmap``.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from bcg.validation import check_int, check_number

PyTree = Any
Fn = Callable[[PyTree], PyTree]

__all__ = [
    "ESTIMATORS",
    "AlphaOrder",
    "Analytic",
    "BundleMean",
    "Estimator",
    "GlobalBundle",
    "ZerothOrder",
    "alpha_order",
    "analytic",
    "bundle_mean",
    "global_bundle",
    "make",
    "zeroth_order",
]


# --------------------------------------------------------------------------------------------
# Validation (plain Python, at construction time)
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def _ravel_input(x: PyTree) -> tuple[jax.Array, Callable[[jax.Array], PyTree]]:
    flat, unravel = ravel_pytree(x)
    if not jnp.issubdtype(flat.dtype, jnp.floating):
        raise TypeError(
            f"smoothing estimators need floating-point inputs, got leaves of dtype {flat.dtype}"
        )
    return flat, unravel


def _noise(key: jax.Array, flat: jax.Array, sigma: float, num_samples: int) -> jax.Array:
    """w_i ~ N(0, sigma^2 I), shape (N, d), constant for autodiff."""
    w = sigma * jax.random.normal(key, (num_samples, flat.shape[0]), dtype=flat.dtype)
    return jax.lax.stop_gradient(w)


def _flat_fn(f: Fn, unravel: Callable[[jax.Array], PyTree]):
    """The flat map z (d,) -> ravel(f(unravel(z))) (m,)."""

    def g(z):
        return ravel_pytree(f(unravel(z)))[0]

    return g


def _straight_through(y: PyTree, g: PyTree) -> PyTree:
    """Forward value of y, derivative of g (leafwise): sg(y) + (g - sg(g))."""
    sg = jax.lax.stop_gradient
    return jax.tree_util.tree_map(lambda a, b: sg(a) + (b - sg(b)), y, g)


def _zeroth_terms(fs: jax.Array, f0: jax.Array, w: jax.Array, sigma: float) -> jax.Array:
    """Per-sample zeroth-order Jacobians (f(x + w_i) - f(x)) w_i^T / sigma^2, shape (N, m, d)."""
    return (fs - f0[None, :])[:, :, None] * w[:, None, :] / sigma**2


def _linear_output(
    f0: jax.Array, jac: jax.Array, flat: jax.Array, unravel_y: Callable[[jax.Array], PyTree]
) -> PyTree:
    """unravel(sg(f0) + sg(J) @ (x - sg(x))): value f(x), Jacobian J."""
    sg = jax.lax.stop_gradient
    return unravel_y((sg(f0) + sg(jac) @ (flat - sg(flat))).astype(f0.dtype))


def _var_of_mean(terms: jax.Array) -> jax.Array:
    """Summed sample variance of the mean of per-sample estimates (trace of cov / N)."""
    n = terms.shape[0]
    centred = terms - jnp.mean(terms, axis=0, keepdims=True)
    return jnp.sum(centred**2) / (n - 1) / n


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Estimator:
    """Base class: ``est(f, x, key) -> y``; ``est.with_info(f, x, key) -> (y, info)``."""

    name = "estimator"

    def __call__(self, f: Fn, x: PyTree, key: jax.Array) -> PyTree:
        return self.with_info(f, x, key)[0]

    def with_info(self, f: Fn, x: PyTree, key: jax.Array) -> tuple[PyTree, dict]:
        raise NotImplementedError


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Analytic(Estimator):
    """Plain autodiff: y = f(x), dy/dx = df(x). The key is ignored."""

    name = "analytic"

    def with_info(self, f: Fn, x: PyTree, key: jax.Array) -> tuple[PyTree, dict]:
        del key
        return f(x), {}


@dataclasses.dataclass(frozen=True)
class _Sampled(Estimator):
    sigma: float
    num_samples: int

    _min_samples = 1

    def __post_init__(self):
        object.__setattr__(self, "sigma", check_number("sigma", self.sigma, above=0))
        object.__setattr__(
            self, "num_samples", check_int("num_samples", self.num_samples, self._min_samples)
        )

    def _samples(self, x: PyTree, key: jax.Array):
        flat, unravel = _ravel_input(x)
        w = _noise(key, flat, self.sigma, self.num_samples)
        return flat, unravel, w


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class GlobalBundle(_Sampled):
    """First-order bundled gradient (Suh et al. 2022) with the nominal forward value.

        value:      y = f(x)
        derivative: J1 = (1/N) sum_i df(x + w_i),   w_i ~ N(0, sigma^2 I)

    implemented as y = sg(f(x)) + (ybar - sg(ybar)), ybar = (1/N) sum_i f(x + w_i).
    Unbiased for dF_sigma/dx only when f is (almost everywhere differentiable and) continuous:
    across a jump the pathwise derivative misses the jump's contribution, e.g. for a step
    f = 1[x > 0] it returns 0 while dF_sigma/dx = phi(x / sigma) / sigma.
    """

    name = "global-bundle"

    def with_info(self, f: Fn, x: PyTree, key: jax.Array) -> tuple[PyTree, dict]:
        flat, unravel, w = self._samples(x, key)
        ys = jax.vmap(lambda wi: f(unravel(flat + wi)))(w)
        ybar = jax.tree_util.tree_map(lambda a: jnp.mean(a, axis=0), ys)
        return _straight_through(f(x), ybar), {}


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class ZerothOrder(_Sampled):
    """Zeroth-order (score-function / Stein) estimator with the nominal forward value.

        value:      y = f(x)
        derivative: J0 = (1/N) sum_i (f(x + w_i) - f(x)) w_i^T / sigma^2,  w_i ~ N(0, sigma^2 I)

    (f and x raveled with ravel_pytree; J0 is (m, d)), implemented as
    y = unravel(sg(f(x)) + sg(J0) @ (x - sg(x))). Unbiased for dF_sigma/dx also for
    discontinuous f, but its variance grows like d / sigma^2.
    """

    name = "zeroth-order"

    def with_info(self, f: Fn, x: PyTree, key: jax.Array) -> tuple[PyTree, dict]:
        flat, unravel, w = self._samples(x, key)
        g = _flat_fn(f, unravel)
        f0, unravel_y = ravel_pytree(f(x))
        fs = jax.vmap(lambda wi: g(jax.lax.stop_gradient(flat) + wi))(w)
        j0 = jnp.mean(_zeroth_terms(fs, jax.lax.stop_gradient(f0), w, self.sigma), axis=0)
        return _linear_output(f0, j0, flat, unravel_y), {}


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class AlphaOrder(_Sampled):
    """Alpha-order interpolation (Suh et al. 2022) with the nominal forward value.

        value:      y = f(x)
        derivative: J = alpha J1 + (1 - alpha) J0
          J1 = (1/N) sum_i df(x + w_i)                             (first order, jacfwd/jacrev)
          J0 = (1/N) sum_i (f(x + w_i) - f(x)) w_i^T / sigma^2     (zeroth order)
          var_k = sum_{entries} sample_var_i(J_k,i) / N            (variance of the mean)
          alpha = var0 / (var0 + var1)   (alpha = 1 if var0 + var1 == 0)
          alpha = 0 if ||J1 - J0||_F > bias_threshold   (first order presumed biased)

    implemented as y = unravel(sg(f(x)) + sg(J) @ (x - sg(x))). Needs num_samples >= 2 (the
    sample variances). With the default bias_threshold = inf the bias test is off; note that for
    a piecewise-constant f the first-order samples are all 0, so var1 = 0 and alpha = 1 picks the
    (biased) zero gradient -- a finite bias_threshold is what switches to zeroth order there.
    ``with_info`` returns info = {"alpha", "var0", "var1", "bias"} (bias = ||J1 - J0||_F).
    """

    bias_threshold: float = math.inf

    name = "alpha-order"
    _min_samples = 2

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(
            self,
            "bias_threshold",
            check_number(
                "bias_threshold",
                self.bias_threshold,
                above=0,
                allow_inf=True,
                hint="inf disables the bias test",
            ),
        )

    def with_info(self, f: Fn, x: PyTree, key: jax.Array) -> tuple[PyTree, dict]:
        sg = jax.lax.stop_gradient
        flat, unravel, w = self._samples(x, key)
        g = _flat_fn(f, unravel)
        f0, unravel_y = ravel_pytree(f(x))

        # reverse mode when there are fewer outputs than inputs (e.g. a scalar objective)
        jac_mode = jax.jacrev if f0.size < flat.size else jax.jacfwd

        def value_and_jac(z):
            return jac_mode(lambda u: (g(u), g(u)), has_aux=True)(z)

        jac1, fs = jax.vmap(lambda wi: value_and_jac(sg(flat) + wi))(w)  # (N, m, d), (N, m)
        jac0 = _zeroth_terms(fs, sg(f0), w, self.sigma)
        j1, j0 = jnp.mean(jac1, axis=0), jnp.mean(jac0, axis=0)
        var1, var0 = _var_of_mean(jac1), _var_of_mean(jac0)
        denom = var0 + var1
        alpha = jnp.where(denom > 0, var0 / jnp.where(denom > 0, denom, 1.0), 1.0)
        bias = jnp.sqrt(jnp.sum((j1 - j0) ** 2))
        alpha = jnp.where(bias > self.bias_threshold, 0.0, alpha)
        jac = alpha * j1 + (1.0 - alpha) * j0
        info = {"alpha": sg(alpha), "var0": sg(var0), "var1": sg(var1), "bias": sg(bias)}
        return _linear_output(f0, jac, flat, unravel_y), info


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class BundleMean(_Sampled):
    """BCG aggregate on a generic function: the sample mean replaces the nominal value.

        value:      y = (1/N) sum_i f(x + w_i),   w_i ~ N(0, sigma^2 I)
        derivative: (1/N) sum_i df(x + w_i)   (plain autodiff of the mean)

    An unbiased estimate of F_sigma(x) = E f(x + w) and (for continuous f) of its Jacobian.
    """

    name = "bundle-mean"

    def with_info(self, f: Fn, x: PyTree, key: jax.Array) -> tuple[PyTree, dict]:
        flat, unravel, w = self._samples(x, key)
        ys = jax.vmap(lambda wi: f(unravel(flat + wi)))(w)
        return jax.tree_util.tree_map(lambda a: jnp.mean(a, axis=0), ys), {}


# --------------------------------------------------------------------------------------------
# Factories and registry
# --------------------------------------------------------------------------------------------


def analytic() -> Analytic:
    """Plain autodiff: y = f(x), dy/dx = df(x)."""
    return Analytic()


def global_bundle(sigma: float, num_samples: int) -> GlobalBundle:
    """y = f(x); dy/dx = (1/N) sum_i df(x + w_i), w_i ~ N(0, sigma^2 I). See GlobalBundle."""
    return GlobalBundle(sigma=sigma, num_samples=num_samples)


def zeroth_order(sigma: float, num_samples: int) -> ZerothOrder:
    """y = f(x); dy/dx = (1/N) sum_i (f(x + w_i) - f(x)) w_i^T / sigma^2. See ZerothOrder."""
    return ZerothOrder(sigma=sigma, num_samples=num_samples)


def alpha_order(sigma: float, num_samples: int, bias_threshold: float = math.inf) -> AlphaOrder:
    """y = f(x); dy/dx = alpha J1 + (1 - alpha) J0, alpha = var0 / (var0 + var1). See AlphaOrder."""
    return AlphaOrder(sigma=sigma, num_samples=num_samples, bias_threshold=bias_threshold)


def bundle_mean(sigma: float, num_samples: int) -> BundleMean:
    """y = (1/N) sum_i f(x + w_i); dy/dx = (1/N) sum_i df(x + w_i). See BundleMean."""
    return BundleMean(sigma=sigma, num_samples=num_samples)


ESTIMATORS: dict[str, Callable[..., Estimator]] = {
    "analytic": analytic,
    "global-bundle": global_bundle,
    "zeroth-order": zeroth_order,
    "alpha-order": alpha_order,
    "bundle-mean": bundle_mean,
}


def make(name: str, **params: Any) -> Estimator:
    """Build the estimator registered as ``name`` (a key of ESTIMATORS) from ``params``."""
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; valid names: {', '.join(ESTIMATORS)}")
    factory = ESTIMATORS[name]
    signature = inspect.signature(factory)
    try:
        signature.bind(**params)
    except TypeError as err:
        raise ValueError(
            f"bad parameters for estimator {name!r}: {err}; expected {name}{signature}"
        ) from None
    return factory(**params)
