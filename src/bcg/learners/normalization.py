"""Running mean / variance of a stream of batches (Welford / Chan et al. parallel merge).

The statistics of all samples seen so far, (mean m_a, variance v_a, count n_a), merged with a
batch (m_b, v_b, n_b) (population variances, samples along the leading axes):

    n   = n_a + n_b,    delta = m_b - m_a
    m   = m_a + delta n_b / n
    v   = (v_a n_a + v_b n_b + delta^2 n_a n_b / n) / n

Used for observations (per component) and for the discounted return (a scalar) whose standard
deviation scales the rewards (SHAC's return normalisation):

    normalize(x) = (x - m) / sqrt(v + eps)
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


class RunningMeanStd(NamedTuple):
    mean: jnp.ndarray
    var: jnp.ndarray
    count: jnp.ndarray


def init(shape=(), dtype=jnp.float32, count: float = 1e-4) -> RunningMeanStd:
    """Prior: mean 0, variance 1, a tiny pseudo-count (the first batch dominates)."""
    return RunningMeanStd(
        jnp.zeros(shape, dtype), jnp.ones(shape, dtype), jnp.asarray(count, dtype)
    )


def update(rms: RunningMeanStd, x, weights=None) -> RunningMeanStd:
    """Merge a batch ``x`` of shape (..., *rms.mean.shape) into the statistics.

    ``weights`` (shape (...), 0 or 1): samples with weight 0 are left out (m_b, v_b and n_b
    are the weighted mean, variance and count); a batch of zero weight changes nothing."""
    x = jnp.asarray(x, rms.mean.dtype).reshape((-1,) + rms.mean.shape)
    if weights is None:
        n_b = jnp.asarray(x.shape[0], rms.count.dtype)
        m_b = jnp.mean(x, axis=0)
        v_b = jnp.var(x, axis=0)
    else:
        w = jnp.asarray(weights, rms.mean.dtype).reshape((-1,) + (1,) * len(rms.mean.shape))
        x = jnp.where(w > 0, x, 0.0)  # a left-out sample may hold anything
        n_b = jnp.sum(w).astype(rms.count.dtype)
        safe = jnp.maximum(n_b, 1e-12)
        m_b = jnp.sum(w * x, axis=0) / safe
        v_b = jnp.sum(w * (x - m_b) ** 2, axis=0) / safe
    n = rms.count + n_b
    delta = m_b - rms.mean
    mean = rms.mean + delta * (n_b / n)
    var = (rms.var * rms.count + v_b * n_b + delta**2 * (rms.count * n_b / n)) / n
    return RunningMeanStd(mean.astype(rms.mean.dtype), var.astype(rms.var.dtype), n)


def normalize(rms: RunningMeanStd, x, eps: float = 1e-5):
    return (x - rms.mean) / jnp.sqrt(rms.var + eps)


def std(rms: RunningMeanStd, eps: float = 1e-6):
    return jnp.sqrt(rms.var + eps)
