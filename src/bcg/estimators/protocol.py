"""The step-estimator contract: what a learner, :func:`bcg.estimators.rollout.rollout` and the
gradient report need from a gradient method (diffrax style: the method is an argument).

A step estimator transforms the batched control step ``x_{t+1} = F(x_t, u_t)`` of E
environments. It carries whatever it needs between steps in a *carry* (a JAX pytree):

* ``init(sim, data) -> carry``: the carry of a batch of states ``data`` (an ``mjx.Data`` with a
  leading axis E), before the first step.
* ``step(sim, carry, ctrl, key) -> (carry, StepStats)``: one control step of every environment
  under ``ctrl`` (E, nu) with the PRNG ``key``; its forward value is the next state, its
  derivative the estimator's gradient of that step. :class:`bcg.estimators.stats.StepStats`
  counts triggered / bundled / overflowing environments (zeros if the notions do not apply).
* ``state(carry) -> data``: the batch's current ``mjx.Data`` (E leading), whose ``qpos``,
  ``qvel``, ``act`` and ``time`` the learners observe and reward. ``state(init(sim, d))`` is
  ``d``, and ``step`` advances ``time`` by ``sim.control_dt``.

Rules the learners rely on: the carry's pytree structure, shapes and dtypes are the same after
every step (it is a ``lax.scan`` carry); it holds no Python objects and no typed PRNG keys; a
learner may replace the states of some environments between steps (resets) by rebuilding the
carry with ``init`` on the new states and selecting per environment along axis 0, so every
leaf of the carry has the environment axis first. An estimator is a frozen dataclass or
another hashable object (it is a static argument of compiled functions).

Register one by name with :func:`bcg.estimators.register_estimator`, or pass its import path
(``package.module:factory``) wherever a name is accepted.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from bcg.estimators.stats import StepStats


@runtime_checkable
class StepEstimator(Protocol):
    """A gradient method for the batched control step (module docstring)."""

    def init(self, sim, data) -> Any: ...

    def step(self, sim, carry, ctrl, key) -> tuple[Any, StepStats]: ...

    def state(self, carry) -> Any: ...
