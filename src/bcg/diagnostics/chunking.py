"""Split large per-sample gradient computations into chunks of samples (bounded work per call).

Large BCG gradient calls (about 60k branch rollouts per call and more, e.g. 2048 states x
B = 30 on the pogo) were seen to hang inside XLA's CPU runtime, and the memory of one call grows
with states x branches. The reports therefore compute their per-sample gradients in chunks of at
most ``chunk_size`` samples; the default (:func:`chunk_size_for`) keeps samples x rollouts per
sample at or below :data:`MAX_ROLLOUTS_PER_CALL`.

Chunking must not change the result. Every environment of a batch is independent of the others
(with an unlimited BCG ``capacity``, the default), but its random numbers come from the batch:
a step estimator splits the step key into one key per environment, ``split(k_t, E)[i]``, so a
chunk evaluated on its own would give its first sample the keys of sample 0. :func:`offset_key`
fixes this without touching the estimators: it wraps the step key in a PRNG implementation
whose ``split`` numbers the children from an offset, ``split(offset_key(k, o), E)[i] =
split(k, o + E)[o + i]`` (threefry's partitionable split: element i does not depend on E).
A chunk starting at sample ``o`` thus gets exactly the keys its samples have in the whole batch,
and at ``o = 0`` the keys are bit-identical to plain threefry keys (the unchunked results are
the ones computed before chunking existed, with ``jax_threefry_partitionable`` on, the default).

With a finite BCG ``capacity`` the slots are shared per call, so chunks fill their slots
independently (more environments may bundle than in one call): results then depend on the chunk
size.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import define_prng_impl, threefry2x32_p, threefry_prng_impl

from bcg import estimators as E

# samples x rollouts per sample of one compiled call; the XLA CPU hang was seen from about 60k
# (2048 x 30) and not at 41k (1024 x 40)
MAX_ROLLOUTS_PER_CALL = 32768

# --------------------------------------------------------------------------- keys


def _seed(seed):
    return jnp.concatenate([threefry_prng_impl.seed(seed), jnp.zeros(1, jnp.uint32)])


def _split(data, shape):
    """Children ``o + i`` of the threefry key ``data[:2]`` (partitionable numbering), each
    with offset 0."""
    n = math.prod(shape)
    if n >= 2**32:
        raise ValueError("offset keys split into fewer than 2**32 children")
    lo = jax.lax.iota(jnp.uint32, n).reshape(shape) + data[2]
    hi = (lo < data[2]).astype(jnp.uint32)  # carry of o + i past 2**32
    b1, b2 = threefry2x32_p.bind(data[0], data[1], hi, lo)
    return jnp.stack([b1, b2, jnp.zeros_like(b1)], axis=-1)


def _random_bits(data, bit_width, shape):
    return threefry_prng_impl.random_bits(data[:2], bit_width, shape)


def _fold_in(data, x):
    return jnp.concatenate([threefry_prng_impl.fold_in(data[:2], x), jnp.zeros(1, jnp.uint32)])


OFFSET_THREEFRY = define_prng_impl(
    key_shape=(3,),
    seed=_seed,
    split=_split,
    random_bits=_random_bits,
    fold_in=_fold_in,
    name="offset_threefry2x32",
    tag="ofry",
)


def offset_key(key, offset):
    """The threefry ``key`` (raw uint32 (2,) or a typed threefry / offset key) whose ``split``
    numbers its children from ``offset`` (a traced uint32 is fine: no recompilation per chunk).
    ``random_bits`` and ``fold_in`` act on the threefry key itself."""
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    data = jnp.asarray(data, jnp.uint32)[..., :2]
    off = jnp.broadcast_to(jnp.asarray(offset, jnp.uint32), data.shape[:-1] + (1,))
    return jax.random.wrap_key_data(jnp.concatenate([data, off], axis=-1), impl=OFFSET_THREEFRY)


def rollout(sim, estimator, data0, ctrls, key, offset=0, *, checkpoint: bool = True):
    """:func:`bcg.estimators.rollout` for environments ``offset .. offset + E - 1`` of a larger
    batch: the per-step keys are ``split(key, T)`` as there, each wrapped by :func:`offset_key`
    so that environment i draws what environment ``offset + i`` draws in the whole batch."""
    T = ctrls.shape[0]

    def body(carry, xs):
        u, k = xs
        return estimator.step(sim, carry, u, offset_key(k, offset))

    if checkpoint:
        body = jax.checkpoint(body)
    carry0 = estimator.init(sim, data0)
    carry, stats = jax.lax.scan(body, carry0, (ctrls, jax.random.split(key, T)))
    return estimator.state(carry), stats


# --------------------------------------------------------------------------- chunks


def rollouts_per_sample(est) -> int:
    """Rollouts one sample costs under ``est``: BCG branches (plus the plain step), smoothing
    samples of a transform, 1 for the analytic gradient."""
    if isinstance(est, E.BCG):
        return est.num_branches + 1
    transform = est.transform if isinstance(est, E.ObjectiveLevel | E.PlainStep) else None
    return max(1, int(getattr(transform, "num_samples", 1) or 1))


def chunk_size_for(est, chunk_size: int | None = None) -> int:
    """``chunk_size`` if given, else the largest power of two of samples whose rollouts
    (:func:`rollouts_per_sample`) stay within :data:`MAX_ROLLOUTS_PER_CALL`."""
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer):
            raise ValueError(f"chunk_size must be a positive int or None, got {chunk_size!r}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        return int(chunk_size)
    per_call = max(1, MAX_ROLLOUTS_PER_CALL // rollouts_per_sample(est))
    return 1 << (per_call.bit_length() - 1)


def chunk_bounds(n: int, chunk_size: int) -> list[tuple[int, int]]:
    """(start, stop) of ceil(n / chunk_size) chunks of near-equal size covering 0..n in order
    (at most two distinct sizes, so at most two compilations)."""
    if n < 1:
        return []
    count = -(-n // max(1, chunk_size))
    q, r = divmod(n, count)
    bounds, start = [], 0
    for c in range(count):
        stop = start + q + (c < r)
        bounds.append((start, stop))
        start = stop
    return bounds
