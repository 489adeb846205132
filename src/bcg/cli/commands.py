"""The handlers of the ``bcg`` subcommands: each maps its parsed arguments onto library calls
and prints the result. Bad arguments raise ValueError / FileNotFoundError (reported by
:func:`bcg.cli.main` as one line, exit code 2) before anything compiles."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bcg.cli.jax_setup import setup_jax
from bcg.learners.run_config import TrainOptions


def cmd_grad(args) -> int:
    setup_jax(not args.float32)
    from bcg.diagnostics import sweep
    from bcg.diagnostics.table import format_table

    say = (lambda m: print(m, file=sys.stderr)) if not args.quiet else None
    ests, problems = sweep.prepare_sweep(
        estimators=[n.strip() for n in args.estimators.split(",") if n.strip()],
        params=args.param or (),
        capacity=args.capacity,
        stiffness=args.stiffness,
        sweep=args.sweep.split(",") if args.sweep else (),
        task=args.task,
        model=args.model,
        batch=args.batch,
        horizon=args.horizon,
        seed=args.seed,
        substeps=args.substeps,
        timestep=args.timestep,
        qpos_noise=args.qpos_noise,
        qvel_noise=args.qvel_noise,
    )
    reports = sweep.run_sweep(
        problems, ests, seed=args.seed, reference=not args.no_reference, progress=say
    )
    result, js, png = sweep.save_sweep(reports, args.out)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("\n\n".join(format_table(r) for r in reports))
        print(f"saved {js} and {png}")
    return 0


def cmd_tasks(args) -> int:
    from bcg.envs import tasks
    from bcg.envs.registry import task_summaries

    print("gradient-report tasks (bcg grad --task NAME):")
    for name in tasks.list_tasks():
        print(f"  {name:16s} {tasks.get(name).description}")
    print("training tasks (bcg train --task NAME, or --task package.module:factory):")
    for name, line in task_summaries():
        print(f"  {name:16s} {line}")
    return 0


def _train_options(args) -> TrainOptions:
    """The ``bcg train`` arguments as :class:`bcg.learners.run_config.TrainOptions` (with
    ``--recipe``: the recipe's, under the options given on the command line)."""
    given = {
        "task": args.task,
        "learner": args.learner,
        "estimator": args.estimator,
        "params": tuple(args.param or ()),
        "capacity": args.capacity,
        "stiffness": args.stiffness,
        "iterations": args.iterations,
        "num_envs": args.num_envs,
        "horizon": args.horizon,
        "actor_hidden": args.actor_hidden,
        "critic_hidden": args.critic_hidden,
        "init_log_std": args.init_log_std,
        "seed": args.seed,
        "float64": args.float64,
        "timesteps": args.timesteps,
        "run_dir": args.run_dir,
        "resume": args.resume,
        "checkpoint_every": args.checkpoint_every,
        "devices": args.devices,
        "init_from": args.init_from,
    }
    given = {k: v for k, v in given.items() if v is not None and v != ()}
    if getattr(args, "recipe", None):
        from bcg.learners.recipe import recipe_options

        return recipe_options(args.recipe, **given)
    return TrainOptions(**given)


def _run_description(args) -> dict:
    """The run description stored in run.json
    (:func:`bcg.learners.run_config.run_description`)."""
    from bcg.learners.run_config import run_description

    return run_description(_train_options(args))


def cmd_train(args) -> int:
    from bcg.learners.run_config import prepare_run

    run, run_dir = prepare_run(_train_options(args))
    setup_jax(run["float64"])
    from bcg.learners.train_run import summary_lines, train_run

    out = train_run(
        run,
        run_dir,
        resume=args.resume,
        checkpoint_every=args.checkpoint_every,
        eval_episodes=args.eval_episodes,
        devices=args.devices,
        progress=not args.quiet,
        log=lambda line: print(line, file=sys.stderr),
    )
    if out is None:  # PPO
        print(f"saved the PPO run in {run_dir}")
        return 0
    for line in summary_lines(out):
        print(line)
    print(f"saved {run_dir}/metrics.csv, tb/, checkpoints/, training.png")
    return 0


def _run_precision(path) -> None:
    """JAX precision of the run at ``path`` (run.json's float64; PPO runs: float32)."""
    from bcg.transfer.policy import run_float64

    setup_jax(run_float64(path))


def cmd_eval(args) -> int:
    if args.episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {args.episodes}")
    _run_precision(args.path)
    from bcg.transfer.policy import evaluate_policy, load_policy

    pol = load_policy(args.path)  # every learner's run (run.json), or a legacy PPO run
    res = evaluate_policy(pol, args.episodes, args.seed)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    from bcg.learners.record import describe

    steps = f", {pol.env_steps} env steps" if pol.env_steps is not None else ""
    print(f"{pol.label}{steps}: {len(res['returns'])} episodes, deterministic policy, plain step")
    print(f"trained with {describe(pol.run)}")
    for i, (r, n) in enumerate(zip(res["returns"], res["lengths"], strict=True)):
        print(f"  episode {i}: return {r:.3f}, length {n}")
    extra = "".join(f", {k} {v:.3f}" for k, v in res.items() if k.endswith(("_mean", "_max")))
    print(f"mean return {res['mean_return']:.3f}, mean length {res['mean_length']:.1f}{extra}")
    return 0


def cmd_export(args) -> int:
    _run_precision(args.path)
    from bcg.transfer.export import check_onnx, export_onnx, metadata_path
    from bcg.transfer.policy import load_policy

    pol = load_policy(args.path)
    out = export_onnx(pol, args.onnx)
    res = check_onnx(pol, out, num=args.check)
    print(f"exported {pol.label} -> {out} (metadata {metadata_path(out)})")
    print(
        f"onnxruntime vs JAX policy on {res['num']} random observations: max abs diff "
        f"{res['max_abs_diff']:.2e}"
    )
    return 0 if res["max_abs_diff"] < args.atol else 1


def cmd_pack(args) -> int:
    _run_precision(args.path)
    from bcg.transfer.pack import pack_policy

    action_range = None
    if args.action_range is not None:
        key, sep, value = args.action_range.partition("=")
        try:
            action_range = (key.strip(), float(value))
        except ValueError:
            sep = ""
        if not sep:
            raise ValueError(f"--action-range wants env.NAME=NUMBER, got {args.action_range!r}")
    out = pack_policy(args.path, args.out, action_range=action_range, std_scale=args.std_scale)
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"packed the policy of {args.path} -> {out} ({size / 1e6:.2f} MB)")
    return 0


