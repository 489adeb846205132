"""Bundle slots and phases: branch physics only where a batch needs it, one compiled instance.

Under ``vmap`` a per-environment ``cond`` evaluates both branches for every environment, so a
naive bundle costs E x (1 + B) physics steps per control step. Instead:

* Slots. The environments that need a bundle are compacted into C slots, highest priority
  first (continuing bundles before new ones); environments that do not fit overflow (they keep
  the plain step) and are counted.
* Phases. The physics of a control step runs as a ``scan`` over k + P phases of
  S = ceil(E / k) states each (E = the batch, k = the split, 1 by default): phases 0..k-1 step
  the E environments (the plain step, whose contact forces decide which environments bundle),
  the next P = ceil(C B / S) step the C x B branch states built from it. A phase whose states
  are all unused (beyond n B, n = bundling environments) is skipped by a ``cond``, forward and
  backward, so a control step costs (k + ceil(n B / S)) S states and a step without bundles
  costs one plain step. With k = 1, n B = 80 and E = 64 that is 3 plain steps; with k = 2,
  2.5. The simulator step appears once in the compiled program, whatever C and k are.
"""

from __future__ import annotations

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


def phase_count(slots: int, num_branches: int, phase_states: int) -> int:
    """P = ceil(C B / S): branch phases of S states that hold C slots of B branches."""
    return math.ceil(slots * num_branches / phase_states)


def phase_states(batch: int, split: int) -> int:
    """S = ceil(E / split): the states one phase steps when the batch is stepped in ``split``
    phases."""
    if isinstance(split, bool) or not isinstance(split, int) or split < 1:
        raise ValueError(f"phase_split must be an int >= 1, got {split!r}")
    return math.ceil(batch / split)


def select_slots(priority: jax.Array, slots: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The ``slots`` environments of highest ``priority`` (> 0 needs a slot; ties keep the
    environment order): (indices (C,), whether each slot is needed (C,), overflow count).
    Needed slots come first."""
    idx = jnp.argsort(-priority, stable=True)[:slots]
    need = priority > 0
    used = need[idx]
    return idx, used, (jnp.sum(need) - jnp.sum(used)).astype(jnp.int32)


def _leading(tree) -> int:
    return jax.tree_util.tree_leaves(tree)[0].shape[0]


def phased(
    physics: Callable,
    first,
    build: Callable,
    num_phases: int,
    skip: Callable,
    *,
    remat: bool = False,
    split: int = 1,
):
    """The batch ``first`` in ``split`` phases of S = ceil(E / split) states, then ``physics``
    on the states ``build`` makes from the batch's outputs, S at a time, skipping the phases
    past the used states.

    Args:
      physics: batched step, ``physics(inputs) -> outputs``, S states in, S out.
      first: the batch's inputs (leading axis E).
      build: ``build(first_outputs) -> (inputs (leading M <= P S), used states n, aux)``;
        the inputs beyond ``n`` must be valid states too (they may be stepped, unused);
        ``aux``: arrays of numeric dtypes (no PRNG keys).
      num_phases: P, the branch phases.
      skip: ``skip(inputs) -> outputs`` of a skipped phase (never used; e.g. the unstepped
        states), shaped like ``physics``'s.
      remat: recompute ``physics`` on the backward pass instead of storing its residuals.
      split: phases the batch is stepped in (S = ceil(E / split); the last one padded with
        copies of the batch's first states). Smaller phases waste fewer unused branch states
        (a step costs (split + ceil(n / S)) S states instead of (1 + ceil(n / E)) E) at more
        phases of a smaller batch.

    Returns:
      (the batch's outputs (leading E), outputs of the built inputs (leading M), aux).
    """
    tmap = jax.tree_util.tree_map
    E = _leading(first)
    K = split
    S = phase_states(E, K)
    P = num_phases
    step = jax.checkpoint(physics) if remat else physics

    def blocks(x, n, rows):  # (n, ...) -> (rows, S, ...), padded with copies of valid states
        return jnp.take(x, jnp.arange(rows * S) % n, axis=0).reshape((rows, S) + x.shape[1:])

    def unblock(x, n):  # (rows, S, ...) -> (n, ...)
        return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])[:n]

    first_blocks = tmap(lambda x: blocks(x, E, K), first)
    out_shape = jax.eval_shape(physics, tmap(lambda x: x[0], first_blocks))
    first_out_shape = tmap(lambda s: jax.ShapeDtypeStruct((E,) + s.shape[1:], s.dtype), out_shape)
    built_shape, _, aux_shape = jax.eval_shape(build, first_out_shape)
    M = _leading(built_shape)
    if M > P * S:
        raise ValueError(f"build made {M} states, more than {P} phases of {S} hold")

    def zeros(shape, lead):
        return tmap(lambda s: jnp.zeros(lead + s.shape[1:], s.dtype), shape)

    carry0 = (
        zeros(built_shape, (P, S)),
        jnp.zeros((), jnp.int32),
        tmap(lambda s: jnp.zeros(s.shape, s.dtype), aux_shape),
        zeros(out_shape, (K, S)) if K > 1 else (),  # the batch's outputs, block by block
    )

    def make(done):
        inputs, n, aux = build(tmap(lambda x: unblock(x, E), done))
        return tmap(lambda x: blocks(x, M, P), inputs), jnp.asarray(n, jnp.int32), aux

    def body(carry, p):
        stack, used, aux, done = carry
        own = p < K
        x = tmap(
            lambda f, s: jnp.where(own, f[jnp.minimum(p, K - 1)], s[jnp.clip(p - K, 0, P - 1)]),
            first_blocks,
            stack,
        )
        active = own | ((p - K) * S < used)
        y = jax.lax.cond(active, step, skip, x)
        if K > 1:
            i = jnp.minimum(p, K - 1)
            done = tmap(lambda b, o: jnp.where(own, b.at[i].set(o), b), done, y)
        ready = done if K > 1 else tmap(lambda o: o[None], y)
        stack, used, aux = jax.lax.cond(p == K - 1, make, lambda _: (stack, used, aux), ready)
        return (stack, used, aux, done), y

    (_, _, aux, _), ys = jax.lax.scan(body, carry0, jnp.arange(K + P))
    first_out = tmap(lambda a: unblock(a[:K], E), ys)
    built_out = tmap(lambda a: unblock(a[K:], M), ys)
    return first_out, built_out, aux
