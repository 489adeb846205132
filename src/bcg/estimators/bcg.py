"""Bundled Contact Gradients (BCG): the rollout step that bundles only at stiff contact.

Per control step t of a batch of environments (Aditya et al., 2026; docs/method.md):

1. Trigger (:mod:`bcg.estimators.trigger`). The plain step x_{t+1} = F(x_t, a_t) is computed for
   every environment; an environment triggers when one of its contact groups (a body's
   contacts, e.g. a foot) carries more than ``tau`` newtons of stiff normal force.
2. Perturb (:mod:`bcg.estimators.offsets`). B offsets of the hot groups' limbs (or of the whole
   contacting chains), dq_i = clip(M dp_i), dqd_i = clip(M dv_i), M = J^T (J J^T + lambda I)^-1,
   dp_i ~ N(0, sigma_p^2 I), dv_i ~ N(0, sigma_v^2 I); branch i starts at
   (q_t (+) dq_i, qd_t + dqd_i).
3. Bundled rollout. The B branches evolve H control steps under the main environment's actions.
   A branch in which another group becomes hot mid-bundle perturbs that group from its own
   state (``new_groups``, limb offsets only).
4. Aggregate (:mod:`bcg.estimators.aggregation`). The branch mean x_bar (quaternions by the
   chordal mean) is the bundle's state at every bundle step. By default (``forward="plain"``)
   it enters the rollout through its derivative only, x = sg(x_plain) (+) (x_bar (-) sg(x_bar)):
   the values, rewards and actions are the plain rollout's. With ``forward="mean"`` (the
   paper) it replaces the state, supplying reward and next action, and after H steps the
   rollout continues from it. Autodiff through the mean gives
       Z_bar_{t+1} = (1/B) sum_i (F_x Z_t^(i) + F_a U_t),
   or with ``gradient="stein"`` a Stein estimate inside the perturbed subspace.
5. Slots and phases (:mod:`bcg.estimators.slots`). Only the environments that need a bundle
   compute one, compacted into ``capacity`` slots whose B x C branch states are stepped E at a
   time after the plain step, by the same compiled simulator step; a step with no bundle costs
   a plain step, one with n bundles 1 + ceil(n B / E) plain steps.

Only the state fields (qpos, qvel, act, qacc_warmstart) of the bundle mean are written back;
derived fields of the returned data (xpos, contacts, ...) are those of the plain step.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bcg.estimators import aggregation, backward_armature, offsets, slots, trigger
from bcg.estimators.stats import StepStats
from bcg.estimators.trigger import (  # noqa: F401  (re-exported: the historical home)
    Trigger,
    contact_timeconst,
    hot_contacts,
    resolve_stiff_timeconst,
    resolve_tau,
)
from bcg.sim import mjx_compat
from bcg.sim.model import Sim
from bcg.sim.step import control_step, integrate_qpos
from bcg.validation import check_int, check_number

PERTURB = ("limb", "chain")
FORWARD = ("mean", "plain")


class BranchState(NamedTuple):
    """The per-branch state fields of a bundle (leading axis: branch)."""

    qpos: jax.Array
    qvel: jax.Array
    act: jax.Array
    qacc_warmstart: jax.Array

    @classmethod
    def of(cls, d) -> BranchState:
        """The state fields of an ``mjx.Data`` (batched or not)."""
        return cls(d.qpos, d.qvel, d.act, d.qacc_warmstart)


class BundleCarry(NamedTuple):
    """Rollout carry of one environment under BCG."""

    data: object  # mjx.Data: the nominal (= bundle mean while bundled) state
    branches: BranchState  # (B, ...) valid while remaining > 0
    remaining: jax.Array  # int: bundle steps still to run after this one
    anchor: jax.Array  # (2r,) Cartesian coordinates s of the start state (value 0; "stein")
    noise: jax.Array  # (B, 2r) [dp / sigma_p^2, dv / sigma_v^2] of the bundle ("stein")
    perturbed: jax.Array  # (B, G) bool: groups already perturbed in each branch
    # float: the bundle's blend weight w; None without ``blend`` (no leaf: the carry, and so
    # the checkpoints of runs without a blend, keep the layout they had before the option)
    weight: jax.Array | None


class _Book(NamedTuple):
    """Per-slot bundle bookkeeping carried from the branch start to its finish."""

    remaining: jax.Array
    anchor: jax.Array
    noise: jax.Array
    perturbed: jax.Array
    weight: jax.Array | None


@dataclasses.dataclass(frozen=True)
class BCG:
    """BCG rollout-step estimator.

    Args:
      num_branches: B, branches per bundle (paper 10).
      horizon: H, control steps a bundle lasts (paper 2).
      sigma_p: Cartesian position offset std in metres (paper 0.01).
      sigma_v: Cartesian velocity offset std in m/s (paper 0.02).
      tau: trigger threshold in newtons, or ``"auto"`` = 1.2 x the supported weight
        (:meth:`bcg.sim.Sim.supported_weight`).
      trigger: ``"group-mean"`` (a group's mean total normal force over the control step, i.e.
        its impulse / control_dt), ``"group-peak"`` or ``"contact"`` (per-contact peak force,
        the paper's text); see :mod:`bcg.estimators.trigger`.
      stiff_timeconst: only contacts whose solref time constant is at most this (seconds) may
        trigger: ``"auto"`` = 3 physics steps, ``None`` = any contact (the paper).
      perturb: ``"limb"`` (the hot groups' limbs only, never the floating base; the authors'
        code) or ``"chain"`` (stacked contact Jacobians w.r.t. every dof; the paper's text).
      max_dq, max_dqd: per-dof clamps of the joint offsets (rad or m; rad/s or m/s), None for
        none (the authors' code: 0.1 and 0.5).
      normal_scale: s in [0, 1]: the position noise dp of a group (limb) or contact (chain)
        keeps its tangential components and s times its component along the contact normal n,
        dp <- (I - (1 - s) n n^T) dp (1: isotropic, the paper; 0: tangential only, so no branch
        starts deeper in, or lifted off, a stiff surface it is pressed against).
      blend: None (the paper: the bundle mean replaces the state), or b > 0: the state is
        x = x_plain (+) w (x_bar (-) x_plain), w = clip((L / tau - 1) / b, 0, 1) fixed for the
        bundle from its trigger load L (the hottest group's, or contact's, load), with w a
        constant for autodiff; the rollout is then continuous where the trigger switches.
      forward: ``"plain"`` (default): the rollout's values are those of the plain step,
        exactly the analytic rollout's, and only the derivative is the bundle's (after
        ``blend``, if set), x = sg(x_plain) (+) (x_bar (-) sg(x_bar))
        (:func:`bcg.estimators.aggregation.plain_forward`); or ``"mean"`` (the paper): the
        values are the bundle mean's.
      new_groups: with limb offsets, a branch in which a group becomes hot mid-bundle perturbs
        that group from its own state (at the start of the next bundle step).
      damping: lambda of the damped pseudo-inverse, m^2 (paper 1e-4). A Cartesian direction
        the limb moves s metres per unit joint motion (a singular value of J) is realised at
        s^2 / (s^2 + lambda) of the requested offset (unclamped): 0.1 drops most of a
        near-straight leg's offset along its own axis (s ~ 0.08 on the hopper) and keeps 91% of
        a slide's (s = 1). ``gradient="stein"`` scores the requested offsets: keep it small.
      capacity: bundle slots C per step: an int, a fraction of the batch in (0, 1], or None
        (C = E); environments that do not fit take the plain step (counted as overflow). The
        branches run in up to ceil(C B / E) phases of E states after the plain step, only
        the phases in use: a step with n bundles costs 1 + ceil(n B / E) plain steps.
      remat: recompute the physics on the backward pass instead of storing its residuals.
      antithetic: pair offsets (+d, -d) so that their mean is exactly zero (default; the
        middle draw is unpaired for odd B; the paper draws them independently).
      gradient: ``"first-order"`` (the paper) or ``"stein"`` (:mod:`bcg.estimators.aggregation`).
      stein_velocity: with ``"stein"``, also replace the velocity sensitivity.
      branch_clip: None, or c > 0: on the backward pass each branch's cotangent at the bundle
        start (its start state; its copy of the action) is clipped to c times the median over
        the B branches (:func:`bcg.estimators.aggregation.clip_branch_cotangents`).
      backward_armature: None, or a >= 0 added to the joint DOFs' armature in the backward
        pass only, for the plain step and every branch (:mod:`bcg.estimators.backward_armature`).
    """

    num_branches: int = 10
    horizon: int = 2
    sigma_p: float = 0.01
    sigma_v: float = 0.02
    tau: float | str = "auto"
    trigger: str = "group-mean"
    stiff_timeconst: float | str | None = "auto"
    perturb: str = "limb"
    max_dq: float | None = 0.1
    max_dqd: float | None = 0.5
    normal_scale: float = 1.0
    blend: float | None = None
    forward: str = "plain"
    new_groups: bool = True
    damping: float = 1e-4
    capacity: int | float | None = None
    remat: bool = False
    antithetic: bool = True
    gradient: str = "first-order"
    stein_velocity: bool = False
    branch_clip: float | None = None
    backward_armature: float | None = None
    name: str = "bcg"

    def __post_init__(self):
        check_int("num_branches (B)", self.num_branches, 1)
        check_int("horizon (H)", self.horizon, 1)
        check_number("sigma_p", self.sigma_p, at_least=0)
        check_number("sigma_v", self.sigma_v, at_least=0)
        check_number("damping (lambda)", self.damping, above=0)
        if self.tau != "auto":
            check_number("tau", self.tau, at_least=0)
        if self.stiff_timeconst not in ("auto", None):
            check_number("stiff_timeconst", self.stiff_timeconst, above=0)
        check_number("normal_scale", self.normal_scale, at_least=0, at_most=1)
        for clamp in ("max_dq", "max_dqd"):
            if getattr(self, clamp) is not None:
                check_number(clamp, getattr(self, clamp), above=0)
        if self.perturb not in PERTURB:
            raise ValueError(f"perturb must be 'limb' or 'chain', got {self.perturb!r}")
        Trigger(mode=self.trigger)  # validates the mode
        if self.capacity is not None:
            c = self.capacity
            if isinstance(c, bool) or not isinstance(c, (int, float)):
                raise ValueError(f"capacity must be an int, a fraction or None, got {c!r}")
            if isinstance(c, float) and not (0 < c <= 1):
                raise ValueError(f"capacity as a fraction must be in (0, 1], got {c!r}")
            if isinstance(c, int) and c < 1:
                raise ValueError(f"capacity must be >= 1 slot, got {c!r}")
        for flag in ("remat", "antithetic", "stein_velocity", "new_groups"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        if self.branch_clip is not None:
            check_number("branch_clip", self.branch_clip, above=0)
        backward_armature.check("backward_armature", self.backward_armature)
        if self.blend is not None:
            check_number("blend", self.blend, above=0)
        if self.forward not in FORWARD:
            raise ValueError(f"forward must be 'mean' or 'plain', got {self.forward!r}")
        if self.gradient not in ("first-order", "stein"):
            raise ValueError(f"gradient must be 'first-order' or 'stein', got {self.gradient!r}")
        if self.gradient == "stein" and self.num_branches < 2:
            raise ValueError("gradient='stein' needs num_branches (B) >= 2")

    # ------------------------------------------------------------------ parts

    @property
    def trigger_rule(self) -> Trigger:
        return Trigger(self.tau, self.stiff_timeconst, self.trigger)

    def tau_newton(self, sim: Sim) -> float:
        return resolve_tau(self.tau, sim)

    def slots(self, batch: int) -> int:
        return slots.slot_count(self.capacity, batch)

    def _offset_kw(self, num_branches=None, antithetic=None) -> dict:
        return dict(
            num_branches=self.num_branches if num_branches is None else num_branches,
            sigma_p=self.sigma_p,
            sigma_v=self.sigma_v,
            damping=self.damping,
            antithetic=self.antithetic if antithetic is None else antithetic,
            max_dq=self.max_dq,
            max_dqd=self.max_dqd,
            normal_scale=self.normal_scale,
        )

    def offsets(self, sim: Sim, data, hot: trigger.Hot, key) -> offsets.Offsets:
        """Branch offsets for the hot groups (limb) or contacts (chain) of one environment."""
        if self.perturb == "limb":
            return offsets.limb_offsets(sim, data, hot.groups, key, **self._offset_kw())
        return offsets.chain_offsets(sim, data, hot.contacts, key, **self._offset_kw())

    def _noise_dim(self, sim: Sim, data) -> int:
        if self.perturb == "limb":
            return 3 * int(trigger.group_bodies(sim.mj_model).size)
        return 3 * int(mjx_compat.num_contact_slots(data))

    def init(self, sim: Sim, data) -> BundleCarry:
        """Carry for a batch of environments (leading axis of ``data``)."""
        B = self.num_branches
        lead = data.qpos.shape[:-1]

        def rep(x):
            return jnp.broadcast_to(x[..., None, :], lead + (B, x.shape[-1]))

        R = 2 * self._noise_dim(sim, data)
        G = int(trigger.group_bodies(sim.mj_model).size)
        z = data.qpos.dtype
        return BundleCarry(
            data,
            jax.tree_util.tree_map(rep, BranchState.of(data)),
            jnp.zeros(lead, jnp.int32),
            jnp.zeros(lead + (R,), z),
            jnp.zeros(lead + (B, R), z),
            jnp.zeros(lead + (B, G), bool),
            None if self.blend is None else jnp.ones(lead, z),
        )

    # ------------------------------------------------------------------ one environment

    def _perturb_new_groups(self, sim: Sim, stepped, forces, perturbed, go_on, key):
        """Branch states with the groups that became hot in a branch (and were not perturbed
        there yet) perturbed from that branch's state, when the bundle goes on."""
        rule = self.trigger_rule
        B = self.num_branches
        hot_b = jax.vmap(lambda d, f: rule(sim, d, f).groups)(stepped, forces)  # (B, G)
        fresh = hot_b & ~perturbed & go_on
        kw = self._offset_kw(num_branches=1, antithetic=False)
        offs = jax.vmap(lambda d, g, k: offsets.limb_offsets(sim, d, g, k, **kw))(
            stepped, fresh, jax.random.split(key, B)
        )
        moved = jax.vmap(lambda q, dq: integrate_qpos(sim, q, dq))(stepped.qpos, offs.dq[:, 0])
        any_fresh = jnp.any(fresh, axis=-1, keepdims=True)
        br = BranchState.of(stepped)
        br = br._replace(
            qpos=jnp.where(any_fresh, moved, br.qpos),
            qvel=jnp.where(any_fresh, br.qvel + offs.dqd[:, 0], br.qvel),
        )
        return br, perturbed | fresh

    def _branch_start(self, sim: Sim, carry: BundleCarry, plain, hot: trigger.Hot, w_new, key):
        """Branch states (B) one environment steps from: a new bundle's perturbed copies of the
        state before the step (offsets from the hot groups after the plain step), or the
        running bundle's branches; and the bundle's bookkeeping."""
        d = carry.data
        B = self.num_branches
        in_bundle = carry.remaining > 0
        k_start, _ = jax.random.split(key)  # the second key: new groups (_branch_finish)
        offs = self.offsets(sim, plain, hot, k_start)
        q0, v0 = d.qpos, d.qvel
        anchor, noise = carry.anchor, carry.noise
        if self.gradient == "stein":
            q0, v0, a_new, n_new = aggregation.stein_detach(
                sim, q0, v0, offs, self.sigma_p, self.sigma_v, self.stein_velocity
            )
            anchor = jnp.where(in_bundle, anchor, a_new)
            noise = jnp.where(in_bundle, noise, n_new)
        start = BranchState(
            jax.vmap(lambda v: integrate_qpos(sim, q0, v))(offs.dq),
            v0[None] + offs.dqd,
            jnp.broadcast_to(d.act, (B,) + d.act.shape),
            jnp.broadcast_to(d.qacc_warmstart, (B,) + d.qvel.shape),
        )
        if self.branch_clip is not None:
            qv = aggregation.clip_branch_cotangents((start.qpos, start.qvel), self.branch_clip)
            start = start._replace(qpos=qv[0], qvel=qv[1])
        br = jax.tree_util.tree_map(lambda a, b: jnp.where(in_bundle, a, b), carry.branches, start)
        start_groups = jnp.broadcast_to(hot.groups, carry.perturbed.shape)
        perturbed = jnp.where(in_bundle, carry.perturbed, start_groups)
        remaining = jnp.where(in_bundle, carry.remaining - 1, self.horizon - 1)
        weight = None if w_new is None else jnp.where(in_bundle, carry.weight, w_new)
        inputs = jax.vmap(lambda b: d.replace(**b._asdict()))(br)
        return inputs, _Book(remaining, anchor, noise, perturbed, weight)

    def _branch_finish(self, sim: Sim, stepped, forces, book: _Book, key):
        """One environment's bundle after its branches stepped: (mean state, branch states to
        continue from, remaining steps, anchor, noise, perturbed groups, blend weight)."""
        mean = aggregation.branch_mean(sim, stepped)
        if self.gradient == "stein":
            mean = aggregation.stein_attach(sim, mean, stepped, book.anchor, book.noise)
        perturbed = book.perturbed
        if self.perturb == "limb" and self.new_groups and self.horizon > 1:
            new_br, perturbed = self._perturb_new_groups(
                sim, stepped, forces, perturbed, book.remaining > 0, jax.random.split(key)[1]
            )
        else:
            new_br = BranchState.of(stepped)
        return (
            BranchState.of(mean),
            new_br,
            book.remaining,
            book.anchor,
            book.noise,
            perturbed,
            book.weight,
        )

    def blend_weight(self, sim: Sim, load: jax.Array) -> jax.Array:
        """w = clip((L / tau - 1) / blend, 0, 1) of one environment after its plain step (1
        without ``blend``), L = ``load`` its trigger load (:attr:`trigger.Hot.load`: the
        hottest group's or, in ``"contact"`` mode, contact's load in newtons); 1 at tau = 0.
        A constant for autodiff."""
        tau = self.tau_newton(sim)
        if self.blend is None or tau <= 0:
            return jnp.ones((), load.dtype)
        w = jnp.clip((load / tau - 1.0) / self.blend, 0.0, 1.0)
        return jax.lax.stop_gradient(w)

    # ------------------------------------------------------------------ the step

    def step(self, sim: Sim, carry: BundleCarry, ctrl, key) -> tuple[BundleCarry, StepStats]:
        """One control step of a batch of E environments (leading axis everywhere): the plain
        step of every environment, then the branches of the C slots (:mod:`.slots`)."""
        rule = self.trigger_rule
        tmap = jax.tree_util.tree_map
        E = carry.remaining.shape[0]
        B = self.num_branches
        C = self.slots(E)
        keys = jax.random.split(key, E)
        in_bundle = carry.remaining > 0

        def one_step(s):
            return lambda d, u: control_step(s, d, u, per_substep=True)

        step_one = backward_armature.step_for(one_step, sim, self.backward_armature)

        def physics(x):
            return jax.vmap(step_one)(*x)

        forces_shape = jax.eval_shape(physics, (carry.data, ctrl))[1]

        def skip(x):
            return x[0], jnp.zeros(forces_shape.shape, forces_shape.dtype)

        def build(y):
            plain, forces = y
            hot = jax.vmap(lambda d, f: rule(sim, d, f))(plain, forces)
            trig = (~in_bundle) & trigger.triggered(hot)
            priority = 2 * in_bundle.astype(jnp.int32) + trig.astype(jnp.int32)
            idx, used, overflow = slots.select_slots(priority, C)
            take = functools.partial(tmap, lambda x: x[idx])
            w_new = None
            if self.blend is not None:
                w_new = jax.vmap(lambda L: self.blend_weight(sim, L))(hot.load[idx])
            inputs, book = jax.vmap(lambda *a: self._branch_start(sim, *a))(
                take(carry), take(plain), take(hot), w_new, keys[idx]
            )
            u = jnp.broadcast_to(ctrl[idx][:, None], (C, B) + ctrl.shape[1:])
            if self.branch_clip is not None:
                clip = functools.partial(
                    aggregation.clip_branch_cotangents, factor=self.branch_clip
                )
                u = jax.vmap(clip)(u)
            flat = tmap(lambda x: x.reshape((C * B,) + x.shape[2:]), (inputs, u))
            return flat, jnp.sum(used) * B, (trig, idx, used, overflow, book)

        (plain, _), (out, forces), aux = slots.phased(
            physics,
            (carry.data, ctrl),
            build,
            slots.phase_count(C, B, E),
            skip,
            remat=self.remat,
        )
        trig, idx, used, overflow, book = aux
        stepped, forces = tmap(lambda x: x.reshape((C, B) + x.shape[1:]), (out, forces))
        part = jax.vmap(lambda *a: self._branch_finish(sim, *a))(stepped, forces, book, keys[idx])
        fallback = (
            BranchState.of(plain),
            carry.branches,
            jnp.zeros_like(carry.remaining),
            jnp.zeros_like(carry.anchor),
            carry.noise,
            carry.perturbed,
            carry.weight,
        )
        selected = jnp.zeros((E,), bool).at[idx].set(used)

        def merge(full, p):
            s = selected.reshape(selected.shape + (1,) * (full.ndim - 1))
            return jnp.where(s, full.at[idx].set(p.astype(full.dtype)), full)

        mean, branches, remaining, anchor, noise, perturbed, weight = tmap(merge, fallback, part)
        if self.blend is not None:
            mean = jax.vmap(lambda p, m, w: aggregation.blend_states(sim, p, m, w))(
                BranchState.of(plain), mean, weight
            )
        if self.forward == "plain":
            mean = jax.vmap(lambda p, m: aggregation.plain_forward(sim, p, m))(
                BranchState.of(plain), mean
            )
        data = plain.replace(**mean._asdict())
        stats = StepStats(
            triggered=jnp.sum(trig & selected).astype(jnp.int32),
            bundled=jnp.sum(selected).astype(jnp.int32),
            overflow=overflow,
        )
        new = BundleCarry(
            data, branches, remaining.astype(jnp.int32), anchor, noise, perturbed, weight
        )
        return new, stats

    @staticmethod
    def state(carry: BundleCarry):
        return carry.data


def bcg(**params) -> BCG:
    """Factory: ``bcg(num_branches=10, horizon=2, sigma_p=0.01, ...)``."""
    return BCG(**params)
