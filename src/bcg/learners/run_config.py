"""The description of a training run (``run.json``, :mod:`bcg.learners.registry`) from the
options of ``bcg train`` (:class:`TrainOptions`): where each ``NS.KEY=VALUE`` parameter goes
(estimator, learner config or env factory), network sizes, per-learner defaults, PPO's step
budget, the run folder and, when resuming, the stored run. Every option is checked here,
before JAX compiles anything.

    run, run_dir = prepare_run(TrainOptions(task="my_pkg.envs:make_env", iterations=50))
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bcg.options import parse_params, parse_stiffness


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """The options of one ``bcg train`` run, as the command line gives them (defaults: its)."""

    task: str = "hopper_jump"  # name or import path package.module:factory
    learner: str = "shac"  # shac | bptt | ppo
    estimator: str | None = None  # default bcg; ppo: none (plain step)
    params: tuple[str, ...] = ()  # NS.KEY=VALUE, NS: the estimator, the learner or env
    capacity: str | None = None  # BCG bundle slots: int or fraction of the batch
    stiffness: str = "stiff"
    iterations: int = 200
    num_envs: int = 16
    horizon: int | None = None
    actor_hidden: str | None = None  # comma list of layer sizes
    critic_hidden: str | None = None
    init_log_std: float | None = None
    seed: int = 0
    float64: bool = False
    timesteps: int | None = None  # ppo: env steps (default from the sizes)
    run_dir: str | None = None  # default runs/TASK_LEARNER_EST_STIFF_sSEED
    resume: bool = False
    checkpoint_every: int = 25
    devices: int | None = None  # shac / bptt: shard over the first N devices
    init_from: str | None = None  # shac / bptt: start from this run's (or checkpoint's) state
    schedule: tuple = ()  # phases (bcg.learners.schedule), from a recipe
    recipe: dict | None = None  # the recipe's record (bcg.learners.recipe.recipe_options)


def ppo_timesteps(opts: TrainOptions, num_envs: int, horizon: int | None) -> int:
    """PPO's env-step budget: ``timesteps``, else iterations x envs x horizon (32)."""
    return int(opts.timesteps or opts.iterations * int(num_envs) * int(horizon or 32))


def run_description(opts: TrainOptions) -> dict:
    """The run description stored in run.json (see :mod:`bcg.learners.registry`).

    ``NS.KEY=VALUE`` goes to the estimator (NS = the estimator), the learner (NS = the learner:
    its config) or the env factory (NS = ``env``); any other namespace is an error that names
    it (validated with the keys by ``registry.validate``).
    """
    learner = opts.learner
    estimator = opts.estimator
    if learner == "ppo":
        estimator = None if estimator in (None, "analytic") else estimator
    elif estimator is None:
        estimator = "bcg"
    if opts.capacity is not None and estimator not in ("bcg", "bcg-stein"):
        raise ValueError(f"--capacity applies to --estimator bcg / bcg-stein, not {estimator}")
    params = parse_params(
        opts.params, opts.capacity, capacity_for=(estimator,) if opts.capacity else ()
    )
    namespaces = {learner, "env"} | ({estimator} if estimator else set())
    stray = sorted(f"{ns}.{k}" for ns, kv in params.items() if ns not in namespaces for k in kv)
    if stray:
        raise ValueError(
            f"--param {', '.join(stray)} does not apply to this run (--learner {learner}"
            + (f", --estimator {estimator}" if estimator else "")
            + f"); namespaces here: {', '.join(sorted(namespaces))}"
        )
    config = dict(params.get(learner, {}))
    hidden = {"actor_hidden": opts.actor_hidden, "critic_hidden": opts.critic_hidden}
    if learner == "ppo":  # brax's names for the same network sizes
        hidden = {
            "policy_hidden_layer_sizes": opts.actor_hidden,
            "value_hidden_layer_sizes": opts.critic_hidden,
        }
        if opts.init_log_std is not None:
            raise ValueError("--init-log-std applies to shac / bptt (brax PPO has its own)")
    elif learner == "bptt" and opts.critic_hidden:
        raise ValueError("--critic-hidden applies to shac and ppo (bptt has no critic)")
    for k, v in hidden.items():
        if v:
            config[k] = [int(x) for x in v.split(",") if x]
    if opts.init_log_std is not None:
        config["init_log_std"] = opts.init_log_std
    run = {
        "task": opts.task,
        "stiffness": parse_stiffness(opts.stiffness),
        "learner": learner,
        "estimator": estimator,
        "estimator_params": params.get(estimator, {}) if estimator else {},
        "iterations": opts.iterations,
        "num_envs": opts.num_envs,
        "horizon": opts.horizon,
        "seed": opts.seed,
        "float64": bool(opts.float64),
        "config": config,
    }
    from bcg import estimators as E
    from bcg.envs import env_factory, factory_path

    path = factory_path(env_factory(opts.task))
    if path is not None:
        run["task_factory"] = path  # rebuilds a registered task in a new process
    if estimator is not None and estimator not in E.BUILTIN and ":" not in estimator:
        est_path = factory_path(E.registry.estimator_factory(estimator))
        if est_path is not None:
            run["estimator_factory"] = est_path
    if params.get("env"):
        run["env_params"] = params["env"]
    if learner == "ppo":
        run["timesteps"] = ppo_timesteps(opts, opts.num_envs, opts.horizon)
    if opts.schedule:
        run["schedule"] = [dict(ph) for ph in opts.schedule]
    if opts.recipe is not None:
        run["recipe"] = opts.recipe
    if opts.init_from is not None:
        if learner == "ppo":
            raise ValueError("--init-from applies to shac / bptt (brax PPO keeps its own state)")
        from bcg.learners.rundir import split_checkpoint_path

        split_checkpoint_path(opts.init_from)  # FileNotFoundError if missing
        run["init_from"] = str(opts.init_from)
    return run


