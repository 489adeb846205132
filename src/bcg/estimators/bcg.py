"""Bundled Contact Gradients (BCG): the rollout step that bundles only at stiff contact.

Per control step t of a batch of environments (METHOD.md):

1. Trigger. The plain step x_{t+1} = F(x_t, a_t) is computed for every environment; an
   environment triggers when some contact's normal force during the step exceeds ``tau``.
2. Perturb. B offsets of the contacting chains: for the triggering contacts with stacked
   relative translational Jacobian J (3 k x nv),
       dq_i   = J^T (J J^T + lambda I)^-1 dp_i,   dp_i ~ N(0, sigma_p^2 I)
       dqd_i  = J^T (J J^T + lambda I)^-1 dv_i,   dv_i ~ N(0, sigma_v^2 I)
   (constants for autodiff: ``stop_gradient``), branch i starts at
   (q_t (+) dq_i, qd_t + dqd_i).
3. Bundled rollout. The B branches evolve H control steps under the shared action a_t.
4. Aggregate. x_bar = (1/B) sum_i x^(i) (quaternions re-normalised) replaces the nominal
   state, supplying reward and next action; after H steps the rollout continues from it.
5. Gradient. Autodiff through the mean gives
       Z_bar_{t+1} = (1/B) sum_i (F_x Z_t^(i) + F_a U_t).

Stein aggregation (``gradient="stein"``, ours). First-order averaging (5.) keeps the
per-branch slopes: when a stiff contact resolves within one physics step the post-impact state
is a sawtooth of the pre-impact state (the impact step shifts), every branch sees the same large
slope and the jumps are never seen, so the mean of slopes is neither small nor the slope of the
smoothed dynamics. With ``"stein"`` the sensitivity to the start state x_t *inside the perturbed
subspace* range(M), M = J^T (J J^T + lambda I)^-1, is the Stein (zeroth-order) estimate of the
smoothed bundle map from the branches themselves,
    d y_bar / d s  ~  (1/B) sum_i (y^(i) - y_bar) [dp_i / sigma_p^2, dv_i / sigma_v^2]^T,
with s = (M^+ dq_t, M^+ dqd_t) the Cartesian coordinates of the state, while the complement
(I - M M^+) and the shared actions keep the first-order (autodiff) path. The forward value is
unchanged (the branch mean).

Contact-local cost. Under ``vmap`` a per-environment ``cond`` evaluates the bundle for every
environment. With ``capacity = C`` the environments that are in (or start) a bundle are
compacted into a fixed buffer of C slots (continuing bundles first), so a step costs E plain
steps + C x B branch steps instead of E x (1 + B). Environments that do not fit overflow:
they take the plain step, and the overflow is counted in the step statistics. A step at which
no environment of the batch bundles skips the bundle computation altogether (``lax.switch`` on
the batch, forward and backward). With ``buckets = k`` the slot counts C, C/2, ..., C/2^(k-1)
are all compiled and a step runs the smallest that holds its n bundling environments, so the
branch cost follows n (up to a factor 2) instead of the worst case C. Only the state fields
(qpos, qvel, act, qacc_warmstart) of the bundle mean are scattered back; derived fields of the
returned data (xpos, contacts, ...) are those of the plain step (run ``mjx.forward`` on the state
if you need them at the mean).

Stiffness gate (ours). The paper triggers on force alone. Here a contact may trigger only if its
solref time constant is at most ``stiff_timeconst`` (default 3 physics steps): soft contacts
resolve over many steps, their analytic gradients are smooth, and bundling them would only add
cost and smoothing bias.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bcg.sim.contact import contact_jacobians
from bcg.sim.model import Sim
from bcg.sim.step import (
    control_step,
    differentiate_qpos,
    integrate_qpos,
    integrate_qpos_linear,
    mean_data,
)

TAU_AUTO_WEIGHT_FACTOR = 1.2  # auto tau = 1.2 x total weight (paper: 400 N on a 33 kg G1)
STIFF_AUTO_STEPS = 3.0  # auto stiffness gate: contact time constant <= 3 physics steps


def resolve_tau(tau: float | str, sim: Sim) -> float:
    """Trigger force in newtons: ``tau``, or 1.2 x total weight for ``"auto"``."""
    if tau == "auto":
        return TAU_AUTO_WEIGHT_FACTOR * sim.total_weight()
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
    ref = data._impl.contact.solref[..., 0]
    return jnp.where(ref > 0, ref, 1.0 / jnp.sqrt(jnp.maximum(-ref, 1e-12)))


def hot_contacts(data, fmax, tau: float, max_timeconst: float) -> jax.Array:
    """Per contact slot (last axis ``ncon``): normal force above ``tau`` and time constant at
    most ``max_timeconst``. ``fmax``: peak normal force of each slot over the control step.
    An environment triggers when any of its contacts is hot."""
    if fmax.shape[-1] == 0:
        return jnp.zeros(fmax.shape, bool)
    return (fmax > tau) & (contact_timeconst(data) <= max_timeconst)


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
    anchor: jax.Array  # (2R,) Cartesian coordinates s of the start state (value 0; "stein")
    noise: jax.Array  # (B, 2R) [dp / sigma_p^2, dv / sigma_v^2] of the bundle ("stein")


class StepStats(NamedTuple):
    """Per-step counts over the environment batch."""

    triggered: jax.Array  # environments that started a bundle
    bundled: jax.Array  # environments whose step was a bundle step
    overflow: jax.Array  # environments that needed a bundle but found no free slot


def _check_int(name, v, lo):
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")


def _check_pos(name, v, allow_zero=False):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or v < 0 or (v == 0 and not allow_zero):
        rel = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {rel}, got {v!r}")


@dataclasses.dataclass(frozen=True)
class BCG:
    """BCG rollout-step estimator.

    Args:
      num_branches: B, branches per bundle (paper 10).
      horizon: H, control steps a bundle lasts (paper 2).
      sigma_p: Cartesian position offset std in metres (paper 0.01).
      sigma_v: Cartesian velocity offset std in m/s (paper 0.02).
      tau: contact normal-force trigger in newtons, or ``"auto"`` = 1.2 x total weight.
      stiff_timeconst: only contacts whose solref time constant is at most this (seconds) may
        trigger: ``"auto"`` = 3 physics steps (ours: soft contact, whose analytic gradients are
        already smooth, is never bundled), ``None`` = any contact (the paper).
      damping: lambda of the damped pseudo-inverse (paper 1e-4).
      capacity: bundle slots per step for a batch of environments: an int, a fraction of the
        batch in (0, 1], or None for no compaction (every environment computes the bundle,
        the naive per-environment cond).
      buckets: with ``capacity``, the number of compiled bundle sizes C, C/2, C/4, ... (ceil,
        at least 1 slot): each step runs the smallest size that holds every environment that
        needs a bundle (``lax.switch``), so a step costs E + C_k x B plain steps with C_k close
        to the number of bundling environments instead of E + C x B. Each size is compiled
        separately (compile time grows with ``buckets``).
      remat: recompute the bundle on the backward pass (``jax.checkpoint``) instead of storing
        its intermediate values. Under reverse mode a ``lax.switch`` stores the residuals of
        every path (zeros for the paths not taken), so without remat every step writes the
        residuals of the largest bundle, triggered or not.
      antithetic: pair offsets (+d, -d) so that their mean is exactly zero.
      gradient: ``"first-order"`` (the paper: mean of branch sensitivities) or ``"stein"``
        (Stein estimate inside the perturbed subspace, see the module docstring).
      stein_velocity: with ``"stein"``, also replace the velocity sensitivity (default: only
        positions; the velocity offsets are tiny, so their Stein term would mostly be the noise
        of the position-induced spread divided by sigma_v).
    """

    num_branches: int = 10
    horizon: int = 2
    sigma_p: float = 0.01
    sigma_v: float = 0.02
    tau: float | str = "auto"
    stiff_timeconst: float | str | None = "auto"
    damping: float = 1e-4
    capacity: int | float | None = None
    buckets: int = 1
    remat: bool = False
    antithetic: bool = False
    gradient: str = "first-order"
    stein_velocity: bool = False
    name: str = "bcg"

    def __post_init__(self):
        _check_int("num_branches (B)", self.num_branches, 1)
        _check_int("horizon (H)", self.horizon, 1)
        _check_pos("sigma_p", self.sigma_p, allow_zero=True)
        _check_pos("sigma_v", self.sigma_v, allow_zero=True)
        _check_pos("damping (lambda)", self.damping)
        if self.tau != "auto":
            _check_pos("tau", self.tau, allow_zero=True)
        if self.stiff_timeconst not in ("auto", None):
            _check_pos("stiff_timeconst", self.stiff_timeconst)
        if self.capacity is not None:
            c = self.capacity
            if isinstance(c, bool) or not isinstance(c, (int, float)):
                raise ValueError(f"capacity must be an int, a fraction or None, got {c!r}")
            if isinstance(c, float) and not (0 < c <= 1):
                raise ValueError(f"capacity as a fraction must be in (0, 1], got {c!r}")
            if isinstance(c, int) and c < 1:
                raise ValueError(f"capacity must be >= 1 slot, got {c!r}")
        _check_int("buckets", self.buckets, 1)
        for flag in ("remat", "antithetic", "stein_velocity"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{flag} must be true or false, got {getattr(self, flag)!r}")
        if self.buckets > 1 and self.capacity is None:
            raise ValueError("buckets > 1 needs a capacity (bucket sizes are C, C/2, C/4, ...)")
        if self.gradient not in ("first-order", "stein"):
            raise ValueError(f"gradient must be 'first-order' or 'stein', got {self.gradient!r}")
        if self.gradient == "stein" and self.num_branches < 2:
            raise ValueError("gradient='stein' needs num_branches (B) >= 2")
        if self.antithetic and self.num_branches % 2:
            raise ValueError(f"antithetic needs an even num_branches, got {self.num_branches}")

    # ------------------------------------------------------------------ helpers

    def tau_newton(self, sim: Sim) -> float:
        return resolve_tau(self.tau, sim)

    def slots(self, batch: int) -> int:
        if self.capacity is None:
            return batch
        if isinstance(self.capacity, float):
            return max(1, min(batch, math.ceil(self.capacity * batch)))
        return min(batch, int(self.capacity))

    def bucket_sizes(self, batch: int) -> tuple[int, ...]:
        """Compiled slot counts, increasing, the last one ``slots(batch)``."""
        C = self.slots(batch)
        return tuple(sorted({max(1, math.ceil(C / 2**k)) for k in range(self.buckets)}))

    def init(self, sim: Sim, data) -> BundleCarry:
        """Carry for a batch of environments (leading axis of ``data``)."""
        B = self.num_branches
        lead = data.qpos.shape[:-1]

        def rep(x):
            return jnp.broadcast_to(x[..., None, :], lead + (B, x.shape[-1]))

        br = jax.tree_util.tree_map(rep, BranchState.of(data))
        R = 2 * 3 * self._ncon(data)
        z = data.qpos.dtype
        return BundleCarry(
            data,
            br,
            jnp.zeros(lead, jnp.int32),
            jnp.zeros(lead + (R,), z),
            jnp.zeros(lead + (B, R), z),
        )

    @staticmethod
    def _ncon(data) -> int:
        return int(np.asarray(data._impl.contact.efc_address).shape[-1])

    def offsets(self, sim: Sim, d_contact, mask, key):
        """(dq, dqd), each (B, nv): chain offsets for the contacts in ``mask`` (stop_gradient)."""
        return self._offsets_full(sim, d_contact, mask, key)[:2]

    def _offsets_full(self, sim: Sim, d_contact, mask, key):
        """(dq, dqd, dp, dv, M): joint offsets, Cartesian offsets (B, 3 ncon) and the map
        M = J^T (J J^T + lambda I)^-1 (nv, 3 ncon), all stop_gradient."""
        m = sim.mjx_model
        J = contact_jacobians(m, d_contact)  # (ncon, 3, nv)
        J = J * mask[:, None, None].astype(J.dtype)
        Jf = J.reshape(-1, m.nv)
        A = Jf @ Jf.T + self.damping * jnp.eye(Jf.shape[0], dtype=Jf.dtype)
        B = self.num_branches
        n = B // 2 if self.antithetic else B
        kp, kv = jax.random.split(key)
        dp = self.sigma_p * jax.random.normal(kp, (n, Jf.shape[0]), Jf.dtype)
        dv = self.sigma_v * jax.random.normal(kv, (n, Jf.shape[0]), Jf.dtype)
        if self.antithetic:
            dp = jnp.concatenate([dp, -dp])
            dv = jnp.concatenate([dv, -dv])
        Minv_t = jnp.linalg.solve(A, Jf)  # (3k, nv) = (J J^T + lambda I)^-1 J = M^T
        sg = jax.lax.stop_gradient
        return sg(dp @ Minv_t), sg(dv @ Minv_t), sg(dp), sg(dv), sg(Minv_t.T)

    def _bundle_one(self, sim: Sim, carry: BundleCarry, plain, hot, ctrl, key):
        """Bundle step of one environment: start (if not in a bundle) or continue it; ``hot``
        (ncon,) marks the contacts whose chains are perturbed."""
        sg = jax.lax.stop_gradient
        d = carry.data
        B = self.num_branches
        in_bundle = carry.remaining > 0
        dq, dqd, dp, dv, M = self._offsets_full(sim, plain, hot, key)
        q0, v0 = d.qpos, d.qvel
        anchor, noise = carry.anchor, carry.noise
        if self.gradient == "stein":
            # the start state's sensitivity inside range(M) goes through the Stein term only
            Mp = sg(jnp.linalg.pinv(M))  # (3k, nv)
            P = M @ Mp
            dq_tan = differentiate_qpos(sim, sg(q0), q0)  # value 0, derivative: tangent map
            dv_tan = v0 - sg(v0)
            q0 = integrate_qpos_linear(sim, sg(q0), dq_tan - P @ dq_tan)
            inv_p = 1.0 / self.sigma_p**2 if self.sigma_p > 0 else 0.0
            inv_v = 1.0 / self.sigma_v**2 if self.sigma_v > 0 else 0.0
            if self.stein_velocity:
                v0 = sg(v0) + dv_tan - P @ dv_tan
            else:  # velocities keep the first-order path
                dv_tan, inv_v = jnp.zeros_like(dv_tan), 0.0
            anchor = jnp.where(in_bundle, anchor, jnp.concatenate([Mp @ dq_tan, Mp @ dv_tan]))
            noise = jnp.where(in_bundle, noise, jnp.concatenate([dp * inv_p, dv * inv_v], -1))
        start = BranchState(
            jax.vmap(lambda v: integrate_qpos(sim, q0, v))(dq),
            v0[None] + dqd,
            jnp.broadcast_to(d.act, (B,) + d.act.shape),
            jnp.broadcast_to(d.qacc_warmstart, (B,) + d.qvel.shape),
        )
        br = jax.tree_util.tree_map(lambda a, b: jnp.where(in_bundle, a, b), carry.branches, start)

        def step_branch(b: BranchState):
            db = d.replace(qpos=b.qpos, qvel=b.qvel, act=b.act, qacc_warmstart=b.qacc_warmstart)
            return control_step(sim, db, ctrl)[0]

        stepped = jax.vmap(step_branch)(br)
        new_br = BranchState.of(stepped)
        remaining = jnp.where(in_bundle, carry.remaining - 1, self.horizon - 1)
        mean = mean_data(sim, stepped)
        if self.gradient == "stein":
            dy_q = jax.vmap(lambda q: differentiate_qpos(sim, sg(mean.qpos), q))(sg(stepped.qpos))
            dy_v = sg(stepped.qvel - mean.qvel[None])
            A_q = dy_q.T @ noise / B  # (nv, 2R): d q_bar / d s
            A_v = dy_v.T @ noise / B
            mean = mean.replace(
                qpos=integrate_qpos_linear(sim, mean.qpos, A_q @ anchor),
                qvel=mean.qvel + A_v @ anchor,
            )
        mean = BranchState.of(mean)
        return mean, new_br, remaining, anchor, noise

    # ------------------------------------------------------------------ the step

    def step(self, sim: Sim, carry: BundleCarry, ctrl, key) -> tuple[BundleCarry, StepStats]:
        """One control step of a batch of E environments (leading axis everywhere)."""
        tau = self.tau_newton(sim)
        max_tc = resolve_stiff_timeconst(self.stiff_timeconst, sim)
        E = carry.remaining.shape[0]
        plain, fmax = jax.vmap(lambda d, u: control_step(sim, d, u))(carry.data, ctrl)
        plain_state = BranchState.of(plain)
        in_bundle = carry.remaining > 0
        hot = hot_contacts(plain, fmax, tau, max_tc)  # (E, ncon)
        trig = (~in_bundle) & jnp.any(hot, axis=-1)
        need = in_bundle | trig
        keys = jax.random.split(key, E)
        C = self.slots(E)

        def naive_path(_):  # every environment computes the bundle, select per environment
            mean, br, rem, anc, noi = jax.vmap(
                lambda c, p, h, u, k: self._bundle_one(sim, c, p, h, u, k)
            )(carry, plain, hot, ctrl, keys)
            return mean, br, rem, anc, noi, need, jnp.zeros((), jnp.int32)

        def compacted_path(C, _):  # compaction into C slots, continuing bundles first
            score = 2 * in_bundle.astype(jnp.int32) + trig.astype(jnp.int32)
            idx = jnp.argsort(-score, stable=True)[:C]
            valid = score[idx] > 0
            take = lambda t: jax.tree_util.tree_map(lambda x: x[idx], t)  # noqa: E731
            mean_c, br_c, rem_c, anc_c, noi_c = jax.vmap(
                lambda c, p, h, u, k: self._bundle_one(sim, c, p, h, u, k)
            )(take(carry), take(plain), hot[idx], ctrl[idx], keys[idx])
            put = lambda full, part: full.at[idx].set(part)  # noqa: E731
            return (
                jax.tree_util.tree_map(put, plain_state, mean_c),
                jax.tree_util.tree_map(put, carry.branches, br_c),
                put(jnp.zeros_like(carry.remaining), rem_c),
                put(carry.anchor, anc_c),
                put(carry.noise, noi_c),
                jnp.zeros((E,), bool).at[idx].set(valid),
                (jnp.sum(need) - jnp.sum(valid)).astype(jnp.int32),
            )

        def plain_path(_):  # no environment bundles at this step: skip the bundle entirely
            return (
                plain_state,
                carry.branches,
                jnp.zeros_like(carry.remaining),
                carry.anchor,
                carry.noise,
                jnp.zeros((E,), bool),
                jnp.zeros((), jnp.int32),
            )

        # a real branch when the batch is not vmapped: steps without stiff contact cost a plain
        # step (forward and backward), and with buckets a step runs the smallest slot count that
        # holds every bundling environment
        if C >= E:
            paths = [plain_path, naive_path]
            sizes = (E,)
        else:
            sizes = self.bucket_sizes(E)
            paths = [plain_path] + [functools.partial(compacted_path, c) for c in sizes]
        if self.remat:
            paths = [paths[0]] + [jax.checkpoint(p) for p in paths[1:]]
        n_need = jnp.sum(need)
        index = jnp.where(
            n_need > 0,
            1 + jnp.minimum(jnp.searchsorted(jnp.asarray(sizes), n_need), len(sizes) - 1),
            0,
        )
        mean, br, rem, anc, noi, sel, overflow = jax.lax.switch(index, paths, None)

        def choose(a, b):
            s = sel.reshape(sel.shape + (1,) * (a.ndim - 1))
            return jnp.where(s, a, b)

        mean_state = jax.tree_util.tree_map(choose, mean, plain_state)
        data = plain.replace(**mean_state._asdict())
        branches = jax.tree_util.tree_map(choose, br, carry.branches)
        remaining = jnp.where(sel, rem, 0).astype(jnp.int32)
        anchor = choose(anc, jnp.zeros_like(carry.anchor))
        noise = choose(noi, carry.noise)
        stats = StepStats(
            triggered=jnp.sum(trig & sel).astype(jnp.int32),
            bundled=jnp.sum(sel).astype(jnp.int32),
            overflow=overflow.astype(jnp.int32),
        )
        return BundleCarry(data, branches, remaining, anchor, noise), stats

    @staticmethod
    def state(carry: BundleCarry):
        return carry.data


def bcg(**params) -> BCG:
    """Factory: ``bcg(num_branches=10, horizon=2, sigma_p=0.01, ...)``."""
    return BCG(**params)
