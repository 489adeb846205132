"""Batched differentiable rollouts with a pluggable step estimator (diffrax style: the
gradient method is an argument).

A *step estimator* has ``init(sim, data) -> carry``, ``step(sim, carry, ctrl, key) ->
(carry, StepStats)`` over a batch of environments, and ``state(carry) -> mjx.Data``.

* :class:`PlainStep` wraps the control step x' = F(x, u), optionally through a generic smoothing
  transform ``est(f, x, key)`` of :mod:`bcg.estimators.smoothing` (e.g. the global bundle of
  Suh et al. applied at every step). ``PlainStep()`` is the analytic gradient.
* :class:`bcg.estimators.bcg.BCG` bundles only at stiff contact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp

from bcg.estimators import backward_armature
from bcg.estimators.stats import StepStats
from bcg.estimators.trigger import Trigger, triggered
from bcg.sim.model import Sim
from bcg.sim.step import control_step, normalize_quaternions


@dataclasses.dataclass(frozen=True)
class PlainStep:
    """x_{t+1} = F(x_t, u_t) per environment, or est(F, (x_t, u_t), key) if a transform is given.

    The transform sees x = {qpos, qvel, ctrl} and returns {qpos, qvel, act, qacc_warmstart}
    (and ``hot``, whether BCG's trigger fires, for the statistics only);
    quaternions are re-normalised before stepping so that position noise is admissible.
    ``backward_armature``: None, or a >= 0 added to the joint DOFs' armature in the backward
    pass only (:mod:`bcg.estimators.backward_armature`).
    """

    transform: Callable | None = None
    name: str = "analytic"
    # only for the statistics: env-steps that meet BCG's trigger (bcg.estimators.trigger)
    tau: float | str = "auto"
    stiff_timeconst: float | str | None = "auto"
    trigger: str = "group-mean"
    backward_armature: float | None = None

    def __post_init__(self):
        backward_armature.check("backward_armature", self.backward_armature)

    def init(self, sim: Sim, data):
        return data

    def step(self, sim: Sim, data, ctrl, key):
        E = data.qpos.shape[0]
        keys = jax.random.split(key, E)
        rule = Trigger(self.tau, self.stiff_timeconst, self.trigger)

        def stepper(s):  # the control step of model s, as a function of (x, the rest of d)
            def f(x, d):
                dd = d.replace(qpos=normalize_quaternions(s, x["qpos"]), qvel=x["qvel"])
                out, forces = control_step(s, dd, x["ctrl"], per_substep=True)
                y = {
                    "hot": triggered(rule(s, out, forces)).astype(out.qpos.dtype),
                    "qpos": out.qpos,
                    "qvel": out.qvel,
                    "act": out.act,
                    "qacc_warmstart": out.qacc_warmstart,
                }
                if s.hold_at is not None:  # the control a holding state applies next
                    y["ctrl"] = out.ctrl
                return y

            return f

        F = backward_armature.step_for(stepper, sim, self.backward_armature)

        def one(d, u, k):
            def f(x):
                return F(x, d)

            x = {"qpos": d.qpos, "qvel": d.qvel, "ctrl": jnp.asarray(u, d.qpos.dtype)}
            y = f(x) if self.transform is None else self.transform(f, x, k)
            stiff = jnp.any(jax.lax.stop_gradient(y.pop("hot")) > 0)
            return d.replace(time=d.time + sim.control_dt, **y), stiff

        new, stiff = jax.vmap(one)(data, ctrl, keys)
        zero = jnp.zeros((), jnp.int32)
        return new, StepStats(jnp.sum(stiff).astype(jnp.int32), zero, zero)

    @staticmethod
    def state(carry):
        return carry


def rollout(sim: Sim, estimator, data0, ctrls, key, *, checkpoint: bool = True):
    """Roll a batch of E environments T control steps under open-loop controls.

    Args:
      data0: batched ``mjx.Data`` (leading axis E).
      ctrls: (T, E, nu) controls (nu may be 0).
      key: PRNG key (split per step).
      checkpoint: rematerialise each step in the backward pass (bounds memory to one step).

    Returns:
      (final data, StepStats with a leading T axis).
    """
    T = ctrls.shape[0]

    def body(carry, xs):
        u, k = xs
        return estimator.step(sim, carry, u, k)

    if checkpoint:
        body = jax.checkpoint(body)
    carry0 = estimator.init(sim, data0)
    keys = jax.random.split(key, T)
    carry, stats = jax.lax.scan(body, carry0, (ctrls, keys))
    return estimator.state(carry), stats
