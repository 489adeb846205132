"""ADD: Adversarial Differential Discriminator reward (Zhang et al. 2025, "Physics-Based Motion
Imitation with Adversarial Differential Discriminators"), for a first-order learner (SHAC).

Differential vector. For a state x at clip frame k, with features f (the quantities the
tracking reward compares: root position, body positions relative to the root, body rotations
as 6-D, joint positions, root linear / angular velocity; :meth:`G1Tracking.add_features`):

    delta(x) = (f(x) - f(ref_k)) / s

with ``s`` per group the tracking reward's scale (sigma_pos, sigma_rot, sigma_joint,
sigma_lin_vel, sigma_ang_vel), so that every entry is O(1) at poor tracking.

Discriminator. D_phi(delta) is an MLP (ELU hidden layers, a scalar logit). The only positive
sample is delta = 0 (perfect tracking); the negatives are the policy's deltas delta_i (weights
w_i; 0 for diverged states). Losses (``loss=``), with a gradient penalty on the positive:

    logistic (the paper's):  L(phi) = softplus(-D(0)) + sum_i w_i softplus(D(delta_i)) / sum_i w_i
                                      + lambda_gp |grad_delta D(0)|^2
    lsgan:                   L(phi) = (D(0) - 1)^2 + sum_i w_i (D(delta_i) + 1)^2 / sum_i w_i
                                      + lambda_gp |grad_delta D(0)|^2

(``softplus(-D) = -log sigmoid(D)``, ``softplus(D) = -log(1 - sigmoid(D))``.) Reward (bounded):

    logistic:  r = -log(max(1 - sigmoid(D(delta)), 1e-4)) = min(softplus(D(delta)), log 1e4)
    lsgan:     r = max(0, 1 - 0.25 (D(delta) - 1)^2)

Update (:meth:`Discriminator.update`): ``steps`` full-batch Adam steps (lr 2.5e-4, the paper) on
the deltas of one rollout window, skipped when the loss or gradient is not finite.

First-order learning. The policy's reward is differentiable in the simulated state through
D_phi: the gradient flows through D into delta and the state, but phi is a constant of the
actor loss. SHAC carries the :class:`ADDState` in its learner state (so checkpoints hold phi and
its Adam moments), passes ``stop_gradient(phi)`` into the rollout, and updates phi once per
iteration after the actor and critic updates, from that iteration's window.

Enabling it: ``g1_jump(reward="add")`` (any of ``g1_tracking`` / ``g1_squat_jump`` /
``g1_hop``; ``discriminator=Discriminator(...)`` or a dict of its fields sets the network) with
the SHAC learner, or ``bcg train --task g1_jump --learner shac --param env.reward=add``
(``--param 'env.discriminator={"hidden": [64, 64]}'``). The G1 reward is then
``w_add r - w_action_rate (action rate)``. PPO and BPTT do not train a discriminator: they
refuse ``reward="add"`` with a ValueError. Evaluation (``bcg eval``, ``bcg transfer``) reports
the fixed tracking reward of the same env (the learned reward needs the learner's state).
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

LOSSES = ("logistic", "lsgan")
REWARD_CAP = math.log(1e4)  # logistic reward bound, log 1e4


def differential(features, reference, scale=1.0):
    """The ADD differential vector ``delta = (features - reference) / scale``."""
    return (features - reference) / scale


class ADDState(NamedTuple):
    """Discriminator parameters phi and their Adam state (part of the learner state)."""

    params: list
    opt: tuple


@dataclasses.dataclass(frozen=True)
class Discriminator:
    """The ADD discriminator (module docstring): network, loss, reward and update.

    ``n_features`` is the length of delta (set by the env, 0 until then).
    """

    hidden: tuple[int, ...] = (256, 256)
    lr: float = 2.5e-4
    loss: str = "logistic"
    grad_penalty: float = 5.0
    steps: int = 1
    n_features: int = 0

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        if self.loss not in LOSSES:
            raise ValueError(f"unknown ADD loss {self.loss!r}; choose from {', '.join(LOSSES)}")
        if not self.lr > 0 or self.grad_penalty < 0 or int(self.steps) < 1:
            raise ValueError(
                f"ADD discriminator needs lr > 0, grad_penalty >= 0 and steps >= 1, got lr "
                f"{self.lr}, grad_penalty {self.grad_penalty}, steps {self.steps}"
            )
        if any(h < 1 for h in self.hidden) or self.n_features < 0:
            raise ValueError(f"bad ADD sizes: hidden {self.hidden}, n_features {self.n_features}")

    @property
    def tx(self) -> optax.GradientTransformation:
        return optax.adam(self.lr)

    # ------------------------------------------------------------------ network

    def init_params(self, key, n_features: int | None = None) -> list:
        """MLP parameters [{w, b}, ...]: LeCun-normal weights, zero biases, float32."""
        n = int(n_features or self.n_features)
        if n < 1:
            raise ValueError("Discriminator.init_params needs n_features >= 1")
        sizes = (n, *self.hidden, 1)
        keys = jax.random.split(key, len(sizes) - 1)
        return [
            {
                "w": jax.random.normal(k, (a, b), jnp.float32) / jnp.sqrt(a),
                "b": jnp.zeros((b,), jnp.float32),
            }
            for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=True)
        ]

    def logits(self, params, delta):
        """D_phi(delta) for delta (..., n) -> (...)."""
        h = delta
        for layer in params[:-1]:
            h = jax.nn.elu(h @ layer["w"].astype(h.dtype) + layer["b"].astype(h.dtype))
        out = params[-1]
        return (h @ out["w"].astype(h.dtype) + out["b"].astype(h.dtype))[..., 0]

    # ------------------------------------------------------------------ loss, reward

    def loss_fn(self, params, negatives, weights=None):
        """``(L(phi), aux)`` of the module docstring on negatives (N, n) with weights (N,)."""
        negatives = jnp.asarray(negatives, jnp.float32)
        w = jnp.ones(negatives.shape[:1], jnp.float32) if weights is None else weights
        w = jnp.asarray(w, jnp.float32)
        zero = jnp.zeros(negatives.shape[-1:], jnp.float32)
        d_pos, g_pos = jax.value_and_grad(self.logits, argnums=1)(params, zero)
        d_neg = self.logits(params, negatives)
        wsum = jnp.maximum(jnp.sum(w), 1e-12)
        if self.loss == "logistic":
            l_pos = jax.nn.softplus(-d_pos)
            l_neg = jnp.sum(w * jax.nn.softplus(d_neg)) / wsum
        else:
            l_pos = (d_pos - 1.0) ** 2
            l_neg = jnp.sum(w * (d_neg + 1.0) ** 2) / wsum
        gp = jnp.sum(g_pos**2)
        loss = l_pos + l_neg + self.grad_penalty * gp
        aux = {
            "disc_logit_pos": d_pos,
            "disc_logit_neg": jnp.sum(w * d_neg) / wsum,
            "disc_grad_penalty": gp,
        }
        return loss, aux

    def reward(self, params, delta):
        """The bounded policy reward r(D_phi(delta)) of the module docstring, (...)."""
        d = self.logits(params, delta)
        if self.loss == "logistic":
            return jnp.minimum(jax.nn.softplus(d), REWARD_CAP)
        return jnp.maximum(0.0, 1.0 - 0.25 * (d - 1.0) ** 2)

    # ------------------------------------------------------------------ learner interface

    def init(self, key) -> ADDState:
        params = self.init_params(key)
        return ADDState(params, self.tx.init(params))

    def params(self, state: ADDState):
        """The reward parameters the env's ``reward(..., reward_params)`` takes: phi."""
        return state.params

    def update(self, state: ADDState, negatives, weights=None) -> tuple[ADDState, dict]:
        """``steps`` Adam steps on L(phi) over the window's deltas (N, n) (non-finite rows get
        weight 0; a step with a non-finite loss or gradient is skipped). Returns the new state
        and metrics (loss before the update, mean logits, gradient penalty)."""
        negatives = jnp.asarray(negatives, jnp.float32).reshape(-1, state.params[0]["w"].shape[0])
        w = jnp.ones(negatives.shape[:1], jnp.float32) if weights is None else weights
        w = jnp.asarray(w, jnp.float32).reshape(-1)
        ok_rows = jnp.all(jnp.isfinite(negatives), axis=-1)
        w = jnp.where(ok_rows, w, 0.0)
        negatives = jnp.where(ok_rows[:, None], negatives, 0.0)
        grad_fn = jax.value_and_grad(self.loss_fn, has_aux=True)
        tx = self.tx

        def step(s: ADDState, _):
            (loss, aux), g = grad_fn(s.params, negatives, w)
            ok = jnp.isfinite(loss) & jnp.all(
                jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(g)])
            )
            g = jax.tree_util.tree_map(lambda x: jnp.where(ok, x, 0.0), g)
            upd, opt = tx.update(g, s.opt, s.params)
            new = ADDState(optax.apply_updates(s.params, upd), opt)
            new = jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), new, s)
            return new, ({"disc_loss": loss, **aux}, ~ok)

        state, (aux, skipped) = jax.lax.scan(step, state, None, int(self.steps))
        metrics = {k: v[0] for k, v in aux.items()}
        metrics["disc_skipped"] = jnp.sum(skipped)
        return state, metrics
