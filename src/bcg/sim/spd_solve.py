"""Solve ``A x = b`` for a symmetric positive definite ``A``, with a derivative that does not
differentiate the Cholesky factorisation.

Forward: ``L = cholesky(A)`` (upper, as ``jax.scipy.linalg.cho_factor``), ``x = cho_solve(L, b)``:
the same operations as MJX's dense mass-matrix and Newton-Hessian solves, so the values are
identical.

Derivative (a custom JVP, so forward and reverse mode both work): with the saved factor,

    dx = A^{-1} (db - sym(dA) x),    sym(dA) = (dA + dA^T) / 2

two triangular solves with the right-hand side of ``b``. Its transpose (reverse mode) is, for
an output cotangent ``x_bar``: ``lambda = A^{-1} x_bar``, ``b_bar = lambda``,
``A_bar = -(lambda x^T + x lambda^T) / 2``. The tangent of ``A`` is symmetrised as JAX's own
Cholesky rule treats its input (only symmetric perturbations of ``A`` are admissible), so
derivatives equal those of ``cho_solve(cho_factor(A), b)`` up to rounding. The difference is
cost: the derivative of ``cholesky`` solves triangular systems with ``n x n`` right-hand sides
(slow on XLA CPU for the small batched matrices of a robot's dynamics). ``b`` may be a vector
(n,) or a matrix (n, k).
"""

from __future__ import annotations

import jax
from jax.scipy.linalg import cho_factor, cho_solve


@jax.custom_jvp
def spd_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """``A^{-1} b`` for symmetric positive definite ``a`` (n, n); ``b`` (n,) or (n, k)."""
    return cho_solve(cho_factor(a), b)


@spd_solve.defjvp
def _spd_solve_jvp(primals, tangents):
    a, b = primals
    da, db = tangents
    factor = cho_factor(a)
    x = cho_solve(factor, b)
    dx = cho_solve(factor, db - 0.5 * (da + da.T) @ x)
    return x, dx
