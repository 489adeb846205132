"""Aggregation of a bundle's branches into the state the rollout continues from.

First order (the paper): the bundle state is the branch mean, positions and velocities
arithmetic, quaternion blocks by the hemisphere-aligned chordal mean
(:func:`bcg.sim.step.mean_data`), and autodiff through it gives
    Z_bar_{t+1} = (1/B) sum_i (F_x Z_t^(i) + F_a U_t).

Stein (ours, ``gradient="stein"``). When a stiff contact resolves within one physics step, every
branch sees the same large slope and the jumps between branches are never differentiated, so
the mean of slopes is not the slope of the smoothed dynamics. Inside the perturbed subspace
range(M), M = J^T (J J^T + lambda I)^-1 (:mod:`bcg.estimators.offsets`), the sensitivity to the
start state is replaced by the Stein (zeroth-order) estimate from the branches themselves,
    d y_bar / d s  ~  (1/B) sum_i (y^(i) - y_bar) [dp_i / sigma_p^2, dv_i / sigma_v^2]^T,
with s = (M^+ dq_t, M^+ dqd_t) the Cartesian coordinates of the start state; the complement
(I - M M^+) and the shared actions keep the first-order path. Forward values are unchanged.

Clipped branch sensitivities (ours, ``branch_clip=c``). A branch that starts deeper in a stiff
floor has a much larger Jacobian than its siblings, so the mean of B branch Jacobians is
heavy-tailed (more branches can give *more* variance). On the backward pass each branch's
cotangent g_i at the bundle's start (its start state; separately, its copy of the shared
action) is scaled to at most c times the median norm over the B branches,
    g_i <- g_i min(1, c median_j |g_j| / |g_i|),
a per-bundle gradient clip (biased where it acts; exact when no branch exceeds the bound).

Plain forward (ours, ``forward="plain"``). The rollout's values stay those of the plain step
x_{t+1} = F(x_t, a_t) (the analytic rollout, bit for bit), and only the derivative is the
bundle's:
    x_{t+1} = sg(x_plain) (+) [x_bar (-) sg(x_bar)],
where (+), (-) act on the tangent space (quaternion blocks through their body-frame rotation
vector), so the forward value is x_plain and d x_{t+1} = d x_bar. This is the straight-through
form of the global-bundle estimator (:mod:`bcg.estimators.smoothing`) applied to H control
steps: the smoothed Jacobian (1/B) sum_i dF(x + dx_i) at the states the plain rollout visits,
so a bundle mean that is not itself a reachable state (branches that bounced averaged with
branches that did not) never becomes the state the rollout continues from.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bcg.estimators.cotangent_clip import clip_rows
from bcg.sim.model import Sim
from bcg.sim.step import differentiate_qpos, integrate_qpos, integrate_qpos_linear, mean_data

__all__ = [
    "branch_mean",
    "clip_branch_cotangents",
    "plain_forward",
    "stein_attach",
    "stein_detach",
]


def stein_detach(sim: Sim, q0, v0, offs, sigma_p, sigma_v, stein_velocity):
    """Start state whose derivative inside range(M) is removed (it returns through
    :func:`stein_attach`), the anchor s (value 0, derivative M^+ d(q, v)) and the scaled noise
    [dp / sigma_p^2, dv / sigma_v^2] (B, 2r)."""
    sg = jax.lax.stop_gradient
    Mp = sg(jnp.linalg.pinv(offs.M))  # (r, nv)
    P = offs.M @ Mp
    dq_tan = differentiate_qpos(sim, sg(q0), q0)  # value 0, derivative: the tangent map
    dv_tan = v0 - sg(v0)
    q0 = integrate_qpos_linear(sim, sg(q0), dq_tan - P @ dq_tan)
    inv_p = 1.0 / sigma_p**2 if sigma_p > 0 else 0.0
    inv_v = 1.0 / sigma_v**2 if sigma_v > 0 else 0.0
    if stein_velocity:
        v0 = sg(v0) + dv_tan - P @ dv_tan
    else:  # velocities keep the first-order path
        dv_tan, inv_v = jnp.zeros_like(dv_tan), 0.0
    anchor = jnp.concatenate([Mp @ dq_tan, Mp @ dv_tan])
    noise = jnp.concatenate([offs.dp * inv_p, offs.dv * inv_v], -1)
    return q0, v0, anchor, noise


def stein_attach(sim: Sim, mean, stepped, anchor, noise):
    """``mean`` (an ``mjx.Data``) with the Stein sensitivity A s added (value unchanged):
    A = (1/B) sum_i (y_i - y_bar) noise_i^T for positions (tangent differences) and velocities."""
    sg = jax.lax.stop_gradient
    B = noise.shape[0]
    dy_q = jax.vmap(lambda q: differentiate_qpos(sim, sg(mean.qpos), q))(sg(stepped.qpos))
    dy_v = sg(stepped.qvel - mean.qvel[None])
    A_q = dy_q.T @ noise / B  # (nv, 2r): d q_bar / d s
    A_v = dy_v.T @ noise / B
    return mean.replace(
        qpos=integrate_qpos_linear(sim, mean.qpos, A_q @ anchor),
        qvel=mean.qvel + A_v @ anchor,
    )


def branch_mean(sim: Sim, stepped):
    """The bundle state: :func:`bcg.sim.step.mean_data` over the leading branch axis."""
    return mean_data(sim, stepped)


def blend_states(sim: Sim, plain, mean, w):
    """The state between one environment's plain step and its bundle mean (state tuples with
    fields qpos, qvel, act, qacc_warmstart; same type returned):

        q = q_plain (+) w (q_bar (-) q_plain),   y = y_plain + w (y_bar - y_plain)

    for the other fields; exactly ``mean`` at w = 1 and ``plain`` at w = 0."""
    dq = differentiate_qpos(sim, plain.qpos, mean.qpos)
    qpos = jnp.where(w >= 1, mean.qpos, integrate_qpos(sim, plain.qpos, w * dq))
    rest = {
        f: getattr(plain, f) + w * (getattr(mean, f) - getattr(plain, f))
        for f in ("qvel", "act", "qacc_warmstart")
    }
    return type(mean)(qpos=qpos, **rest)


def plain_forward(sim: Sim, plain, mean):
    """State tuple (fields qpos, qvel, act, qacc_warmstart; same type returned) whose value is
    ``plain``'s and whose derivative is ``mean``'s:

        q = sg(q_plain) + [(sg(q_plain) (+) (q_bar (-) sg(q_bar))) - sg(...)],
        y = sg(y_plain) + y_bar - sg(y_bar)

    for the other fields; ``(-)`` is :func:`differentiate_qpos` (value 0 here) and ``(+)``
    :func:`integrate_qpos_linear`, so quaternion derivatives are carried as rotation vectors
    from the mean's frame to the plain state's. Each bracket is exactly zero in value."""
    sg = jax.lax.stop_gradient
    tangent = differentiate_qpos(sim, sg(mean.qpos), mean.qpos)  # value 0
    moved = integrate_qpos_linear(sim, sg(plain.qpos), tangent)
    qpos = sg(plain.qpos) + (moved - sg(moved))
    rest = {
        f: sg(getattr(plain, f)) + (getattr(mean, f) - sg(getattr(mean, f)))
        for f in ("qvel", "act", "qacc_warmstart")
    }
    return type(mean)(qpos=qpos, **rest)


def clip_branch_cotangents(tree, factor: float):
    """Identity on ``tree`` (arrays with a leading branch axis B); on the backward pass each
    branch's cotangent (all leaves of its row together) is scaled to a norm of at most
    ``factor`` times the median branch norm (:func:`bcg.estimators.cotangent_clip.clip_rows`)."""
    return clip_rows(tree, factor)
