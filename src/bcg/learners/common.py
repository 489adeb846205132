"""Pieces shared by the learners: the guarded optimiser step and the learning-rate schedule.

Optimiser (SHAC): global-norm clipping then Adam, with a learning rate that decays linearly
over the run,

    g <- g min(1, c / |g|),   u = Adam_{beta1, beta2}(g),   theta <- theta - lr_k u,
    lr_k = lr_0 + (lr_end - lr_0) k / K    (k = iteration, K = planned iterations).

NaN guard: when the raw gradient (or the loss) has a NaN or Inf entry, or its global norm
|g| is not finite (finite entries whose squares overflow), neither the parameters nor the
optimiser moments change and the step is counted as skipped: a non-finite gradient is never
applied, and an infinite norm never becomes clip's zero gradient and a momentum-only Adam step.
:func:`clean_actor_gradient` tells whether the cotangents zeroed in a rollout's backward pass
all belonged to environments dropped from the loss.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def make_optimizer(clip_norm: float, betas=(0.7, 0.95)) -> optax.GradientTransformation:
    """Clip by global norm, then Adam's scaling (the learning rate is applied separately)."""
    return optax.chain(optax.clip_by_global_norm(clip_norm), optax.scale_by_adam(*betas))


def linear_lr(lr0: float, lr_end: float, k, num: int):
    frac = jnp.clip(jnp.asarray(k, jnp.float32) / max(num, 1), 0.0, 1.0)
    return lr0 + (lr_end - lr0) * frac


def is_finite(tree) -> jax.Array:
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def guarded_step(
    tx: optax.GradientTransformation, params, opt_state, grads, lr, loss=0.0, valid=True
):
    """One optimiser step, or no change when ``grads`` / ``loss`` / the global norm of
    ``grads`` are not finite or ``valid`` (a learner's own check of the gradient) is False.

    Returns ``(params, opt_state, ok)``; ``ok`` is False for a skipped step.
    """
    ok = (
        is_finite(grads)
        & jnp.isfinite(optax.global_norm(grads))
        & jnp.all(jnp.isfinite(loss))
        & jnp.asarray(valid)
    )
    safe = jax.tree_util.tree_map(lambda g: jnp.where(ok, g, 0.0), grads)  # keep Adam finite
    updates, new_opt = tx.update(safe, opt_state, params)
    new_params = jax.tree_util.tree_map(lambda p, u: p - (lr * u).astype(p.dtype), params, updates)
    pick = lambda a, b: jax.tree_util.tree_map(lambda x, y: jnp.where(ok, x, y), a, b)  # noqa: E731
    return pick(new_params, params), pick(new_opt, opt_state), ok


def clean_actor_gradient(zeroed, keep) -> jax.Array:
    """True when no kept environment had a cotangent zeroed in the backward pass.

    ``zeroed`` (E,): the gradient with respect to the rollout's ``probe`` (counts of zeroed
    cotangents, :func:`bcg.learners.rollout.zero_nonfinite_cotangents`); ``keep`` (E,): the
    environments in the loss. A kept environment with a non-finite cotangent means a NaN/Inf
    gradient that no forward divergence explains: the update must be skipped."""
    return jnp.all((zeroed == 0) | ~keep)


def global_norm(tree) -> jax.Array:
    return optax.global_norm(tree)
