"""Bundle slots: run a per-environment bundle function only where a batch needs it.

Under ``vmap`` a per-environment ``cond`` evaluates both branches for every environment, so a
naive bundle costs E x (1 + B) branch steps per control step. Here the environments that need a
bundle are compacted into a fixed buffer of C slots (highest priority first: continuing bundles
before new ones), so a step costs E plain steps + C x B branch steps. Environments that do not
fit overflow (they keep the fallback, the plain step) and are counted. A step where no
environment needs a bundle skips the bundle computation altogether (``lax.switch`` on the batch,
forward and backward). With buckets, the slot counts C, C/2, ..., C/2^(k-1) are all compiled and
a step runs the smallest that holds its n bundling environments.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp


def slot_count(capacity: int | float | None, batch: int) -> int:
    """Slots for a batch: all of it (None), ``ceil(capacity * batch)`` for a fraction, or
    ``capacity`` slots (at most the batch)."""
    if capacity is None:
        return batch
    if isinstance(capacity, float):
        return max(1, min(batch, math.ceil(capacity * batch)))
    return min(batch, int(capacity))


def bucket_sizes(capacity, buckets: int, batch: int) -> tuple[int, ...]:
    """Compiled slot counts, increasing, the last one ``slot_count(capacity, batch)``."""
    C = slot_count(capacity, batch)
    return tuple(sorted({max(1, math.ceil(C / 2**k)) for k in range(buckets)}))


def _take(tree, idx):
    return jax.tree_util.tree_map(lambda x: x[idx], tree)


def bundled_map(
    fn: Callable, args, fallback, priority: jax.Array, sizes: tuple[int, ...], *, remat=False
):
    """``fn`` mapped over the environments with ``priority > 0``, the others keeping ``fallback``.

    Args:
      fn: per-environment function of ``args`` (a pytree, leading axis E everywhere) returning a
        pytree shaped like one environment of ``fallback``.
      fallback: batched pytree (leading axis E): the output of environments not computed.
      priority: (E,) int; > 0 needs the function, higher values take slots first.
      sizes: increasing slot counts (:func:`bucket_sizes`); ``sizes[-1] >= E`` means no
        compaction (every environment computes ``fn``, the naive path).
      remat: recompute ``fn`` on the backward pass instead of storing its residuals (a
        reverse-mode ``lax.switch`` stores the residuals of every path, taken or not).

    Returns:
      (output pytree, selected (E,) bool, overflow int32 scalar).
    """
    E = priority.shape[0]
    need = priority > 0

    def skip(_):
        return fallback, jnp.zeros((E,), bool)

    def naive(_):
        return jax.vmap(fn)(args), need

    def compacted(C, _):
        idx = jnp.argsort(-priority, stable=True)[:C]
        part = jax.vmap(fn)(_take(args, idx))
        out = jax.tree_util.tree_map(lambda full, p: full.at[idx].set(p), fallback, part)
        return out, jnp.zeros((E,), bool).at[idx].set(need[idx])

    if sizes[-1] >= E:
        paths, sizes = [naive], (E,)
    else:
        paths = [functools.partial(compacted, c) for c in sizes]
    if remat:
        paths = [jax.checkpoint(p) for p in paths]
    n_need = jnp.sum(need)
    index = jnp.where(
        n_need > 0, 1 + jnp.minimum(jnp.searchsorted(jnp.asarray(sizes), n_need), len(sizes) - 1), 0
    )
    out, selected = jax.lax.switch(index, [skip, *paths], None)

    def choose(a, b):
        s = selected.reshape(selected.shape + (1,) * (a.ndim - 1))
        return jnp.where(s, a, b)

    out = jax.tree_util.tree_map(choose, out, fallback)
    overflow = (n_need - jnp.sum(selected)).astype(jnp.int32)
    return out, selected, overflow