def cmd_transfer(args) -> int:
    if args.runs < 1:
        raise ValueError(f"--runs must be >= 1, got {args.runs}")
    if args.seconds is not None and args.seconds <= 0:
        raise ValueError(f"--seconds must be > 0, got {args.seconds}")
    if args.max_root_speed < 0:
        raise ValueError(f"--max-root-speed must be >= 0 (0: off), got {args.max_root_speed}")
    _run_precision(args.path)
    from bcg.transfer.config import TransferConfig
    from bcg.transfer.policy import load_policy
    from bcg.transfer.report import format_report, transfer

    pol = load_policy(args.path)
    out = Path(args.out) if args.out else pol.run_dir / "transfer.json"
    cfg = TransferConfig(
        runs=args.runs,
        seconds=args.seconds,
        randomize=not args.no_randomize,
        seed=args.seed,
        render=args.render,
        video_path=str(args.video or out.with_suffix(".mp4")),
        training_sim=not args.no_training_sim,
        max_root_speed=args.max_root_speed or None,
        randomization=args.randomization,
    )
    if args.randomization is not None and pol.env.native_randomization("none") is None:
        raise ValueError(
            f"--randomization: {type(pol.env).__name__} has no randomisation table of its own "
            "(only envs with native_randomization(), such as the G1 tasks, take items)"
        )
    rep = transfer(pol, cfg)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rep, indent=2))
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        print(format_report(rep))
        print(f"saved {out}")
    return 0


def cmd_deploy(args) -> int:
    _run_precision(args.path)
    import numpy as np

    from bcg.transfer import deploy
    from bcg.transfer.export import OnnxPolicy
    from bcg.transfer.policy import load_policy

    pol = load_policy(args.path)
    env = pol.env
    policy = OnnxPolicy(args.onnx) if args.onnx else deploy.jax_policy(pol)
    steps = max(1, int(round(args.seconds / env.sim.control_dt)))
    if args.interface:
        try:
            transport = deploy.UnitreeSdkTransport(args.interface, env.sim.control_dt)
        except ImportError as e:
            raise ValueError(str(e)) from None
        where = f"robot on {args.interface}"
    else:
        transport = deploy.simulated_robot(
            env, pol.run.get("task"), args.seed, task_factory=pol.run.get("task_factory")
        )
        where = "native MuJoCo standing in for the robot"
    runner = deploy.make_runner(env, policy, transport)
    log = runner.run(steps)
    src = f"ONNX {args.onnx}" if args.onnx else "JAX"
    print(
        f"deployed {pol.label} ({src} policy) for {steps} control steps at "
        f"{1 / env.sim.control_dt:.0f} Hz on {where}"
    )
    q = np.asarray(log["q"])
    print(f"motor q range over the run: {q.min():.3f} .. {q.max():.3f} rad")
    if not args.interface:
        print(f"final qpos: {np.array2string(transport.d.qpos, precision=3)}")
    return 0
