"""The stiff-contact trigger: which environments (and which contact groups) BCG bundles.

Signal. For a control step of S physics steps of length dt, let f_c,s be the normal force (N) of
contact slot c at physics step s (0 when inactive). A *group* is the set of contacts of one body
(:mod:`bcg.estimators.contact_groups`): a foot's spheres, a hopper's foot. Three modes:

* ``"group-mean"`` (default): the group's mean total normal force over the control step,
      F_g = (1/S) sum_s sum_{c in g} f_c,s  =  (impulse of the group over the step) / (S dt),
  in newtons. A foot that carries its share of the body's weight stays near it; a landing or a
  push-off exceeds it. (The authors' code compares a per-sphere impulse per 5 ms substep with
  its threshold; the impulse over a control step is the same quantity summed over the group and
  the substeps, and ``tau`` newtons equal ``tau * S * dt`` N s per control step.)
* ``"group-peak"``: max_s sum_{c in g} f_c,s, the group's peak total force.
* ``"contact"``: max_s f_c,s per contact (the paper's text; a group is hot when one of its
  contacts is).

A group (or contact) is hot when its signal exceeds ``tau``; only contacts whose solref time
constant is at most ``stiff_timeconst`` count (soft contacts resolve over many physics steps and
their analytic gradients are already smooth). An environment triggers when one of its groups
is hot.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bcg.sim import mjx_compat
from bcg.sim.model import Sim

TAU_AUTO_WEIGHT_FACTOR = 1.2  # auto tau = 1.2 x supported weight (paper: 400 N on a 33 kg G1)
STIFF_AUTO_STEPS = 3.0  # auto stiffness gate: contact time constant <= 3 physics steps
MODES = ("group-mean", "group-peak", "contact")


def resolve_tau(tau: float | str, sim: Sim) -> float:
    """Trigger force in newtons: ``tau``, or for ``"auto"`` 1.2 x the weight contacts can have
    to carry (:meth:`bcg.sim.Sim.supported_weight`: the whole robot for a legged one, the
    handled objects for arms on a fixed base)."""
    if tau == "auto":
        return TAU_AUTO_WEIGHT_FACTOR * sim.supported_weight()
    return float(tau)


def resolve_stiff_timeconst(value: float | str | None, sim: Sim) -> float:
    """Largest contact time constant (s) that may trigger: ``value``, 3 physics steps for
    ``"auto"``, or infinity for ``None`` (every contact may trigger, as in the paper)."""
    if value is None:
        return math.inf
    if value == "auto":
        return STIFF_AUTO_STEPS * sim.physics_dt
    return float(value)


def contact_timeconst(data) -> jax.Array:
    """Per contact slot, the solref time constant in seconds (last axis ``ncon``). A direct
    ``solref = (-k, -b)`` gives the undamped equivalent ``1 / sqrt(k)``."""
    ref = mjx_compat.contacts(data).solref[..., 0]
    return jnp.where(ref > 0, ref, 1.0 / jnp.sqrt(jnp.maximum(-ref, 1e-12)))


def hot_contacts(data, fmax, tau: float, max_timeconst: float) -> jax.Array:
    """Per contact slot (last axis ``ncon``): peak normal force ``fmax`` above ``tau`` and time
    constant at most ``max_timeconst`` (the ``"contact"`` mode)."""
    if fmax.shape[-1] == 0:
        return jnp.zeros(fmax.shape, bool)
    return (fmax > tau) & (contact_timeconst(data) <= max_timeconst)


def group_bodies(mj_model) -> np.ndarray:
    """Bodies that can form a contact group: every body but the world that owns a geom with
    nonzero ``contype`` or ``conaffinity`` or a geom of an explicit ``<pair>`` (static, sorted)."""
    can = (mj_model.geom_contype != 0) | (mj_model.geom_conaffinity != 0)
    can[np.asarray(mj_model.pair_geom1, int)] = True
    can[np.asarray(mj_model.pair_geom2, int)] = True
    bodies = {int(b) for b, c in zip(mj_model.geom_bodyid, can, strict=True) if c and b != 0}
    return np.array(sorted(bodies), np.int32)


def group_membership(sim: Sim, data) -> jax.Array:
    """(G, ncon) 0/1 matrix: contact slot c belongs to group g when one of its two geoms is on
    body ``group_bodies[g]`` (a contact between two groups counts for both)."""
    bodies = group_bodies(sim.mj_model)
    c = mjx_compat.contacts(data)
    ncon = mjx_compat.num_contact_slots(data)
    if ncon == 0 or bodies.size == 0:
        return jnp.zeros((bodies.size, ncon), data.qpos.dtype)
    owner = jnp.asarray(sim.mj_model.geom_bodyid)[c.geom]  # (ncon, 2)
    hit = jnp.any(owner[None, :, :] == jnp.asarray(bodies)[:, None, None], axis=-1)
    return hit.astype(data.qpos.dtype)


class Hot(NamedTuple):
    """Trigger outcome of one environment: ``groups`` (G,) and ``contacts`` (ncon,) masks, and
    ``load``, the signal the threshold was compared with: the largest group load (group modes)
    or contact load (``"contact"``), in newtons, 0 without stiff contacts (None when built by
    hand)."""

    groups: jax.Array
    contacts: jax.Array
    load: jax.Array | None = None


def triggered(hot: Hot) -> jax.Array:
    """Whether an environment triggers (any hot group or contact; leading axes kept)."""
    return jnp.any(hot.groups, axis=-1) | jnp.any(hot.contacts, axis=-1)


@dataclasses.dataclass(frozen=True)
class Trigger:
    """Which groups and contacts of an environment are hot after a control step.

    Args:
      tau: threshold in newtons, or ``"auto"`` = 1.2 x the model's supported weight.
      stiff_timeconst: largest solref time constant (s) that may trigger, ``"auto"`` (3 physics
        steps) or None (any contact).
      mode: ``"group-mean"``, ``"group-peak"`` or ``"contact"`` (module docstring).
    """

    tau: float | str = "auto"
    stiff_timeconst: float | str | None = "auto"
    mode: str = "group-mean"

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"trigger mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    def loads(self, sim: Sim, data, forces: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Trigger signals: per group (G,) and per contact (ncon,), in newtons, counting stiff
        contacts only. ``data``: the environment after the step; ``forces``: (S, ncon) normal
        forces of its contact slots at each physics step (:func:`bcg.sim.step.control_step`
        with ``per_substep=True``). Per contact the signal is the peak (``"contact"``) or the
        mean over the step; per group the sum over its contacts of the mean (``"group-mean"``)
        or the peak over the step of that sum (otherwise)."""
        return self._signals(sim, data, forces)[:2]

    def _signals(self, sim: Sim, data, forces):
        """(group loads, contact loads, membership (G, ncon), stiff (ncon,) mask)."""
        member = group_membership(sim, data)  # (G, ncon)
        if forces.shape[-1] == 0:
            z = jnp.zeros(member.shape[:1], forces.dtype)
            return z, jnp.zeros((0,), forces.dtype), member, jnp.zeros((0,), bool)
        stiff = contact_timeconst(data) <= resolve_stiff_timeconst(self.stiff_timeconst, sim)
        f = jnp.where(stiff, forces, 0.0)
        per_step = f @ member.T  # (S, G)
        if self.mode == "group-mean":
            return jnp.mean(per_step, 0), jnp.mean(f, 0), member, stiff
        return jnp.max(per_step, 0), jnp.max(f, 0), member, stiff

    def __call__(self, sim: Sim, data, forces: jax.Array) -> Hot:
        """Hot groups and contacts of one environment (arguments as :meth:`loads`). In the
        group modes the hot contacts are the stiff contacts of the hot groups."""
        tau = resolve_tau(self.tau, sim)
        group_load, contact_load, member, stiff = self._signals(sim, data, forces)
        signal = contact_load if self.mode == "contact" else group_load
        load = jnp.max(signal, initial=0.0)
        if self.mode == "contact":
            contacts = contact_load > tau
            return Hot((member @ contacts.astype(member.dtype)) > 0, contacts, load)
        groups = group_load > tau
        return Hot(groups, (groups.astype(member.dtype) @ member > 0) & stiff, load)
