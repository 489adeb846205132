"""Bundle slots and phases: branch physics only where a batch needs it, one compiled instance.

Under ``vmap`` a per-environment ``cond`` evaluates both branches for every environment, so a
naive bundle costs E x (1 + B) physics steps per control step. Instead:

* Slots. The environments that need a bundle are compacted into C slots, highest priority
  first (continuing bundles before new ones); environments that do not fit overflow (they keep
  the plain step) and are counted.
* Phases. The physics of a control step runs as a ``scan`` over 1 + P phases of E states each
  (E = the batch): phase 0 steps the E environments (the plain step, whose contact forces
  decide which environments bundle), phases 1..P step the C x B branch states built from it,
  P = ceil(C B / E). A phase whose states are all unused (beyond n B, n = bundling
  environments) is skipped by a ``cond``, forward and backward, so a control step costs
  (1 + ceil(n B / E)) plain steps and a step without bundles costs one. The simulator step
  appears once in the compiled program, whatever C is.
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


def phase_count(slots: int, num_branches: int, batch: int) -> int:
    """P = ceil(C B / E): branch phases of E states that hold C slots of B branches."""
    return math.ceil(slots * num_branches / batch)


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
):
    """Phase 0: ``physics(first)``; phases 1..P: ``physics`` on the states ``build`` makes from
    phase 0's output, E at a time, skipping the phases past the used states.

    Args:
      physics: batched step, ``physics(inputs) -> outputs``, E states in, E out.
      first: phase-0 inputs (leading axis E).
      build: ``build(first_outputs) -> (inputs (leading M <= P E), used states n, aux)``;
        the inputs beyond ``n`` must be valid states too (they may be stepped, unused);
        ``aux``: arrays of numeric dtypes (no PRNG keys).
      num_phases: P.
      skip: ``skip(inputs) -> outputs`` of a skipped phase (never used; e.g. the unstepped
        states), shaped like ``physics``'s.
      remat: recompute ``physics`` on the backward pass instead of storing its residuals.

    Returns:
      (phase-0 outputs, outputs of the built inputs (leading M), aux).
    """
    tmap = jax.tree_util.tree_map
    E = _leading(first)
    P = num_phases
    step = jax.checkpoint(physics) if remat else physics
    built_shape, _, aux_shape = jax.eval_shape(build, jax.eval_shape(physics, first))
    M = _leading(built_shape)
    if M > P * E:
        raise ValueError(f"build made {M} states, more than {P} phases of {E} hold")

    def blocks(x):  # (M, ...) -> (P, E, ...), padded with copies of valid states
        return jnp.take(x, jnp.arange(P * E) % M, axis=0).reshape((P, E) + x.shape[1:])

    carry0 = (
        tmap(lambda s: jnp.zeros((P, E) + s.shape[1:], s.dtype), built_shape),
        jnp.zeros((), jnp.int32),
        tmap(lambda s: jnp.zeros(s.shape, s.dtype), aux_shape),
    )

    def make(y):
        inputs, n, aux = build(y)
        return tmap(blocks, inputs), jnp.asarray(n, jnp.int32), aux

    def body(carry, p):
        stack, used, _ = carry
        x = tmap(lambda f, s: jnp.where(p == 0, f, s[jnp.maximum(p - 1, 0)]), first, stack)
        active = (p == 0) | ((p - 1) * E < used)
        y = jax.lax.cond(active, step, skip, x)
        carry = jax.lax.cond(p == 0, make, lambda _: carry, y)
        return carry, y

    (_, _, aux), ys = jax.lax.scan(body, carry0, jnp.arange(P + 1))
    first_out = tmap(lambda a: a[0], ys)
    built_out = tmap(lambda a: a[1:].reshape((P * E,) + a.shape[2:])[:M], ys)
    return first_out, built_out, aux
