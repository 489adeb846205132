"""Training harness for the gradient-based learners (SHAC, BPTT): loop, logging, checkpoints,
resume, plots and evaluation.

A run directory (its format: :mod:`bcg.learners.rundir`, whose names this module re-exports)
holds

    run.json          how to rebuild the learner (task, stiffness, learner, estimator, sizes)
    metrics.csv       one row per iteration (iteration, env_steps, wall_time, metrics...)
    tb/               TensorBoard event files (tensorboardX), same scalars, step = iteration
    checkpoints/<k>/  orbax checkpoints: the learner state pytree (parameters, optimiser
                      moments, normalisers, environments, RNG key, counters, a learned
                      reward's parameters and moments, e.g. ADD's) + iteration,
                      env steps and wall time
    training.png      episode return vs env steps and vs wall time
    eval.json         deterministic-policy evaluation of the initial and the final policy

``resume=True`` restores the newest checkpoint and continues from it; rows of metrics.csv
beyond that checkpoint (written before a kill) are dropped, so the CSV continues without
duplicates. Because the state includes the RNG key and the environments, a resumed run
reproduces the uninterrupted one exactly (same compiled program on the same devices).

``init_from`` (``bcg train --init-from``) starts a new run as a further *stage* of another:
its whole learner state (parameters, optimiser moments, normalisers, environments, RNG key) is
restored from that run's newest (or a given) checkpoint, while the env, e.g. its reward weights,
is this run's. Iterations count from 1 again, and so does the learner's own counter: the new
stage runs its own learning-rate schedule (from ``actor_lr`` down to ``lr_end`` over its
``--iterations``) and its ``critic_warmup``; ``env_steps`` and ``wall_time`` continue from the
source checkpoint's, so that curves of the stages join on the total budget. If only the
environment states differ in shape (e.g. this run's env carries per-environment randomisation
draws), the rest is restored and the environments start afresh. From a *packed*
policy (:mod:`bcg.transfer.pack`, which keeps only actor and observation normaliser) the new
run takes those two and starts everything else afresh (critic, optimiser moments, return
normaliser, environments); ``SHACConfig.critic_warmup`` then holds the actor for the first
iterations while the fresh critic learns the policy's values. A packed policy of a shorter
observation whose features this env extends at the end (``G1Tracking(observe_command=True)``)
is widened with zero input weights for the new features
(:func:`bcg.transfer.pack.widen_observation_params`): it starts as the same policy.

Devices: ``train(..., devices=N)`` (``bcg train --devices N``; default all of
``jax.devices()``) shards the environment batch over N devices (``learner.sharded``, see
:mod:`bcg.learners.parallel`); ``num_envs`` must be divisible by N. The iteration is compiled
once for the mesh with the state's shardings as input and output shardings. A checkpoint
holds plain (gathered) arrays, so a run may be resumed on another device count (equal up to
float summation order, not bit for bit).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bcg.envs.base import ContactEnv
from bcg.learners.rundir import (  # noqa: F401  (the run directory's format, re-exported)
    CKPT_DIR,
    CSV_FILE,
    EVAL_FILE,
    PLOT_FILE,
    RUN_FILE,
    checkpoint_manager,
    latest_step,
    load_packed_params,
    payload,
    read_rows,
    restore_checkpoint,
    save_checkpoint,
    split_checkpoint_path,
    transplant,
    write_rows,
    write_run,
)

_manager = checkpoint_manager  # the names tests and scripts used


# ---------------------------------------------------------------------------- evaluation


def evaluate(env: ContactEnv, policy, params, episodes: int, key, episode_length=None) -> dict:
    """Run the deterministic ``policy(params, obs (N, n)) -> (N, A)`` for ``episodes`` episodes
    with the plain (analytic) step, each until its first termination or ``episode_length``.

    Returns mean / per-episode returns and lengths, plus the mean over alive steps and the max
    of every entry of ``env.eval_metrics(data)``. An env with a learned reward (ADD) is
    evaluated on its fixed reward (``env.evaluation_env``).
    """
    env = env.evaluation_env
    T = int(episode_length or env.episode_length)

    @jax.jit
    def run(params, key):
        d0 = jax.vmap(env.initial_data)(jax.random.split(key, episodes))

        def body(c, _):
            d, alive, ret, n = c
            a = policy(params, jax.vmap(env.observe)(d))
            nd, r, term = jax.vmap(env.plain_step)(d, a)
            ret = ret + jnp.where(alive, r, 0.0).astype(jnp.float32)
            n = n + alive.astype(jnp.int32)
            m = jax.vmap(env.eval_metrics)(nd)
            return (nd, alive & ~term, ret, n), (m, alive)

        z = jnp.zeros((episodes,), jnp.float32)
        init = (d0, jnp.ones((episodes,), bool), z, jnp.zeros((episodes,), jnp.int32))
        (_, _, ret, n), (m, alive) = jax.lax.scan(body, init, None, T)
        w = alive.astype(jnp.float32)
        summ = {}
        for k, v in m.items():
            summ[f"{k}_mean"] = jnp.sum(v * w) / jnp.sum(w)
            summ[f"{k}_max"] = jnp.max(jnp.where(alive, v, -jnp.inf))
        return ret, n, summ

    ret, n, summ = run(params, key)
    ret, n = np.asarray(ret), np.asarray(n)
    out = {
        "mean_return": float(ret.mean()),
        "mean_length": float(n.mean()),
        "returns": [float(x) for x in ret],
        "lengths": [int(x) for x in n],
    }
    out.update({k: float(v) for k, v in summ.items()})
    return out


# ---------------------------------------------------------------------------- run.json


def _restart_schedule(state):
    """``state`` with its iteration counter at 0: a new stage runs its own learning-rate
    schedule (decay over its ``--iterations``) and critic warm-up, not the rest of the source's."""
    if hasattr(state, "iteration"):
        state = dataclasses.replace(state, iteration=jnp.zeros_like(state.iteration))
    return state


