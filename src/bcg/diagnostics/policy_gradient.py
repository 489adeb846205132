"""Closed-loop (policy-parameter) gradients: where stiff contact makes first-order learning fail.

The open-loop gradient report differentiates w.r.t. initial velocities and open-loop controls.
Learning differentiates w.r.t. the parameters of a *feedback* policy, and feedback through stiff
contact is where analytic gradients explode (SHAC on the gated pogo: actor gradient norms with a
median of 120). This module measures that case with a linear-tanh policy on the full state,

    u_t = tanh(W [qpos_t, qvel_t] + b),    theta = (W, b),

and the objective of one initial state b, the mean height of the objective body over the rollout,

    J_b(theta) = (1/T) sum_{t=1..T} c . qpos_t        (c: first free / slide body's height),

computed through any step estimator (per-sample gradients: theta is tiled per environment and
the gradient of sum_b J_b(theta_b) gives every d J_b / d theta_b in one backward pass; large
batches run in chunks of samples, :mod:`bcg.diagnostics.chunking`, with the same per-sample
random numbers as one call). The reference is independent: native MuJoCo (the Sim's
``mj_model``, full solver iterations), closed-loop rollouts in numpy, central finite
differences of the Monte-Carlo mean over a larger batch with common random numbers,

    g_ref_k = [mean_b J_b(theta + h e_k) - mean_b J_b(theta - h e_k)] / (2 h).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg import estimators as E
from bcg.diagnostics import chunking
from bcg.diagnostics.objective import default_objective
from bcg.sim.model import Sim
from bcg.sim.native_health import mujoco_blew_up
from bcg.sim.step import make_data


@dataclasses.dataclass(frozen=True)
class PolicyProblem:
    """Initial states, a nominal linear-tanh policy and a horizon on a model."""

    sim: Sim
    qpos0: np.ndarray  # (N, nq)
    qvel0: np.ndarray  # (N, nv)
    theta: np.ndarray  # (nu * (nq + nv + 1),): W row-major, then b
    horizon: int

    def __post_init__(self):
        nq, nv, nu = self.sim.nq, self.sim.nv, self.sim.nu
        if nu == 0:
            raise ValueError("the policy-gradient report needs a model with actuators (nu = 0)")
        if self.theta.shape != (nu * (nq + nv + 1),):
            raise ValueError(f"theta must have nu * (nq + nv + 1) = {nu * (nq + nv + 1)} entries")
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon}")

    @property
    def height_qpos(self) -> np.ndarray:
        """c: the qpos weights of the objective body's height."""
        return np.asarray(default_objective(self.sim.mj_model).c_qpos)


def _split(theta, nq, nv, nu):
    W = theta[: nu * (nq + nv)].reshape(nu, nq + nv)
    return W, theta[nu * (nq + nv) :]


def policy_ctrl(theta, qpos, qvel, nu):
    """u = tanh(W [qpos, qvel] + b) (one state; numpy or jax arrays)."""
    lib = jnp if isinstance(theta, jax.Array) else np
    W, b = _split(theta, qpos.shape[-1], qvel.shape[-1], nu)
    return lib.tanh(W @ lib.concatenate([qpos, qvel]) + b)


def gradient_function(problem: PolicyProblem, est):
    """Compiled ``g(theta_tiled (N, P), qpos0, qvel0, key, offset=0) -> (G (N, P), J (N,),
    bundled)``: the samples are samples ``offset .. offset + N - 1`` of a larger batch drawn
    with ``key`` (their random numbers are those of that batch; pass ``offset`` as a uint32
    array so that every chunk reuses one compilation)."""
    sim, T = problem.sim, problem.horizon
    nu = sim.nu
    c = jnp.asarray(problem.height_qpos)
    template = make_data(sim)

    def total(theta, qpos0, qvel0, key, offset):
        N = theta.shape[0]
        d0 = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (N,) + x.shape), template)
        d0 = d0.replace(qpos=qpos0, qvel=qvel0)

        def body(carry, k):
            d = est.state(carry)
            u = jax.vmap(lambda th, q, v: policy_ctrl(th, q, v, nu))(theta, d.qpos, d.qvel)
            carry, stats = est.step(sim, carry, u, chunking.offset_key(k, offset))
            return carry, (est.state(carry).qpos @ c, stats.bundled)

        carry0 = est.init(sim, d0)
        _, (z, bundled) = jax.lax.scan(jax.checkpoint(body), carry0, jax.random.split(key, T))
        J = jnp.mean(z, axis=0)
        return jnp.sum(J), (J, jnp.sum(bundled))

    def g(theta, qpos0, qvel0, key, offset=0):
        G, (J, bundled) = jax.grad(total, has_aux=True)(theta, qpos0, qvel0, key, offset)
        return G, J, bundled

    return jax.jit(g)


