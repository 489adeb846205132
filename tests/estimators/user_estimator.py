"""A step estimator as a user writes one outside the library (the contract of
:mod:`bcg.estimators.protocol`): the analytic step whose backward pass clips every
environment's state cotangent to a norm of at most ``max_norm`` (a gradient-clipping baseline)."""

import dataclasses

import jax
import jax.numpy as jnp

from bcg.estimators import PlainStep


def _clip_rows(max_norm):
    @jax.custom_vjp
    def f(x):
        return x

    def bwd(_, g):
        n = jnp.linalg.norm(g, axis=-1, keepdims=True)
        return (g * jnp.minimum(1.0, max_norm / jnp.maximum(n, 1e-30)),)

    f.defvjp(lambda x: (x, None), bwd)
    return f


@dataclasses.dataclass(frozen=True)
class ClippedStep:
    max_norm: float = 10.0
    name: str = "clipped"

    def init(self, sim, data):
        return data

    def state(self, carry):
        return carry

    def step(self, sim, data, ctrl, key):
        nxt, stats = PlainStep().step(sim, data, ctrl, key)
        clip = _clip_rows(self.max_norm)
        return nxt.replace(qpos=clip(nxt.qpos), qvel=clip(nxt.qvel)), stats


def make_clipped(max_norm: float = 10.0) -> ClippedStep:
    return ClippedStep(max_norm=float(max_norm))