def _init_from_packed(learner, state, src: Path):
    """``(state, env_steps, wall_time)``: ``state`` with the packed policy of ``src``
    (:mod:`bcg.transfer.pack`); env steps and wall time continue from the packed ones (wall
    time: the source's metrics row of the packed iteration, 0 if it has none)."""
    packed = json.loads((src / "run.json").read_text()).get("packed", {})
    state = learner.with_policy_params(
        state, load_packed_params(src, learner, widen_observation=True)
    )
    it = packed.get("iteration")
    walls = [float(r["wall_time"]) for r in read_rows(src / CSV_FILE) if int(r["iteration"]) == it]
    return state, int(packed.get("env_steps", 0)), walls[-1] if walls else 0.0


# ---------------------------------------------------------------------------- logging


def _column(rows: list[dict], key: str) -> np.ndarray | None:
    """A metrics.csv column as floats (None when no row has it)."""
    if not any(r.get(key) not in (None, "") for r in rows):
        return None
    vals = [r.get(key) for r in rows]
    return np.array([float("nan") if v in (None, "") else float(v) for v in vals])


def plot_training(rows: list[dict], path: Path, title: str = "") -> Path:
    """The training curves as a PNG: the return (training episodes; PPO: its evaluations) and
    the mean step reward vs env steps and vs wall time, and, where logged, the fraction of
    env-steps masked out (diverged environments) and the running fraction of skipped actor
    updates vs env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = _column(rows, "env_steps")
    wall = _column(rows, "wall_time")
    if wall is None:
        wall = _column(rows, "wall_time_s")
    ret, label = _column(rows, "episode_return"), "episode return (last finished)"
    if ret is None:
        ret, label = _column(rows, "eval_return"), "evaluation return"
    rew = _column(rows, "reward_mean")
    masked, skipped = _column(rows, "masked_fraction"), _column(rows, "actor_skipped")
    health = masked is not None or skipped is not None
    fig, axes = plt.subplots(1, 3 if health else 2, figsize=(15 if health else 10, 3.8))
    for ax, x, xl in ((axes[0], steps, "env steps"), (axes[1], wall, "wall time (s)")):
        if ret is not None:
            ax.plot(x, ret, color="C0", label=label)
        ax.set_xlabel(xl)
        ax.set_ylabel(label, color="C0")
        if rew is not None:
            ax2 = ax.twinx()
            ax2.plot(x, rew, color="C1", alpha=0.6, label="mean step reward")
            ax2.set_ylabel("mean step reward", color="C1")
        ax.grid(alpha=0.3)
    if health:
        ax = axes[2]
        if masked is not None:
            ax.plot(steps, masked, color="C3", label="masked env-steps (diverged envs)")
        if skipped is not None:
            running = np.cumsum(skipped) / np.arange(1, len(skipped) + 1)
            ax.plot(steps, running, color="C2", label="skipped actor updates (running)")
        ax.set_xlabel("env steps")
        ax.set_ylabel("fraction")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------- training


def compile_iteration(learner, state):
    """``(state, step_fn)``: ``state`` committed to the learner's devices and the jitted
    iteration with the same input and output shardings (metrics replicated).

    Without a mesh the state goes to the first device. Committed inputs with the shardings of
    the outputs: otherwise the second call would compile the iteration again (jit specialises
    on committed vs uncommitted inputs and on their shardings).
    """
    if learner.mesh is None:
        return jax.device_put(state, jax.devices()[0]), jax.jit(learner.iteration)
    from bcg.learners.parallel import replicated

    shardings = learner.state_shardings(state)
    step_fn = jax.jit(
        learner.iteration,
        in_shardings=(shardings,),
        out_shardings=(shardings, replicated(learner.mesh)),
    )
    return jax.device_put(state, shardings), step_fn


def train(
    learner,
    run_dir,
    *,
    seed: int = 0,
    checkpoint_every: int = 50,
    resume: bool = False,
    progress: bool = True,
    eval_episodes: int = 8,
    run_config: dict | None = None,
    on_iteration=None,
    devices=None,
    init_from=None,
    stages=None,
) -> dict:
    """Train ``learner`` for ``learner.iterations`` iterations, logging into ``run_dir``.

    ``stages``: a schedule (:mod:`bcg.learners.schedule`), ``[(0, learner), (K1, learner_1),
    ...]``: after K completed iterations the iteration is that of the learner paired with the
    largest K not above it (same networks and state layout; e.g. other reward weights or
    learning rate), its state carried over by :func:`transplant` (environment states afresh
    if their shapes differ), exactly as a resumed run restores it, so a run killed anywhere
    resumes to the same result.

    ``devices``: shard the environment batch over this many devices (or this device list);
    None keeps the learner's mesh if it has one, else uses every device of ``jax.devices()``.

    ``on_iteration(iteration, metrics)`` is called after each iteration's logging and
    checkpointing (a test hook). ``init_from``: a run directory or one of its
    ``checkpoints/<k>`` to start from (module docstring). Returns a summary dict (also the last
    CSV row and evals).
    """
    from tensorboardX import SummaryWriter
    from tqdm import tqdm

    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    stages = [(0, learner)] if stages is None else [(int(k), lr) for k, lr in stages]
    if stages[0][0] != 0 or any(a >= b for (a, _), (b, _) in zip(stages, stages[1:], strict=False)):
        raise ValueError(f"stages must start at 0 and increase, got {[k for k, _ in stages]}")
    if devices is not None or learner.mesh is None:
        stages = [(k, lr.sharded(devices)) for k, lr in stages]  # num_envs not divisible: error
    else:  # the learner's mesh for every phase
        stages = [
            (k, lr if lr.mesh is not None else lr.sharded(learner.mesh.devices)) for k, lr in stages
        ]

    def stage_at(done: int):
        """The learner that runs the iteration after ``done`` completed ones."""
        return [lr for k, lr in stages if k <= done][-1]

    learner = stages[0][1]
    run_dir = Path(run_dir)
    if not resume and latest_step(run_dir) is not None:  # before run.json is overwritten
        raise ValueError(
            f"{run_dir} already holds checkpoints: pass --resume or choose a new --run-dir"
        )
    if run_config is not None:
        write_run(run_dir, run_config)
    run_dir.mkdir(parents=True, exist_ok=True)
    csv_path = run_dir / CSV_FILE
    n_iter = learner.iterations
    key = jax.random.PRNGKey(seed)
    k_init, k_eval = jax.random.split(key)

    if resume:
        if latest_step(run_dir) is None:
            raise FileNotFoundError(f"--resume: no checkpoint in {run_dir / CKPT_DIR}")
        learner = stage_at(latest_step(run_dir))  # checkpoints are named by iteration
        state = learner.init(k_init)
        state, start, env_steps, wall0 = restore_checkpoint(run_dir, state)
        rows = [r for r in read_rows(csv_path) if int(r["iteration"]) <= start]
    else:
        state = learner.init(k_init)
        start, env_steps, wall0, rows = 0, 0, 0.0, []
        if init_from is not None:
            src, step = split_checkpoint_path(init_from)
            if step is None and latest_step(src) is None and (src / "policy.npz").exists():
                state, env_steps, wall0 = _init_from_packed(learner, state, src)
            else:
                state, _, env_steps, wall0 = restore_checkpoint(src, state, step, strict=True)
                state = _restart_schedule(state)

    state, step_fn = compile_iteration(learner, state)
    evals = {}
    if (run_dir / EVAL_FILE).exists() and resume:
        evals = json.loads((run_dir / EVAL_FILE).read_text())
    if eval_episodes > 0 and "initial" not in evals:
        evals["initial"] = evaluate(
            stages[0][1].env, learner.policy, learner.policy_params(state), eval_episodes, k_eval
        )

    mgr = checkpoint_manager(run_dir)
    writer = SummaryWriter(str(run_dir / "tb"), purge_step=start + 1 if resume else None)
    columns = list(rows[0].keys()) if rows else None
    t0 = time.time()
    bar = tqdm(range(start, n_iter), initial=start, total=n_iter, disable=not progress)
    m = {}
    for it in bar:
        if stage_at(it) is not learner:  # the schedule's next phase: carry the state over
            learner = stage_at(it)
            saved = payload(jax.device_get(state), it, 0, 0.0)["leaves"]
            state = transplant(saved, learner.init(k_init), source=f"iteration {it}'s state")
            state, step_fn = compile_iteration(learner, state)
        state, metrics = step_fn(state)
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
        done_it = it + 1
        env_steps += learner.env_steps_per_iteration
        wall = wall0 + time.time() - t0
        m = {"iteration": done_it, "env_steps": env_steps, "wall_time": round(wall, 3), **metrics}
        if columns is None:
            columns = list(m.keys())
        rows.append(m)
        write_rows(csv_path, rows, columns)  # whole file: small, and never half-written rows
        for k, v in m.items():
            if k != "iteration" and math.isfinite(float(v)):
                writer.add_scalar(k, float(v), done_it)
        writer.flush()
        if done_it % checkpoint_every == 0 or done_it == n_iter:
            save_checkpoint(mgr, state, done_it, env_steps, wall)
        bar.set_postfix(
            ret=f"{metrics.get('episode_return', math.nan):.1f}",
            r=f"{metrics.get('reward_mean', math.nan):.2f}",
        )
        if on_iteration is not None:
            on_iteration(done_it, m)
    bar.close()
    writer.close()
    mgr.close()

    if eval_episodes > 0:
        evals["final"] = evaluate(
            learner.env, learner.policy, learner.policy_params(state), eval_episodes, k_eval
        )
        (run_dir / EVAL_FILE).write_text(json.dumps(evals, indent=2))
    png = plot_training(rows, run_dir / PLOT_FILE, title=run_dir.name) if rows else None
    return {"state": state, "last": m, "evals": evals, "plot": png, "rows": rows}
