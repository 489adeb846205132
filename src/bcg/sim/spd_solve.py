"""Solve ``A x = b`` for a symmetric positive definite ``A``, with a backward pass that does not
differentiate the Cholesky factorisation.

Forward: ``L = cholesky(A)`` (upper, as ``jax.scipy.linalg.cho_factor``), ``x = cho_solve(L, b)``:
the same operations as MJX's dense mass-matrix and Newton-Hessian solves, so the values are
identical.

Backward, from the differential ``dx = A^{-1} (db - dA x)``: with the output cotangent ``x_bar``,

    lambda = A^{-1} x_bar               (two triangular solves with the saved factor)
    b_bar  = lambda
    A_bar  = -(lambda x^T + x lambda^T) / 2

``A_bar`` is symmetrised as JAX's own Cholesky rule treats its input (only symmetric
perturbations of ``A`` are admissible), so the gradient equals differentiating
``cho_solve(cho_factor(A), b)`` up to rounding. The difference is cost: reverse-mode through
``cholesky`` solves triangular systems with ``n x n`` right-hand sides (slow on XLA CPU for the
small batched matrices of a robot's dynamics), this needs two with the right-hand side of ``b``.
``b`` may be a vector (n,) or a matrix (n, k).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_factor, cho_solve


@jax.custom_vjp
def spd_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """``A^{-1} b`` for symmetric positive definite ``a`` (n, n); ``b`` (n,) or (n, k)."""
    return cho_solve(cho_factor(a), b)


def _fwd(a, b):
    factor = cho_factor(a)
    x = cho_solve(factor, b)
    return x, (factor[0], x)


def _bwd(res, x_bar):
    upper, x = res
    lam = cho_solve((upper, False), x_bar)
    if x.ndim == 1:
        outer = jnp.outer(lam, x)
    else:
        outer = lam @ x.T
    a_bar = -0.5 * (outer + outer.T)
    return a_bar.astype(upper.dtype), lam


spd_solve.defvjp(_fwd, _bwd)