def gradients(problem: PolicyProblem, est, key, *, chunk_size: int | None = None, fn=None):
    """Per-sample gradients of every initial state of ``problem`` at its nominal theta, in
    chunks of at most ``chunk_size`` samples. None: bounded samples x branches per call and no
    LAPACK call large enough to deadlock jaxlib's CPU thread pool
    (:mod:`bcg.diagnostics.chunking`). Returns numpy ``(G (N, P), J (N,), bundled env-steps)``,
    the same as one call of :func:`gradient_function` on the whole batch. ``fn``: a compiled
    :func:`gradient_function` of ``est`` to reuse."""
    if isinstance(est, E.ObjectiveLevel):
        raise ValueError("the policy-gradient report takes step-level estimators")
    g = gradient_function(problem, est) if fn is None else fn
    N, P = problem.qpos0.shape[0], problem.theta.size
    theta = jnp.asarray(problem.theta)

    def args(start, stop):
        return (
            jnp.broadcast_to(theta, (stop - start, P)),
            jnp.asarray(problem.qpos0[start:stop]),
            jnp.asarray(problem.qvel0[start:stop]),
            key,
            np.uint32(start),
        )

    size = chunking.chunk_size_for(est, chunk_size)
    if chunk_size is None:
        size = chunking.lapack_safe_chunk(lambda m: g.lower(*args(0, m)).as_text(), N, size)
    Gs, Js, bundled = [], [], 0
    for start, stop in chunking.chunk_bounds(N, size):
        G, J, b = g(*args(start, stop))
        Gs.append(np.asarray(G))  # waits for the chunk: one call in flight, bounded memory
        Js.append(np.asarray(J))
        bundled += int(b)
    return np.concatenate(Gs), np.concatenate(Js), bundled


def native_objective(problem: PolicyProblem, theta, qpos0, qvel0) -> np.ndarray:
    """J_b(theta) of every initial state, native MuJoCo closed loop (numpy policy). Raises
    RuntimeError when MuJoCo reset a diverging rollout (:mod:`bcg.sim.native_health`)."""
    m = problem.sim.mj_model
    d = mujoco.MjData(m)
    c = problem.height_qpos
    out = np.empty(qpos0.shape[0])
    for i in range(qpos0.shape[0]):
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = qpos0[i], qvel0[i]
        acc = 0.0
        for _ in range(problem.horizon):
            d.ctrl[:] = policy_ctrl(theta, d.qpos, d.qvel, m.nu)
            for _ in range(problem.sim.substeps):
                mujoco.mj_step(m, d)
            acc += float(c @ d.qpos)
        if mujoco_blew_up(d):
            raise RuntimeError(
                f"the native rollout from initial state {i} diverged (MuJoCo reset the "
                "simulation mid-rollout); the reference objective is undefined there"
            )
        out[i] = acc / problem.horizon
    return out


def reference_gradient(problem: PolicyProblem, qpos0, qvel0, h: float = 1e-2) -> np.ndarray:
    """Central FD (step h) of the native Monte-Carlo mean, common random numbers."""
    theta = np.asarray(problem.theta, np.float64)
    g = np.empty_like(theta)
    for k in range(theta.size):
        e = np.zeros_like(theta)
        e[k] = h
        hi = native_objective(problem, theta + e, qpos0, qvel0).mean()
        lo = native_objective(problem, theta - e, qpos0, qvel0).mean()
        g[k] = (hi - lo) / (2 * h)
    return g


def report(
    problem: PolicyProblem,
    estimators: dict,
    ref_states,
    *,
    seed: int = 0,
    h=1e-2,
    on_result=None,
    chunk_size: int | None = None,
):
    """Per estimator: mean gradient and its standard error, summed variance, cosine to the native
    reference, mean J, bundled fraction, NaN count. ``ref_states``: (qpos, qvel) of the
    reference's larger batch. ``on_result(name, entry)`` is called as each estimator finishes
    (long runs print as they go). ``chunk_size``: samples per compiled call (None: bounded
    samples x branches, see :func:`gradients`; the result does not depend on it)."""
    from bcg.diagnostics.report import bootstrap_interval, cosine, summed_variance

    ref = reference_gradient(problem, *ref_states, h=h)
    N = problem.qpos0.shape[0]
    out = {"reference": ref.tolist(), "estimators": {}}
    for name, est in estimators.items():
        if isinstance(est, E.ObjectiveLevel):
            raise ValueError(f"{name}: the policy-gradient report takes step-level estimators")
        G, J, bundled = gradients(problem, est, jax.random.PRNGKey(seed), chunk_size=chunk_size)
        G = np.asarray(G, np.float64)
        finite = np.all(np.isfinite(G), axis=1)
        Gf = G[finite]
        out["estimators"][name] = {
            "mean": Gf.mean(0).tolist(),
            "standard_error": (Gf.std(0, ddof=1) / np.sqrt(max(len(Gf), 1))).tolist(),
            "summed_variance": summed_variance(Gf),
            "summed_variance_ci95": bootstrap_interval(Gf, seed=seed),
            "cosine_to_reference": cosine(Gf.mean(0), ref),
            "objective_mean": float(np.mean(np.asarray(J))),
            "bundled_fraction": float(bundled) / (N * problem.horizon),
            "nan_count": int((~finite).sum()),
        }
        if on_result is not None:
            on_result(name, out["estimators"][name])
    return out
