"""Split large per-sample gradient computations into chunks of samples (bounded work per call).

Why: large BCG gradient calls (2048 pogo states x B = 30 branches and more) hang on CPU with the
process asleep. The cause is a deadlock in jaxlib's CPU LAPACK kernels (seen on jaxlib 0.10.1
and 0.10.2): a batched ``lapack_*_ffi`` call (Cholesky, LU, triangular solve) whose operand has
at least :data:`LAPACK_PARALLEL_ELEMENTS` (200000) elements splits its batch into tasks on XLA's
intra-op thread pool and blocks until they finish (``jax::ParallelBatchMap``). When the runtime
runs as many such calls at once as the pool has threads, every pool thread waits and nothing
runs the tasks (stacks: ``tsl::BlockUntilReady`` on the main thread, pool threads in
``lapack_dtrsm_ffi`` -> ``ParallelBatchMap`` -> ``BlockingCounter::Wait``; the threshold is
the constant in jaxlib 0.10.1's kernels). On the pogo (nv = 2) the constraint solver
factorises one 2 x 2 matrix per branch rollout and step (``lapack_dpotrf_ffi`` /
``lapack_dtrsm_ffi`` on (states, B, 2, 2)), so a call reaches the threshold at 50000 branch
rollouts: 2048 x 30 and 1024 x 80 hung, 1024 x 40 and 1024 x 20 ran.

The reports therefore compute their per-sample gradients in chunks of at most ``chunk_size``
samples. The default keeps samples x rollouts per sample at or below
:data:`MAX_ROLLOUTS_PER_CALL` (memory) and, read off the lowered program
(:func:`lapack_safe_chunk`), every LAPACK call below the parallel threshold, so it runs on the
calling thread and this deadlock cannot occur.

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
import re
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.extend.random import define_prng_impl, threefry2x32_p, threefry_prng_impl

from bcg import estimators as E
from bcg.validation import check_int

# samples x rollouts per sample of one compiled call (memory bound)
MAX_ROLLOUTS_PER_CALL = 32768
# jaxlib's CPU LAPACK kernels split a batched call over the intra-op pool (and block on it) from
# this many elements of the operand on (batch x rows x cols; the constant in jaxlib 0.10.x)
LAPACK_PARALLEL_ELEMENTS = 200_000

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
    est = E.unwrap(est)  # a wrapper of the backward pass costs no rollouts
    if isinstance(est, E.BCG):
        return est.num_branches + 1
    transform = est.transform if isinstance(est, E.ObjectiveLevel | E.PlainStep) else None
    return max(1, int(getattr(transform, "num_samples", 1) or 1))


def chunk_size_for(est, chunk_size: int | None = None) -> int:
    """``chunk_size`` if given, else the largest power of two of samples whose rollouts
    (:func:`rollouts_per_sample`) stay within :data:`MAX_ROLLOUTS_PER_CALL`."""
    if chunk_size is not None:
        return check_int("chunk_size", chunk_size, 1)
    return _pow2_floor(MAX_ROLLOUTS_PER_CALL // rollouts_per_sample(est))


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


_TENSOR = re.compile(r"tensor<((?:\d+x)+)[a-z]+\d+>")


def lapack_elements(hlo_text: str) -> int:
    """Largest operand or result (elements) of any ``lapack_*`` custom call in a lowered
    program's text (0 if there is none)."""
    most = 0
    for line in hlo_text.splitlines():
        if "@lapack_" in line or 'call_target_name = "lapack_' in line:
            for dims in _TENSOR.findall(line):
                most = max(most, math.prod(int(d) for d in dims.rstrip("x").split("x")))
    return most


def lapack_safe_chunk(lower_text: Callable[[int], str], n: int, chunk: int) -> int:
    """The largest chunk size <= ``chunk`` (a power of two when reduced) at which every LAPACK
    call of the program stays below :data:`LAPACK_PARALLEL_ELEMENTS`, so that jaxlib runs it on
    the calling thread. ``lower_text(m)``: the lowered program's text for m samples (lower the
    jitted function itself: its trace is reused by the call that follows). LAPACK batches grow
    linearly with the samples, so one probe usually suffices."""
    chunk = max(1, min(chunk, n))
    while True:
        m = chunk_bounds(n, chunk)[0]
        m = m[1] - m[0]
        most = lapack_elements(lower_text(m))
        if most < LAPACK_PARALLEL_ELEMENTS or m == 1:
            return chunk
        per_sample = -(-most // m)
        chunk = min(m - 1, _pow2_floor((LAPACK_PARALLEL_ELEMENTS - 1) // per_sample))


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