def slug(text) -> str:
    """``text`` as a file-name part (``pkg.mod:make_env`` -> ``pkg.mod-make_env``)."""
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in str(text))


def run_folder(opts: TrainOptions, estimator: str | None) -> Path:
    """``opts.run_dir``, else ``runs/TASK_LEARNER_EST_STIFF_sSEED`` (EST ``plain``: none)."""
    est = estimator or "plain"
    return Path(
        opts.run_dir
        or f"runs/{slug(opts.task)}_{opts.learner}_{est}_{slug(opts.stiffness)}_s{opts.seed}"
    )


def prepare_run(opts: TrainOptions) -> tuple[dict, Path]:
    """``(run description, run folder)`` of a checked run: the task, the sizes, every parameter
    (:func:`bcg.learners.registry.validate`); with ``resume`` the stored run.json, its
    iterations (and PPO budget) replaced by the options'. ValueError / FileNotFoundError name
    the bad option."""
    from bcg.envs import env_factory

    env_factory(opts.task)  # ValueError naming the choices
    if opts.iterations < 1:
        raise ValueError(f"--iterations must be >= 1, got {opts.iterations}")
    if opts.checkpoint_every < 1:
        raise ValueError(f"--checkpoint-every must be >= 1, got {opts.checkpoint_every}")
    if opts.devices is not None and opts.devices < 1:
        raise ValueError(f"--devices must be >= 1, got {opts.devices}")
    run = run_description(opts)
    from bcg.learners import registry

    registry.validate(run)
    run_dir = run_folder(opts, run["estimator"])
    if opts.resume:
        if not (run_dir / "run.json").exists():
            raise FileNotFoundError(f"--resume: no run in {run_dir} (missing run.json)")
        from bcg.learners import record

        stored = record.read(run_dir)  # completed from the defaults of its time
        run = {**stored, "iterations": opts.iterations}  # the stored run, maybe extended
        if run["learner"] == "ppo":  # the budget, maybe extended
            run["timesteps"] = ppo_timesteps(opts, run["num_envs"], run.get("horizon"))
    if run["learner"] == "ppo" and opts.devices is not None:
        raise ValueError("--devices applies to shac / bptt (brax PPO places its own devices)")
    return run, run_dir
