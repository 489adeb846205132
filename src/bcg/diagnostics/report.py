"""The gradient report: how bad are the gradients of a rollout objective on this model?

For a batch of N randomly perturbed initial states x0_b, every estimator gives per-sample
gradients g_b = dJ_b/dtheta of the default objective (:mod:`bcg.diagnostics.objective`), with
theta = (initial velocity of the target body, open-loop controls). The report gives, per
estimator:

* ``mean``: (1/N) sum_b g_b, per component;
* ``summed_variance``: sum_j Var_b(g_bj) (sample variance, ddof 1), the paper's
  gradient-variance metric, with a bootstrap interval (resampling the N samples);
* ``cosine_to_reference``: cos(mean, g_ref), g_ref = d/dtheta E_b[J_b] computed independently
  by native MuJoCo finite differences (:mod:`bcg.diagnostics.reference`);
* ``triggered_fraction``: fraction of env-steps whose contact normal force exceeded tau
  (for ``bcg``: that started a bundle); ``bundled_fraction``; ``overflow``;
* ``nan_count``: non-finite gradient entries;
* ``time_ratio_vs_analytic``: median wall time of the compiled gradient over the analytic one,
  measured in the same run.

Large batches are computed in chunks of samples (``chunk_size``; by default bounded samples x
rollouts per call, :mod:`bcg.diagnostics.chunking`), each sample with the random numbers it has
in the whole batch, so the result does not depend on the chunking.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from bcg import estimators as E
from bcg.diagnostics import chunking
from bcg.diagnostics.objective import ObjectiveSpec, default_objective
from bcg.diagnostics.reference import reference_gradient
from bcg.diagnostics.timing import interleaved_medians
from bcg.sim.model import Sim, check_differentiable
from bcg.sim.step import make_data


@dataclasses.dataclass(frozen=True)
class GradProblem:
    """A batch of initial states and an open-loop control sequence on a model."""

    sim: Sim
    spec: ObjectiveSpec
    qpos0: np.ndarray  # (N, nq)
    qvel0: np.ndarray  # (N, nv)
    ctrl: np.ndarray  # (T, nu)
    center: tuple = (None, None)  # (qpos, qvel) the batch is drawn around
    noise: tuple = (0.01, 0.05)  # (qpos_noise, qvel_noise)
    seed: int = 0
    # (n, seed) -> (qpos (n, nq), qvel (n, nv)): the batch's own distribution; None: tangent
    # noise ``noise`` around ``center`` (random_initial_states)
    sampler: Callable[[int, int], tuple[np.ndarray, np.ndarray]] | None = None

    def more_states(self, n: int, seed: int):
        """n further initial states from the same distribution (for the reference)."""
        if self.sampler is not None:
            return self.sampler(n, seed)
        return random_initial_states(self.sim, n, seed, *self.noise, *self.center)

    @property
    def batch(self) -> int:
        return self.qpos0.shape[0]

    @property
    def horizon(self) -> int:
        return self.ctrl.shape[0]

    @property
    def dim(self) -> int:
        return len(self.spec.vel_dofs) + self.ctrl.size

    def with_sim(self, sim: Sim) -> GradProblem:
        return dataclasses.replace(self, sim=sim)


def random_initial_states(
    sim: Sim, n: int, seed: int, qpos_noise: float, qvel_noise: float, qpos=None, qvel=None
):
    """x0_b = (qpos (+) noise, qvel + noise) around the first keyframe (or qpos0)."""
    m = sim.mj_model
    if qpos is None:
        qpos = m.key_qpos[0] if m.nkey else m.qpos0
        qvel = m.key_qvel[0] if m.nkey else np.zeros(m.nv)
    rng = np.random.default_rng(seed)
    import mujoco

    qp = np.tile(np.asarray(qpos, float), (n, 1))
    for b in range(n):
        mujoco.mj_integratePos(m, qp[b], qpos_noise * rng.standard_normal(m.nv), 1.0)
    qv = np.tile(np.asarray(qvel, float), (n, 1)) + qvel_noise * rng.standard_normal((n, m.nv))
    return qp, qv


def make_problem(
    sim: Sim,
    *,
    batch: int,
    horizon: int,
    seed: int = 0,
    qpos_noise=0.01,
    qvel_noise=0.05,
    ctrl=None,
    qpos=None,
    qvel=None,
) -> GradProblem:
    if batch < 2:
        raise ValueError(f"batch must be >= 2 to estimate a variance, got {batch}")
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1 control step, got {horizon}")
    spec = default_objective(sim.mj_model)
    qp, qv = random_initial_states(sim, batch, seed, qpos_noise, qvel_noise, qpos, qvel)
    u = np.zeros((horizon, sim.nu)) if ctrl is None else np.asarray(ctrl, float)
    if u.shape != (horizon, sim.nu):
        raise ValueError(f"ctrl must have shape (horizon, nu) = {(horizon, sim.nu)}, got {u.shape}")
    return GradProblem(sim, spec, qp, qv, u, (qpos, qvel), (qpos_noise, qvel_noise), seed)


def task_problem(task, stiffness, *, batch: int, seed: int = 0, horizon=None) -> GradProblem:
    """The gradient problem of a built-in task: its initial-state distribution and nominal
    controls, optionally cut to the first ``horizon`` control steps."""
    sim = task.load(stiffness=stiffness)
    qp, qv = task.initial_states(sim, batch, seed)
    ctrl = task.nominal_controls(sim)
    if horizon is not None:
        if horizon > len(ctrl):
            raise ValueError(f"--horizon {horizon} exceeds the task's horizon {task.horizon}")
        ctrl = ctrl[:horizon]
    return GradProblem(
        sim,
        default_objective(sim.mj_model),
        qp,
        qv,
        ctrl,
        center=(None, None),
        noise=(task.qpos_noise, task.qvel_noise),
        seed=seed,
        sampler=lambda n, s: task.initial_states(sim, n, s),
    )


# --------------------------------------------------------------------------- gradients


def objective_function(problem: GradProblem, est):
    """fn(mx, theta (N, dim), qpos0, qvel0, ctrl, key, offset) -> (sum_b J_b, (J, stats)) for a
    step-level estimator; the N samples are samples offset .. offset + N - 1 of the batch."""
    sim, spec = problem.sim, problem.spec
    k = len(spec.vel_dofs)
    T, nu = problem.ctrl.shape
    template = make_data(sim)
    dofs = jnp.asarray(spec.vel_dofs)

    def fn(mx, theta, qpos0, qvel0, ctrl, key, offset=0):
        s = dataclasses.replace(sim, mjx_model=mx)
        N = theta.shape[0]
        d0 = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (N,) + x.shape), template)
        d0 = d0.replace(qpos=qpos0, qvel=qvel0.at[:, dofs].add(theta[:, :k]))
        u = ctrl[None] + theta[:, k:].reshape(N, T, nu)
        dT, stats = chunking.rollout(s, est, d0, jnp.swapaxes(u, 0, 1), key, offset)
        J = spec.value(dT.qpos, dT.qvel)
        return jnp.sum(J), (J, stats)

    return fn


def gradient_function(problem: GradProblem, est):
    """Compiled g(mx, qpos0, qvel0, ctrl, key, offset=0) -> (G (N, dim), J (N,), stats): the
    N samples are samples offset .. offset + N - 1 of a batch drawn with ``key`` and get that
    batch's random numbers (pass ``offset`` as a uint32 array: one compilation for every
    chunk). ``stats``: StepStats summed over the N samples, leading axis T."""
    step_est = est if not isinstance(est, E.ObjectiveLevel) else E.PlainStep()
    fn = objective_function(problem, step_est)
    dim = problem.dim

    if isinstance(est, E.ObjectiveLevel):

        def g(mx, qpos0, qvel0, ctrl, key, offset=0):
            N = qpos0.shape[0]
            keys = jax.random.split(chunking.offset_key(key, offset), N)

            def smoothed(t, q, v, kb):  # est applied to theta -> J_b(theta) of one sample
                def Jb(th):
                    return fn(mx, th[None], q[None], v[None], ctrl, kb)[0]

                return est.transform(Jb, t, kb)

            def total(th):
                return jnp.sum(jax.vmap(smoothed)(th, qpos0, qvel0, keys))

            theta = jnp.zeros((N, dim), qpos0.dtype)
            G = jax.grad(total)(theta)
            _, (J, stats) = fn(mx, theta, qpos0, qvel0, ctrl, key, offset)
            return G, J, stats

        return jax.jit(g)

    def g(mx, qpos0, qvel0, ctrl, key, offset=0):
        theta = jnp.zeros((qpos0.shape[0], dim), qpos0.dtype)
        G, (J, stats) = jax.grad(fn, argnums=1, has_aux=True)(
            mx, theta, qpos0, qvel0, ctrl, key, offset
        )
        return G, J, stats

    return jax.jit(g)


def chunked_gradient_function(problem: GradProblem, est, chunk_size: int | None = None, *, fn=None):
    """h(mx, qpos0, qvel0, ctrl, key) -> numpy (G (N, dim), J (N,), stats): the result of
    :func:`gradient_function` on the whole batch, computed in chunks of at most ``chunk_size``
    samples, one chunk in flight at a time. None: bounded samples x rollouts per call and no
    LAPACK call large enough to deadlock jaxlib's CPU thread pool, chosen at the first call
    (:mod:`bcg.diagnostics.chunking`). ``stats`` are summed over the chunks (with a finite BCG
    capacity, each chunk has its own slots). ``fn``: a compiled :func:`gradient_function` of
    ``est`` to reuse.

    ``h.compile(mx, qpos0, qvel0, ctrl, key)`` compiles ahead of the first call: it traces and
    lowers in the calling thread and returns a function that runs XLA's compilation (which
    releases the GIL), so that the compilations of several estimators, and other work such as
    the native reference, can overlap (:func:`run_report`). The program each chunk size gets is
    the one the chunk-size check lowered: nothing is traced twice."""
    g = gradient_function(problem, est) if fn is None else fn
    sizes = {}  # batch -> chunk size
    lowered = {}  # chunk length -> jax.stages.Lowered
    compiled = {}  # chunk length -> jax.stages.Compiled

    def chunk_args(mx, qpos0, qvel0, ctrl, key, start, stop):
        q, v = jnp.asarray(qpos0[start:stop]), jnp.asarray(qvel0[start:stop])
        return mx, q, v, ctrl, key, np.uint32(start)

    def lower(args, m):
        if m not in lowered:
            lowered[m] = g.lower(*chunk_args(*args, 0, m))
        return lowered[m]

    def plan(args) -> list[tuple[int, int]]:
        N = np.shape(args[1])[0]
        if N not in sizes:
            size = chunking.chunk_size_for(est, chunk_size)
            if chunk_size is None:
                size = chunking.lapack_safe_chunk(lambda m: lower(args, m).as_text(), N, size)
            sizes[N] = size
        return chunking.chunk_bounds(N, sizes[N])

    def compile_ahead(mx, qpos0, qvel0, ctrl, key) -> Callable[[], None]:
        args = (mx, np.asarray(qpos0), np.asarray(qvel0), ctrl, key)
        todo = {stop - start: lower(args, stop - start) for start, stop in plan(args)}

        def run_compile():
            for m, low in todo.items():
                if m not in compiled:
                    compiled[m] = low.compile()

        return run_compile

    def h(mx, qpos0, qvel0, ctrl, key):
        args = (mx, np.asarray(qpos0), np.asarray(qvel0), ctrl, key)
        Gs, Js, stats = [], [], None
        for start, stop in plan(args):
            a = chunk_args(*args, start, stop)
            try:
                G, J, st = compiled.get(stop - start, g)(*a)
            except TypeError:  # arguments of another structure than compiled for: retrace
                G, J, st = g(*a)
            Gs.append(np.asarray(G))  # waits for the chunk: bounded memory
            Js.append(np.asarray(J))
            st = jax.tree_util.tree_map(np.asarray, st)
            stats = st if stats is None else jax.tree_util.tree_map(np.add, stats, st)
        return np.concatenate(Gs), np.concatenate(Js), stats

    h.compile = compile_ahead
    return h


# --------------------------------------------------------------------------- statistics


def summed_variance(G: np.ndarray) -> float:
    """sum_j Var_b(G_bj), ddof = 1."""
    return float(np.sum(np.var(G, axis=0, ddof=1)))


def variance_decomposition(G: np.ndarray) -> dict:
    """Split the summed variance of per-state gradients into a state part and a draw part.

    ``G`` has shape (K, N, ...): K draws (keys: exploration noise, branch offsets) of the
    gradients of the same N states. With g_ke = mu_e + n_ke (mu_e: the state's expected
    gradient, n_ke: zero-mean draw noise of trace covariance w_e), a one-way analysis of
    variance gives unbiased estimates of

        total   = E[summed_variance over e of g_ke]   = B + W,
        within  W = mean_e w_e                       = mean_e sum_j Var_k(G_kej),
        between B = summed variance over e of mu_e   = summed_variance(mean_k G_ke) - W / K.

    B is what is left when every state's gradient is averaged over infinitely many draws: a
    floor for any estimator that only smooths or averages within a state. ``between`` can come
    out negative from sampling noise when B << W. Needs K >= 2 and N >= 2."""
    G = np.asarray(G, np.float64)
    if G.ndim < 2 or G.shape[0] < 2 or G.shape[1] < 2:
        raise ValueError(
            f"variance_decomposition needs G of shape (K >= 2 draws, N >= 2 states, ...), "
            f"got {G.shape}"
        )
    K, N = G.shape[:2]
    G = G.reshape(K, N, -1)
    total = float(np.mean([summed_variance(G[k]) for k in range(K)]))
    within = float(np.mean(np.sum(np.var(G, axis=0, ddof=1), axis=-1)))
    between = summed_variance(G.mean(0)) - within / K
    return {"total": total, "within": within, "between": float(between), "draws": K}


def bootstrap_interval(G: np.ndarray, n_resamples: int = 4000, seed: int = 0, level=0.95):
    """Percentile bootstrap interval of :func:`summed_variance` over the N samples.

    A resample with counts c (sum c = N) has summed variance
    ``(c . diag(K) - c^T K c / N) / (N - 1)`` with the Gram matrix K = G G^T, so the cost and
    memory are those of K (N x N), whatever the gradient dimension."""
    rng = np.random.default_rng(seed)
    G = np.asarray(G, np.float64).reshape(G.shape[0], -1)
    N = G.shape[0]
    Gc = G - G.mean(0)  # centring leaves every resample's variance unchanged; better rounding
    K = Gc @ Gc.T
    idx = rng.integers(0, N, size=(n_resamples, N))
    C = np.zeros((n_resamples, N))
    np.add.at(C, (np.arange(n_resamples)[:, None], idx), 1.0)
    vals = (C @ np.diag(K) - np.sum((C @ K) * C, axis=1) / N) / (N - 1)
    lo, hi = np.percentile(vals, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if not (np.isfinite(na) and np.isfinite(nb)) or na == 0 or nb == 0:
        return float("nan")
    return float(np.dot(a, b) / (na * nb))


def run_report(
    problem: GradProblem,
    estimators: dict,
    *,
    seed: int = 0,
    reference=True,
    ref_batch_factor: int = 4,
    h_vel=1e-2,
    h_ctrl=1e-2,
    repeats: int = 3,
    progress=None,
    chunk_size: int | None = None,
) -> dict:
    """Run every estimator on ``problem`` and collect the statistics (a JSON-able dict).

    ``estimators`` maps a label to an estimator object (see :func:`bcg.estimators.make`);
    ``analytic`` is always included (it is the time unit). ``chunk_size``: samples per compiled
    call (None: per estimator, samples x rollouts per call bounded by
    :data:`bcg.diagnostics.chunking.MAX_ROLLOUTS_PER_CALL`); the gradients do not depend on it,
    the timings include every chunk.
    """
    check_differentiable(problem.sim)
    if "analytic" not in estimators:
        estimators = {"analytic": E.make("analytic"), **estimators}
    mx = problem.sim.mjx_model
    args = (
        mx,
        np.asarray(problem.qpos0),
        np.asarray(problem.qvel0),
        jnp.asarray(problem.ctrl),
        jax.random.PRNGKey(seed),
    )
    out = {
        "model": problem.sim.name,
        "stiffness": problem.sim.stiffness.label,
        "timeconst": problem.sim.stiffness.timeconst,
        "batch": problem.batch,
        "horizon": problem.horizon,
        "substeps": problem.sim.substeps,
        "physics_dt": problem.sim.physics_dt,
        "target_body": problem.spec.body_name,
        "theta_dim": problem.dim,
        "estimators": {},
    }
    # The native reference and every estimator's XLA compilation run in worker threads (both
    # release the GIL) while the main thread traces the next estimator: on a few cores a cold
    # report takes about the longest of them, not their sum.
    with ThreadPoolExecutor(max_workers=2) as workers:
        ref_job = None
        if reference:
            ref_job = workers.submit(
                problem_reference, problem, seed, ref_batch_factor, h_vel, h_ctrl
            )
        fns, jobs, started = {}, {}, {}
        for label, est in estimators.items():
            if progress:
                progress(f"{label}: compiling")
            started[label] = time.perf_counter()
            f = chunked_gradient_function(problem, est, chunk_size)
            fns[label] = f
            jobs[label] = workers.submit(f.compile(*args))
        ref = None
        if ref_job is not None:
            ref = ref_job.result()
            out["reference"] = {
                "gradient": ref.tolist(),
                "batch": problem.batch * ref_batch_factor,
                "method": "native MuJoCo central FD of the Monte-Carlo mean",
            }
        for label in estimators:
            f = fns[label]
            jobs[label].result()
            G, J, stats = jax.block_until_ready(f(*args))
            compile_s = time.perf_counter() - started[label]
            G = np.asarray(G)
            nan = int(np.sum(~np.isfinite(G)))
            Gf = np.where(np.isfinite(G), G, 0.0) if nan else G
            env_steps = problem.batch * problem.horizon
            lo, hi = bootstrap_interval(Gf, seed=seed)
            out["estimators"][label] = {
                "mean": Gf.mean(0).tolist(),
                "summed_variance": summed_variance(Gf),
                "summed_variance_ci95": [lo, hi],
                "cosine_to_reference": cosine(Gf.mean(0), ref) if ref is not None else None,
                "triggered_fraction": float(np.sum(stats.triggered)) / env_steps,
                "bundled_fraction": float(np.sum(stats.bundled)) / env_steps,
                "overflow": int(np.sum(stats.overflow)),
                "nan_count": nan,
                "objective_mean": float(np.mean(np.asarray(J))),
                "compile_seconds": compile_s,
            }
            if progress:
                progress(f"{label}: done (traced, compiled and run in {compile_s:.0f} s)")
    if progress:
        progress("timing the compiled gradients (interleaved)")
    times = interleaved_medians({k: partial(f, *args) for k, f in fns.items()}, repeats)
    for label, r in out["estimators"].items():
        r["seconds"] = times[label]
        r["time_ratio_vs_analytic"] = times[label] / times["analytic"]
    return out


def problem_reference(
    problem: GradProblem, seed=0, factor=4, h_vel=1e-2, h_ctrl=1e-2
) -> np.ndarray:
    """Native-MuJoCo FD gradient of the MC mean over a larger batch of the same distribution."""
    p = problem
    if factor > 1:
        extra_q, extra_v = p.more_states(p.batch * (factor - 1), p.seed + 7919)
        qp = np.concatenate([p.qpos0, extra_q])
        qv = np.concatenate([p.qvel0, extra_v])
    else:
        qp, qv = p.qpos0, p.qvel0
    r = reference_gradient(p.sim, p.spec, qp, qv, p.ctrl, h_vel=h_vel, h_ctrl=h_ctrl)
    return np.concatenate([np.ravel(r["grad_vel"]), np.ravel(r["grad_ctrl"])])
