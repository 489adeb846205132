"""Median-relative clipping of backward-pass cotangents, row by row (ours).

For a pytree whose leaves share a leading axis of N rows (environments of a batch, branches of
a bundle), ``clip_rows(tree, c)`` is the identity on the forward pass; on the backward pass the
cotangent g_n of row n (all its floating leaves together) becomes

    g_n <- g_n * min(1, c * m / |g_n|),    m = median_n |g_n|,

so that no row's cotangent exceeds c times the median row's. Rows are left as they are when
m = 0 (most rows receive no gradient, e.g. a reverse pass seeded with one row only). Integer and
boolean leaves pass through untouched.

Used per environment after every control step by :func:`bcg.estimators.wrappers.env_clip`
(every step estimator's ``env_clip``): the backward pass of a rollout then
carries lambda_t = dL/dx_t of each environment at most c times the batch median at every step,
which bounds the contribution of an environment whose sensitivity grows over the whole window
(docs/reports/legged_bcg.md, "Where the G1's outlier gradients come from") without touching
the others.
Its gradient is no longer the exact gradient of that environment's loss: it is the gradient
of a surrogate in which the far past of a diverging environment counts less, like a per-sample
gradient clip (Abadi et al., 2016, "Deep learning with differential privacy", Alg. 1) applied
to the state cotangent at each step instead of to the final gradient. Also used per branch
inside a bundle (``branch_clip``, :mod:`bcg.estimators.aggregation`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bcg.validation import check_number


def check_factor(name: str, factor) -> None:
    """ValueError unless ``factor`` is None or a finite number >= 1."""
    check_number(name, factor, at_least=1, optional=True)


def _is_float(x) -> bool:
    return jnp.issubdtype(jnp.result_type(x), jnp.inexact)


def row_scales(cotangents, factor: float):
    """The per-row factors min(1, c m / |g_n|) of a list of cotangent arrays (leading axis N)."""
    sq = sum(jnp.sum(jnp.reshape(x, (x.shape[0], -1)) ** 2, axis=1) for x in cotangents)
    norm = jnp.sqrt(sq)
    bound = factor * jnp.median(norm)
    clip = (norm > bound) & (bound > 0)
    return jnp.where(clip, bound / jnp.where(clip, norm, 1.0), 1.0)


@jax.custom_vjp
def _clip(floats: tuple, factor):
    return floats


def _fwd(floats, factor):
    return floats, factor


def _bwd(factor, g):
    scale = row_scales(g, factor)

    def apply(x):
        return x * scale.reshape((-1,) + (1,) * (x.ndim - 1)).astype(x.dtype)

    return tuple(apply(x) for x in g), None


_clip.defvjp(_fwd, _bwd)


def clip_rows(tree, factor: float):
    """Identity on ``tree`` whose backward pass clips each row's cotangent to ``factor`` times
    the median row norm (module docstring). Every leaf has the row axis first."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    floats = tuple(x for x in leaves if _is_float(x))
    if not floats:
        return tree
    clipped = iter(_clip(floats, jnp.asarray(factor, floats[0].dtype)))
    return treedef.unflatten([next(clipped) if _is_float(x) else x for x in leaves])
