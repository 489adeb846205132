"""Actor and critic networks (flax linen), the SHAC/paper architecture.

Both are MLPs whose hidden layers are ``Dense -> LayerNorm -> ELU``.

Actor (Gaussian, squashed): for observation o,

    mu = MLP(o),   log_std = a learned vector (state independent, starts at ``init_log_std``)
    a  = tanh(mu + exp(log_std) * eps),   eps ~ N(0, I)      (stochastic, reparameterised)
    a  = tanh(mu)                                              (deterministic policy)

so the mean action tanh(mu) and every sample lie in (-1, 1) (SHAC squashes the sample the same
way). Paper: actor [512, 256, 128], log_std starting at log(1.0) = 0.

Critic: V(o) = MLP(o) (scalar). SHAC uses an ensemble of critics; :func:`init_critics` stacks
the parameters of K independently initialised critics along a leading axis and
:func:`critic_values` evaluates all of them (``jax.vmap`` over the ensemble). Paper: [256, 256],
K = 3.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


class MLP(nn.Module):
    hidden: Sequence[int]
    out: int

    @nn.compact
    def __call__(self, x):
        for h in self.hidden:
            x = nn.elu(nn.LayerNorm()(nn.Dense(h)(x)))
        return nn.Dense(self.out)(x)


class Actor(nn.Module):
    """Returns ``(mu, log_std)``: pre-squash mean (..., A) and the log-std vector (A,)."""

    action_size: int
    hidden: Sequence[int] = (512, 256, 128)
    init_log_std: float = 0.0

    @nn.compact
    def __call__(self, obs):
        mu = MLP(self.hidden, self.action_size)(obs)
        log_std = self.param(
            "log_std", nn.initializers.constant(self.init_log_std), (self.action_size,)
        )
        return mu, log_std


class Critic(nn.Module):
    hidden: Sequence[int] = (256, 256)

    @nn.compact
    def __call__(self, obs):
        return MLP(self.hidden, 1)(obs)[..., 0]


def sample_action(actor: Actor, params, obs, key):
    """a = tanh(mu + std * eps), differentiable in params and obs (eps is constant)."""
    mu, log_std = actor.apply(params, obs)
    eps = jax.random.normal(key, mu.shape, mu.dtype)
    return jnp.tanh(mu + jnp.exp(log_std) * eps)


def mean_action(actor: Actor, params, obs):
    """The deterministic policy a = tanh(mu)."""
    return jnp.tanh(actor.apply(params, obs)[0])


def init_critics(critic: Critic, key, obs_size: int, num: int):
    """Parameters of ``num`` critics stacked along a leading ensemble axis."""
    dummy = jnp.zeros((1, obs_size), jnp.float32)
    return jax.vmap(lambda k: critic.init(k, dummy))(jax.random.split(key, num))


def critic_values(critic: Critic, params, obs):
    """Values of every ensemble member: (K, ...) for observations (..., obs_size)."""
    return jax.vmap(lambda p: critic.apply(p, obs))(params)
