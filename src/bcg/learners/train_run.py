"""Train a described run (:func:`bcg.learners.run_config.prepare_run`) into its folder: SHAC /
BPTT through :func:`bcg.learners.harness.train` on the run's devices, PPO through
:func:`bcg.learners.ppo.train_ppo` (brax, plain step); and the lines that sum a finished run
up. The caller sets JAX's precision (``run["float64"]``) first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def train_run(
    run: dict,
    run_dir: Path,
    *,
    resume: bool = False,
    checkpoint_every: int = 25,
    eval_episodes: int = 8,
    devices: int | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict | None:
    """Train ``run`` into ``run_dir``; ``log`` gets a line naming the sizes and devices before
    the first iteration. ``run.json`` is written as a complete record
    (:func:`bcg.learners.record.with_resolved`). Returns :func:`bcg.learners.harness.train`'s
    result (None for PPO)."""
    from bcg.learners import harness, record, registry

    if run["learner"] == "ppo":
        from bcg.learners import ppo

        env = registry.make_run_env(run)
        harness.write_run(run_dir, record.with_resolved(run, env))
        ppo.train_ppo(
            env,
            num_timesteps=run["timesteps"],
            seed=run["seed"],
            run_dir=run_dir,
            num_envs=run["num_envs"],
            resume=resume,
            progress=progress,
            **run.get("config", {}),
        )
        return None
    from bcg.learners.schedule import phase_starts, run_at

    stages = []  # a scheduled run: one learner per phase, each phase's settings recorded
    for i, k in enumerate(phase_starts(run)):
        env, learner = registry.build(run_at(run, k))
        learner = learner.sharded(devices)  # None: all devices; ValueError if not divisible
        if i == 0:
            run = record.with_resolved(run, learner.env, learner, learner.estimator)
        else:
            done = record.with_resolved(run_at(run, k), learner.env, learner, learner.estimator)
            run["schedule"] = [dict(ph) for ph in run["schedule"]]
            run["schedule"][i - 1]["resolved"] = done["resolved"]
        stages.append((k, learner))
    learner = stages[0][1]
    n_dev = learner.mesh.devices.size
    steps = learner.env_steps_per_iteration // run["num_envs"]
    if log is not None:
        log(
            f"[bcg train] {run['task']} ({env.sim.stiffness.label} contact): {run['learner']} + "
            f"{run['estimator']}, {run['num_envs']} envs x {steps}"
            f" steps per iteration on {n_dev} device(s), {run['iterations']} iterations -> "
            f"{run_dir}"
        )
    return harness.train(
        learner,
        run_dir,
        seed=run["seed"],
        checkpoint_every=checkpoint_every,
        resume=resume,
        progress=progress,
        eval_episodes=eval_episodes,
        run_config=run,
        init_from=run.get("init_from"),
        stages=stages if len(stages) > 1 else None,
    )


def summary_lines(out: dict) -> list[str]:
    """The last iteration, skipped actor updates and masked env-steps over the run, and the
    initial / final evaluations of :func:`bcg.learners.harness.train`'s result."""
    last, ev, rows = out["last"], out["evals"], out["rows"]
    lines = []
    if last:
        n = len(rows)
        skipped = sum(float(r.get("actor_skipped") or 0) for r in rows)
        masked = sum(float(r.get("masked_fraction") or 0) for r in rows) / max(n, 1)
        lines.append(
            f"iteration {last['iteration']}: env steps {last['env_steps']}, wall time "
            f"{last['wall_time']:.0f} s, training episode return {last['episode_return']:.2f}; "
            f"over the run: skipped actor updates {skipped:.0f}/{n}, masked env-steps "
            f"{masked:.2%} (diverged environments)"
        )
    if "initial" in ev and "final" in ev:
        for k in ("initial", "final"):
            e = ev[k]
            extra = "".join(f", {n} {v:.3f}" for n, v in e.items() if n.endswith(("_mean", "_max")))
            lines.append(
                f"eval {k:7s}: return {e['mean_return']:.2f}, length {e['mean_length']:.1f}{extra}"
            )
    return lines
