"""Independent reference gradient of the gradient report: native MuJoCo + finite differences.

Nothing here uses JAX or MJX. The rollouts run on ``sim.mj_model`` (the MJCF's own, converged
constraint-solver settings, the contact stiffness of the Sim applied), so the reference measures
what the *real* simulator's objective does, not what the differentiable model thinks it does.

Objective of one initial state ``x_b = (q_b, v_b)`` (see :mod:`bcg.diagnostics.objective`)::

    J_b(dv, u) = spec.value(q_T, v_T),  (q_T, v_T) = Phi_T(q_b, v_b + S dv; u_0 .. u_{T-1})

where ``S`` scatters the offset ``dv`` (k,) into the target body's dofs ``spec.vel_dofs`` and
``Phi_T`` is ``T`` control steps of ``sim.substeps`` ``mj_step`` calls each, ``ctrl = u_t`` held
within control step ``t``. Every rollout starts from a freshly reset ``MjData`` (zero warm start,
zero activations, time 0).

Rollouts use :mod:`mujoco.rollout` (multi-threaded C) and fall back to a python ``mj_step``
loop if that module is unavailable.
"""

from __future__ import annotations

import os

import mujoco
import numpy as np

from bcg.diagnostics.objective import ObjectiveSpec
from bcg.sim.model import Sim

try:  # the multi-threaded C rollout module shipped with the mujoco package
    from mujoco import rollout as _mj_rollout
except Exception:  # pragma: no cover - depends on the mujoco build
    _mj_rollout = None

_FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS.value
# bound on the rollout module's output buffer per call (nbatch x nstep x nstate doubles)
_MAX_CHUNK_BYTES = 128 * 2**20


# ----------------------------------------------------------------------------- validation


def _as_float_array(name: str, x, ndim: int) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}") from None
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains non-finite values (nan or inf)")
    return a


def _check_inputs(sim: Sim, spec: ObjectiveSpec, qpos0, qvel0, ctrl, dvel=None):
    if not isinstance(sim, Sim):
        raise ValueError(f"sim must be a bcg.sim.Sim, got {type(sim).__name__}")
    m = sim.mj_model
    qpos0 = _as_float_array("qpos0", qpos0, 2)
    qvel0 = _as_float_array("qvel0", qvel0, 2)
    if qpos0.shape[0] < 1:
        raise ValueError("qpos0 must hold at least one initial state (N >= 1)")
    if qpos0.shape[1] != m.nq:
        raise ValueError(f"qpos0 must have shape (N, nq={m.nq}), got {qpos0.shape}")
    if qvel0.shape != (qpos0.shape[0], m.nv):
        raise ValueError(
            f"qvel0 must have shape (N={qpos0.shape[0]}, nv={m.nv}), got {qvel0.shape}"
        )
    ctrl = _as_float_array("ctrl", ctrl, 2)
    if ctrl.shape[0] < 1 or ctrl.shape[1] != m.nu:
        raise ValueError(f"ctrl must have shape (T >= 1, nu={m.nu}), got {ctrl.shape}")
    vel_dofs = np.asarray(spec.vel_dofs, dtype=int).reshape(-1)
    if np.any(vel_dofs < 0) or np.any(vel_dofs >= m.nv):
        raise ValueError(f"spec.vel_dofs {vel_dofs.tolist()} out of range for nv={m.nv}")
    if np.asarray(spec.c_qpos).shape != (m.nq,) or np.asarray(spec.c_qvel).shape != (m.nv,):
        raise ValueError(
            "spec does not match the model (c_qpos / c_qvel sizes differ from nq / nv)"
        )
    if dvel is not None:
        dvel = _as_float_array("dvel", dvel, 1)
        if dvel.shape != (vel_dofs.size,):
            raise ValueError(
                f"dvel must have shape (k={vel_dofs.size},) = len(spec.vel_dofs), got {dvel.shape}"
            )
    return qpos0, qvel0, ctrl, vel_dofs, dvel


def _check_step(name: str, h) -> float:
    try:
        h = float(h)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {h!r}") from None
    if not (np.isfinite(h) and h > 0):
        raise ValueError(f"{name} must be a positive finite number, got {h!r}")
    return h


# ----------------------------------------------------------------------------- rollouts


def _state_offsets(m: mujoco.MjModel) -> tuple[int, int]:
    """Offsets of qpos and qvel inside an mjSTATE_FULLPHYSICS state vector."""
    qpos_bit = mujoco.mjtState.mjSTATE_QPOS.value
    qvel_bit = mujoco.mjtState.mjSTATE_QVEL.value
    return (
        mujoco.mj_stateSize(m, _FULL & (qpos_bit - 1)),
        mujoco.mj_stateSize(m, _FULL & (qvel_bit - 1)),
    )


