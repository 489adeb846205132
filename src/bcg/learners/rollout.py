"""Differentiable batched policy rollout through a step estimator, with resets.

For a batch of E environments and ``horizon`` control steps t = 0..h-1:

    o_t = observe(x_t),   a_t = policy(params, o_t, t, key_t)
    x'_{t+1} = Estimator.step(x_t, ctrl(a_t))                  (batch level: BCG compacts)
    r_t = reward(x_t, a_t, x'_{t+1}),   term_t = terminated(x'_{t+1})
    trunc_t = (episode step + 1 == episode_length) and not term_t,   done_t = term_t or trunc_t
    x_{t+1} = stop_gradient(fresh reset state) if done_t else x'_{t+1}

``next_obs_t = observe(x'_{t+1})`` is the observation *before* the reset, so a learner can
bootstrap from it on truncation (and must not on termination). The reset replaces the whole
estimator carry (``jnp.where`` per environment over the carry pytree; this also clears BCG's
bundle state) by ``Estimator.init`` of fresh, stop-gradient data: the derivative of everything
after a reset with respect to anything before it is exactly zero. A state that is not finite
(the simulation diverged) is treated as terminated and counted.

Learned reward (``reward_params`` not None; the env's ``reward_model``, e.g. the ADD
discriminator of :mod:`bcg.envs.g1.add`): ``r_t = reward(x_t, a_t, x'_{t+1}, reward_params)``
and the trajectory also holds ``reward_inputs_t = stop_gradient(reward_model_input(x'_{t+1}))``,
the samples the learner trains the reward model on. Without it nothing changes.

Diverged environments: a rollout is differentiated for the whole batch at once, and one
environment whose state became non-finite would make the whole gradient NaN (its zero loss
weight times an infinite Jacobian). The learners drop every environment that diverged in the
window from their losses (:func:`window_keep`, :func:`masked_env_sum`), and the carry and the
action of every step pass through :func:`zero_nonfinite_cotangents` (identity forward; in the
backward pass an environment whose cotangent has a non-finite entry gets a zero cotangent,
and the gradient with respect to ``probe`` (E,) counts these per environment). The update is
then exactly that of the other environments. A learner checks with the probe that only
dropped environments were zeroed; otherwise the gradient is not trustworthy and it skips the
update.

Every step is wrapped in ``jax.checkpoint`` (rematerialised in the backward pass), so the
memory of the backward pass is that of the scan carry and outputs, not of the physics.

With a ``mesh`` (:mod:`bcg.learners.parallel`) the environment axis of the state and of every
step's outputs is constrained to be sharded over the mesh's ``"envs"`` axis (GSPMD: the same
global computation, E / D environments per device).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bcg.envs.base import ContactEnv
from bcg.estimators.stats import StepStats
from bcg.learners.parallel import constrain_envs


class EnvState(NamedTuple):
    """The batch of environments between rollouts (leading axis E everywhere)."""

    carry: object  # estimator carry (mjx.Data for PlainStep, BundleCarry for BCG)
    step: jax.Array  # int32 control steps into the current episode
    episode_return: jax.Array  # undiscounted return of the current episode so far
    last_return: jax.Array  # return of the last finished episode (nan before the first)
    last_length: jax.Array  # length of the last finished episode (nan before the first)


class Trajectory(NamedTuple):
    """Outputs of a rollout (leading axes (h, E))."""

    obs: jax.Array  # o_t (raw)
    actions: jax.Array
    rewards: jax.Array  # r_t (raw, differentiable)
    next_obs: jax.Array  # observe(x'_{t+1}) before any reset (differentiable)
    terminated: jax.Array
    truncated: jax.Array
    diverged: jax.Array  # non-finite states (counted as terminated)
    stats: StepStats  # per step (h,): triggered / bundled / overflow env counts
    reward_inputs: object = None  # (h, E, n) learned-reward samples, or None (module docstring)


@jax.custom_vjp
def zero_nonfinite_cotangents(tree, probe):
    """Identity on a pytree of per-environment arrays (leading axis E); ``probe`` (E,) is a
    zero input that only reports. Backward: the cotangent of environment e is set to zero in
    every leaf when any of its entries, in any leaf, is non-finite (NaN or Inf), and the
    cotangent of ``probe[e]`` is 1 for such an environment (0 otherwise), so that the gradient
    with respect to ``probe`` counts, per environment, the cotangents that were zeroed."""
    return tree


def _zn_fwd(tree, probe):
    return tree, None


def _zn_bwd(_, ct):
    leaves = [x for x in jax.tree_util.tree_leaves(ct) if jnp.issubdtype(x.dtype, jnp.inexact)]
    E = leaves[0].shape[0]
    bad = jnp.zeros((E,), bool)
    for x in leaves:
        bad |= ~jnp.all(jnp.isfinite(x.reshape(E, -1)), axis=-1)

    def clean(x):
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            return x  # integer / float0 cotangents
        return jnp.where(bad.reshape((E,) + (1,) * (x.ndim - 1)), jnp.zeros_like(x), x)

    return jax.tree_util.tree_map(clean, ct), bad.astype(jnp.float32)


zero_nonfinite_cotangents.defvjp(_zn_fwd, _zn_bwd)


def window_keep(diverged) -> jax.Array:
    """(E,) bool: environments with no diverged step in the window ``diverged`` (h, E)."""
    return ~jnp.any(diverged, axis=0)


def masked_env_sum(per_env, keep) -> jax.Array:
    """sum_e keep_e x_e * E / max(sum_e keep_e, 1): the sum over the kept environments,
    rescaled to the whole batch, so that a loss normalised by E stays the mean over the
    environments that count. A dropped environment's term is selected away (``jnp.where``),
    never multiplied by zero, so a non-finite term cannot leak into the gradient."""
    keep = jax.lax.stop_gradient(keep)
    E = per_env.shape[0]
    n = jnp.maximum(jnp.sum(keep.astype(per_env.dtype)), 1.0)
    return jnp.sum(jnp.where(keep, per_env, 0.0)) * (E / n)


def _where(mask, a, b):
    """Per-environment select over matching pytrees (mask (E,))."""

    def sel(x, y):
        return jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, y)

    return jax.tree_util.tree_map(sel, a, b)


def fresh_carry(env: ContactEnv, estimator, key, num_envs: int):
    """Estimator carry of ``num_envs`` freshly reset environments (no gradient)."""
    data = jax.vmap(env.initial_data)(jax.random.split(key, num_envs))
    return estimator.init(env.sim, jax.lax.stop_gradient(data))


def reset(env: ContactEnv, estimator, key, num_envs: int) -> EnvState:
    carry = fresh_carry(env, estimator, key, num_envs)
    nan = jnp.full((num_envs,), jnp.nan, jnp.float32)
    zeros = jnp.zeros((num_envs,), jnp.float32)
    return EnvState(carry, jnp.zeros((num_envs,), jnp.int32), zeros, nan, nan)


def rollout(
    env: ContactEnv,
    estimator,
    policy,
    params,
    state: EnvState,
    key,
    horizon: int,
    *,
    checkpoint=True,
    mesh=None,
    reward_params=None,
    probe=None,
) -> tuple[EnvState, Trajectory]:
    """Roll the batch ``horizon`` steps under ``policy(params, obs (E, n), t, key) -> (E, A)``.

    Differentiable in ``params`` (and in the initial carry) through the estimator's steps.
    ``checkpoint``: True recomputes each step in the backward pass (module docstring); False
    stores every step's residuals; a ``jax.checkpoint_policies`` policy stores what it saves.
    ``mesh``: shard the environment axis over its ``"envs"`` axis (None: no constraint).
    ``reward_params``: parameters of a learned reward (module docstring), shared by all
    environments; None for a fixed reward.
    ``probe``: (E,) zeros whose gradient counts the zeroed cotangents of every environment
    (module docstring); None: a constant (nothing reported).
    """
    sim = env.sim
    E = state.step.shape[0]
    observe = jax.vmap(env.observe)
    if probe is None:
        probe = jnp.zeros((E,), jnp.float32)

    def body(s: EnvState, xs):
        t, k = xs
        k_act, k_step, k_reset = jax.random.split(k, 3)
        carry0 = zero_nonfinite_cotangents(s.carry, probe)
        data = estimator.state(carry0)
        obs = observe(data)
        a = zero_nonfinite_cotangents(policy(params, obs, t, k_act), probe)
        carry, stats = estimator.step(sim, carry0, jax.vmap(env.action_to_ctrl)(a, data), k_step)
        nxt = estimator.state(carry)
        if reward_params is None:
            r, r_in = jax.vmap(env.reward)(data, a, nxt), None
        else:
            r = jax.vmap(env.reward, (0, 0, 0, None))(data, a, nxt, reward_params)
            r_in = jax.lax.stop_gradient(jax.vmap(env.reward_model_input)(nxt))
        next_obs = observe(nxt)
        finite = jnp.isfinite(nxt.qpos).all(-1) & jnp.isfinite(nxt.qvel).all(-1)
        finite &= jnp.isfinite(r) & jnp.isfinite(next_obs).all(-1)
        r = jnp.where(finite, r, 0.0)  # the learners drop this environment from the window
        next_obs = jnp.where(finite[:, None], next_obs, 0.0)
        term = jax.vmap(env.terminated)(nxt) | ~finite
        step = s.step + 1
        trunc = (step >= env.episode_length) & ~term
        done = term | trunc
        ep_ret = s.episode_return + jax.lax.stop_gradient(r).astype(jnp.float32)
        fresh = fresh_carry(env, estimator, k_reset, E)
        new = EnvState(
            carry=_where(done, fresh, carry),
            step=jnp.where(done, 0, step),
            episode_return=jnp.where(done, 0.0, ep_ret),
            last_return=jnp.where(done, ep_ret, s.last_return),
            last_length=jnp.where(done, step.astype(jnp.float32), s.last_length),
        )
        out = Trajectory(obs, a, r, next_obs, term, trunc, ~finite, stats, r_in)
        return constrain_envs(new, mesh), constrain_envs(out, mesh)

    if callable(checkpoint):  # a jax.checkpoint_policies policy: what the backward pass keeps
        body = jax.checkpoint(body, policy=checkpoint)
    elif checkpoint:
        body = jax.checkpoint(body)
    xs = (jnp.arange(horizon), jax.random.split(key, horizon))
    return jax.lax.scan(body, constrain_envs(state, mesh), xs)