def final_states(
    sim: Sim,
    qpos0: np.ndarray,
    qvel0: np.ndarray,
    ctrl: np.ndarray,
    ctrl_index: np.ndarray | None = None,
    *,
    backend: str = "rollout",
    nthread: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Final ``(qpos_T, qvel_T)`` of R native rollouts from ``qpos0, qvel0`` (R, nq / nv).

    ``ctrl`` is one control sequence (T, nu) shared by all rollouts, or a table (P, T, nu) of
    sequences with ``ctrl_index`` (R,) selecting the row of each rollout (default: row r).
    Each rollout starts from a reset ``MjData`` with the given qpos / qvel and runs
    ``T * sim.substeps`` ``mj_step`` calls, control ``ctrl[., t]`` during control step ``t``.
    ``backend``: ``"rollout"`` (mujoco.rollout, multi-threaded) or ``"python"`` (mj_step loop).
    Inputs are assumed validated. Raises RuntimeError if MuJoCo reset a diverging simulation.
    """
    m = sim.mj_model
    ns = sim.substeps
    R = qpos0.shape[0]
    ctrl = np.asarray(ctrl, dtype=np.float64)
    if ctrl.ndim == 2:
        ctrl = ctrl[None]
        ctrl_index = np.zeros(R, dtype=int)
    elif ctrl_index is None:
        ctrl_index = np.arange(R)
    ctrl_index = np.asarray(ctrl_index, dtype=int)
    if ctrl_index.shape != (R,) or ctrl.ndim != 3:
        raise ValueError("ctrl must be (T, nu), or (P, T, nu) with ctrl_index of shape (R,)")
    T = ctrl.shape[1]
    nstep = T * ns
    if backend == "rollout" and _mj_rollout is None:
        backend = "python"
    if backend == "python":
        qT, vT, tT = _python_rollouts(m, qpos0, qvel0, ctrl, ctrl_index, ns)
    elif backend == "rollout":
        qT, vT, tT = _c_rollouts(m, qpos0, qvel0, ctrl, ctrl_index, ns, nthread)
    else:
        raise ValueError(f"unknown backend {backend!r}: use 'rollout' or 'python'")
    expected = nstep * m.opt.timestep
    bad = np.abs(tT - expected) > 1e-6 * max(1.0, expected)
    if np.any(bad):
        raise RuntimeError(
            f"{int(bad.sum())} of {R} native rollouts diverged (MuJoCo reset the simulation "
            "mid-rollout); the reference objective is undefined there. Reduce the timestep, "
            "the perturbation size or the control magnitude."
        )
    return qT, vT


def _python_rollouts(m, qpos0, qvel0, ctrl, ctrl_index, ns):
    d = mujoco.MjData(m)
    R, T = qpos0.shape[0], ctrl.shape[1]
    qT = np.empty((R, m.nq))
    vT = np.empty((R, m.nv))
    tT = np.empty(R)
    for r in range(R):
        mujoco.mj_resetData(m, d)
        d.qpos[:] = qpos0[r]
        d.qvel[:] = qvel0[r]
        for t in range(T):
            if m.nu:
                d.ctrl[:] = ctrl[ctrl_index[r], t]
            for _ in range(ns):
                mujoco.mj_step(m, d)
        qT[r] = d.qpos
        vT[r] = d.qvel
        tT[r] = d.time
    return qT, vT, tT


def _c_rollouts(m, qpos0, qvel0, ctrl, ctrl_index, ns, nthread):
    R, T = qpos0.shape[0], ctrl.shape[1]
    nstep = T * ns
    nstate = mujoco.mj_stateSize(m, _FULL)
    oq, ov = _state_offsets(m)

    d = mujoco.MjData(m)
    mujoco.mj_resetData(m, d)
    base = np.empty(nstate)
    mujoco.mj_getState(m, d, base, _FULL)

    if nthread is None:
        nthread = os.cpu_count() or 1
    nthread = max(1, min(int(nthread), R))
    datas = [mujoco.MjData(m) for _ in range(nthread)]
    data_arg = datas if nthread > 1 else datas[0]

    per_row = nstep * (nstate + m.nu) * 8
    chunk = max(1, min(R, _MAX_CHUNK_BYTES // max(per_row, 1)))
    qT = np.empty((R, m.nq))
    vT = np.empty((R, m.nv))
    tT = np.empty(R)
    with _mj_rollout.Rollout(nthread=nthread if nthread > 1 else 0) as pool:
        for s in range(0, R, chunk):
            e = min(R, s + chunk)
            init = np.tile(base, (e - s, 1))
            init[:, oq : oq + m.nq] = qpos0[s:e]
            init[:, ov : ov + m.nv] = qvel0[s:e]
            if m.nu:
                control = np.ascontiguousarray(np.repeat(ctrl[ctrl_index[s:e]], ns, axis=1))
            else:
                control = None
            state, _ = pool.rollout(m, data_arg, init, control, nstep=nstep)
            last = state[:, -1, :]
            qT[s:e] = last[:, oq : oq + m.nq]
            vT[s:e] = last[:, ov : ov + m.nv]
            tT[s:e] = last[:, 0]
    return qT, vT, tT


# ----------------------------------------------------------------------------- public API


def native_objective(
    sim: Sim,
    spec: ObjectiveSpec,
    qpos0,
    qvel0,
    dvel,
    ctrl,
    *,
    backend: str = "rollout",
    nthread: int | None = None,
) -> np.ndarray:
    """Per-state objective ``J_b(dvel, ctrl)`` (N,) of native MuJoCo rollouts.

    For each initial state b: ``qpos = qpos0[b]``, ``qvel = qvel0[b]`` with
    ``qvel[spec.vel_dofs] += dvel``, then ``T = len(ctrl)`` control steps of ``sim.substeps``
    ``mj_step`` calls with ``data.ctrl = ctrl[t]``; returns ``spec.value(qpos_T, qvel_T)``.

    Args:
      sim: the model (``sim.mj_model`` is used, full solver iterations).
      spec: objective (``spec.value``, ``spec.vel_dofs``).
      qpos0: (N, nq) initial positions.
      qvel0: (N, nv) initial velocities.
      dvel: (k,) offset added to ``qvel[spec.vel_dofs]`` of every state, k = len(vel_dofs).
      ctrl: (T, nu) open-loop controls (nu may be 0: shape (T, 0)).
      backend: ``"rollout"`` (mujoco.rollout, default) or ``"python"`` (mj_step loop).
      nthread: rollout threads (default: all CPUs).
    """
    qpos0, qvel0, ctrl, vel_dofs, dvel = _check_inputs(sim, spec, qpos0, qvel0, ctrl, dvel)
    qv = qvel0.copy()
    qv[:, vel_dofs] += dvel
    qT, vT = final_states(sim, qpos0, qv, ctrl, backend=backend, nthread=nthread)
    return np.asarray(spec.value(qT, vT), dtype=np.float64)


def reference_gradient(
    sim: Sim,
    spec: ObjectiveSpec,
    qpos0,
    qvel0,
    ctrl,
    h_vel: float = 1e-2,
    h_ctrl: float = 1e-2,
    *,
    backend: str = "rollout",
    nthread: int | None = None,
) -> dict:
    """Central finite-difference gradient of the Monte-Carlo mean objective (native MuJoCo).

    With the N initial states fixed (common random numbers: the same states for the + and -
    evaluation), the parameters are ``theta = (dv, u)``: an offset ``dv`` (k,) of the target
    body's initial joint velocities ``qvel[spec.vel_dofs]`` and the open-loop controls
    ``u`` (T, nu). The mean objective is

        Jbar(dv, u) = (1/N) sum_{b=1..N} J_b(dv, u)          (see :func:`native_objective`)

    and, evaluated at ``dv = 0`` and the given controls ``u = ctrl``,

        grad_vel[i]    = [Jbar(+h_vel e_i, u) - Jbar(-h_vel e_i, u)] / (2 h_vel),   i < k
        grad_ctrl[t,j] = [Jbar(0, u + h_ctrl E_tj) - Jbar(0, u - h_ctrl E_tj)] / (2 h_ctrl)

    (``e_i``: unit vector in R^k, ``E_tj``: unit (T, nu) matrix). Error: O(h^2) for smooth
    J; through stiff contact the FD quotient is a *smoothed* (bundled over [-h, h]) slope, which
    is the quantity a useful gradient should approximate. All 2 (k + T nu) + 1 evaluations of
    the N states run in batched ``mujoco.rollout`` calls.

    Returns:
      dict with ``grad_vel`` (k,), ``grad_ctrl`` (T, nu) and ``value`` = Jbar(0, u) (float).
    """
    qpos0, qvel0, ctrl, vel_dofs, _ = _check_inputs(sim, spec, qpos0, qvel0, ctrl)
    h_vel = _check_step("h_vel", h_vel)
    h_ctrl = _check_step("h_ctrl", h_ctrl)
    N = qpos0.shape[0]
    T, nu = ctrl.shape
    k = vel_dofs.size
    P = 1 + 2 * k + 2 * T * nu  # nominal, +-vel, +-ctrl

    # perturbation table: rows p of (dvel offset, control sequence)
    dv = np.zeros((P, k))
    us = np.broadcast_to(ctrl, (P, T, nu)).copy()
    p = 1
    for i in range(k):
        dv[p, i] = h_vel
        dv[p + 1, i] = -h_vel
        p += 2
    for t in range(T):
        for j in range(nu):
            us[p, t, j] += h_ctrl
            us[p + 1, t, j] -= h_ctrl
            p += 2

    # expand to P * N rollouts (perturbation-major)
    qp = np.tile(qpos0, (P, 1))
    qv = np.tile(qvel0, (P, 1))
    qv.reshape(P, N, -1)[:, :, vel_dofs] += dv[:, None, :]
    rows = np.repeat(np.arange(P), N)
    qT, vT = final_states(sim, qp, qv, us, rows, backend=backend, nthread=nthread)
    J = np.asarray(spec.value(qT, vT), dtype=np.float64).reshape(P, N)
    Jbar = J.mean(axis=1)

    pm = Jbar[1:].reshape(-1, 2)  # (+, -) pairs
    slopes = pm[:, 0] - pm[:, 1]
    grad_vel = slopes[:k] / (2.0 * h_vel)
    grad_ctrl = (slopes[k:] / (2.0 * h_ctrl)).reshape(T, nu)
    return {"grad_vel": grad_vel, "grad_ctrl": grad_ctrl, "value": float(Jbar[0])}
