"""Command line: ``bcg grad`` (gradient report), ``bcg tasks``, ``bcg train``, ``bcg eval``,
``bcg transfer`` (native MuJoCo), ``bcg export`` (ONNX), ``bcg deploy`` (LowCmd/LowState loop).

bcg grad --task bouncing_ball                 # table + results/grad_bouncing_ball.{json,png}
bcg grad --model my_robot.xml --json          # machine-readable report on your MJCF
bcg grad --task hopper --estimators analytic,bcg --sweep soft,0.015,stiff
bcg train --task hopper_jump --learner shac --estimator bcg --iterations 200
bcg eval runs/hopper_jump_shac_bcg_stiff_s0 --episodes 8
bcg transfer runs/hopper_jump_shac_bcg_stiff_s0 --runs 5 --render   # native MuJoCo
bcg export runs/hopper_jump_shac_bcg_stiff_s0 --onnx policy.onnx
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

PLATFORMS = ("cpu", "gpu", "cuda", "rocm", "tpu")


def _select_platform(platform: str | None) -> None:
    """``--platform``: restrict JAX to one backend; None leaves the choice to JAX (its default
    device, or the ``JAX_PLATFORMS`` environment variable). Must run before JAX starts."""
    if platform is None:
        return
    if platform not in PLATFORMS:
        raise ValueError(f"--platform must be one of {', '.join(PLATFORMS)}, got {platform!r}")
    os.environ["JAX_PLATFORMS"] = platform
    import jax

    jax.config.update("jax_platforms", platform)


def device_line() -> str:
    """One line naming the JAX backend and the devices a command runs on."""
    import jax

    devs = jax.devices()
    kinds = sorted({d.device_kind for d in devs})
    return (
        f"[bcg] JAX {jax.__version__}, backend {jax.default_backend()}: {len(devs)} device(s) "
        f"({', '.join(kinds)})"
    )


def _setup_jax(x64: bool):
    """Precision and the persistent compilation cache (the platform is JAX's choice)."""
    import jax

    jax.config.update("jax_enable_x64", x64)
    cache = os.environ.get("BCG_JAX_CACHE", str(Path.home() / ".cache" / "bcg" / "jax"))
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def _parse_stiffness(s: str):
    try:
        return float(s)
    except ValueError:
        return s


def _estimator_params(args, capacity_for=("bcg", "bcg-stein")) -> dict:
    """``--param NS.KEY=VALUE`` (and ``--capacity``) as ``{NS: {KEY: value}}``; values are
    JSON where they parse as JSON, else strings."""
    p = {name: {} for name in capacity_for}
    if args.capacity is not None:
        try:
            c = float(args.capacity)
        except ValueError:
            raise ValueError(f"--capacity must be a number, got {args.capacity!r}") from None
        for name in capacity_for:
            p[name]["capacity"] = int(c) if c >= 1 and c == int(c) else c
    for kv in args.param or []:
        if "=" not in kv or "." not in kv.split("=")[0]:
            raise ValueError(f"--param expects NAMESPACE.NAME=VALUE, got {kv!r}")
        k, v = kv.split("=", 1)
        name, par = k.rsplit(".", 1)  # a namespace may be an import path: pkg.mod:factory
        try:
            val = json.loads(v)
        except json.JSONDecodeError:
            val = v
        p.setdefault(name, {})[par] = val
    return p


def cmd_grad(args) -> int:
    _setup_jax(not args.float32)
    from bcg import estimators as E
    from bcg.diagnostics import plot as P
    from bcg.diagnostics.report import make_problem, run_report, task_problem
    from bcg.diagnostics.table import format_table
    from bcg.envs import tasks
    from bcg.sim import load

    # Validate everything (estimators, sizes, models, stiffnesses, problems) before the first
    # JAX compile, so that a bad argument fails in a fraction of a second, not after minutes.
    if args.batch < 2:
        raise ValueError(f"--batch must be >= 2 to estimate a variance, got {args.batch}")
    if args.horizon is not None and args.horizon < 1:
        raise ValueError(f"--horizon must be >= 1 control step, got {args.horizon}")
    names = [n.strip() for n in args.estimators.split(",") if n.strip()]
    if not names:
        raise ValueError("--estimators is empty")
    params = _estimator_params(args)
    bad = sorted(set(params) - set(E.names()) - set(names))
    if bad:
        raise ValueError(
            f"--param names unknown estimator(s) {bad}; choose from {', '.join(E.names())}"
        )
    ests = {n: E.make(n, **params.get(n, {})) for n in names}
    stiffs = [_parse_stiffness(s) for s in (args.sweep.split(",") if args.sweep else [])]
    main_stiff = _parse_stiffness(args.stiffness)
    if main_stiff not in stiffs:
        stiffs.append(main_stiff)

    def build(stiff):
        if args.model:
            sim = load(args.model, stiffness=stiff, substeps=args.substeps, timestep=args.timestep)
            horizon = 50 if args.horizon is None else args.horizon
            return make_problem(
                sim,
                batch=args.batch,
                horizon=horizon,
                seed=args.seed,
                qpos_noise=args.qpos_noise,
                qvel_noise=args.qvel_noise,
            )
        return task_problem(
            tasks.get(args.task), stiff, batch=args.batch, seed=args.seed, horizon=args.horizon
        )

    say = (lambda m: print(m, file=sys.stderr)) if not args.quiet else None
    problems = [build(stiff) for stiff in stiffs]  # all models load before anything compiles
    reports = []
    for prob in problems:
        if say:
            say(
                f"[bcg grad] {prob.sim.name}: stiffness {prob.sim.stiffness.label}, "
                f"batch {prob.batch}, horizon {prob.horizon}"
            )
        reports.append(
            run_report(prob, ests, seed=args.seed, reference=not args.no_reference, progress=say)
        )
    main = reports[-1]
    result = main if len(reports) == 1 else {**main, "sweep": reports}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"grad_{main['model']}"
    (out_dir / f"{stem}.json").write_text(json.dumps(result, indent=2))
    png = P.plot_spread_vs_stiffness(reports, out_dir / f"{stem}.png")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("\n\n".join(format_table(r) for r in reports))
        print(f"saved {out_dir / (stem + '.json')} and {png}")
    return 0


def cmd_tasks(args) -> int:
    from bcg.envs import POLICY_ENVS, tasks

    print("gradient-report tasks (bcg grad --task NAME):")
    for name in tasks.list_tasks():
        print(f"  {name:16s} {tasks.get(name).description}")
    print("training tasks (bcg train --task NAME, or --task package.module:factory):")
    for name, factory in POLICY_ENVS.items():
        doc = (factory.__doc__ or "").strip().splitlines()
        line = re.sub(r"\s*\(:\w+:`[^`]*`\)", "", doc[0]) if doc else ""  # drop Sphinx refs
        print(f"  {name:16s} {line}")
    return 0


def _run_description(args) -> dict:
    """The run description stored in run.json (see :mod:`bcg.learners.registry`).

    ``--param NS.KEY=VALUE`` goes to the estimator (NS = the ``--estimator``), the learner
    (NS = the ``--learner``: its config) or the env factory (NS = ``env``); any other
    namespace is an error that names it (validated with the keys by ``registry.validate``).
    """
    learner = args.learner
    estimator = args.estimator
    if learner == "ppo":
        estimator = None if estimator in (None, "analytic") else estimator
    elif estimator is None:
        estimator = "bcg"
    if args.capacity is not None and estimator not in ("bcg", "bcg-stein"):
        raise ValueError(f"--capacity applies to --estimator bcg / bcg-stein, not {estimator}")
    params = _estimator_params(args, capacity_for=(estimator,) if args.capacity else ())
    namespaces = {learner, "env"} | ({estimator} if estimator else set())
    stray = sorted(f"{ns}.{k}" for ns, kv in params.items() if ns not in namespaces for k in kv)
    if stray:
        raise ValueError(
            f"--param {', '.join(stray)} does not apply to this run (--learner {learner}"
            + (f", --estimator {estimator}" if estimator else "")
            + f"); namespaces here: {', '.join(sorted(namespaces))}"
        )
    config = dict(params.get(learner, {}))
    hidden = {"actor_hidden": args.actor_hidden, "critic_hidden": args.critic_hidden}
    if learner == "ppo":  # brax's names for the same network sizes
        hidden = {
            "policy_hidden_layer_sizes": args.actor_hidden,
            "value_hidden_layer_sizes": args.critic_hidden,
        }
        if args.init_log_std is not None:
            raise ValueError("--init-log-std applies to shac / bptt (brax PPO has its own)")
    elif learner == "bptt" and args.critic_hidden:
        raise ValueError("--critic-hidden applies to shac and ppo (bptt has no critic)")
    for k, v in hidden.items():
        if v:
            config[k] = [int(x) for x in v.split(",") if x]
    if args.init_log_std is not None:
        config["init_log_std"] = args.init_log_std
    run = {
        "task": args.task,
        "stiffness": _parse_stiffness(args.stiffness),
        "learner": learner,
        "estimator": estimator,
        "estimator_params": params.get(estimator, {}) if estimator else {},
        "iterations": args.iterations,
        "num_envs": args.num_envs,
        "horizon": args.horizon,
        "seed": args.seed,
        "float64": bool(args.float64),
        "config": config,
    }
    from bcg import estimators as E
    from bcg.envs import env_factory, factory_path

    path = factory_path(env_factory(args.task))
    if path is not None:
        run["task_factory"] = path  # rebuilds a registered task in a new process
    if estimator is not None and estimator not in E.BUILTIN and ":" not in estimator:
        est_path = factory_path(E.registry.estimator_factory(estimator))
        if est_path is not None:
            run["estimator_factory"] = est_path
    if params.get("env"):
        run["env_params"] = params["env"]
    if learner == "ppo":
        run["timesteps"] = _ppo_timesteps(args, args.num_envs, args.horizon)
    return run


def _slug(text) -> str:
    """``text`` as a file-name part (``pkg.mod:make_env`` -> ``pkg.mod-make_env``)."""
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in str(text))


def _ppo_timesteps(args, num_envs: int, horizon: int | None) -> int:
    """PPO's env-step budget: ``--timesteps``, else iterations x envs x horizon (32)."""
    return int(args.timesteps or args.iterations * int(num_envs) * int(horizon or 32))


def _train_ppo(args, run: dict, run_dir: Path) -> int:
    """``--learner ppo``: hand over to bcg.learners.ppo.train_ppo (brax PPO, plain step)."""
    from bcg.learners import harness
    from bcg.learners.ppo import train_ppo
    from bcg.learners.registry import make_run_env

    env = make_run_env(run)
    harness.write_run(run_dir, run)
    train_ppo(
        env,
        num_timesteps=run["timesteps"],
        seed=run["seed"],
        run_dir=run_dir,
        num_envs=run["num_envs"],
        resume=args.resume,
        progress=not args.quiet,
        **run.get("config", {}),
    )
    print(f"saved the PPO run in {run_dir}")
    return 0


def cmd_train(args) -> int:
    from bcg.envs import env_factory

    env_factory(args.task)  # ValueError naming the choices
    if args.iterations < 1:
        raise ValueError(f"--iterations must be >= 1, got {args.iterations}")
    if args.checkpoint_every < 1:
        raise ValueError(f"--checkpoint-every must be >= 1, got {args.checkpoint_every}")
    if args.devices is not None and args.devices < 1:
        raise ValueError(f"--devices must be >= 1, got {args.devices}")
    run = _run_description(args)
    from bcg.learners import registry

    registry.validate(run)
    est = run["estimator"] or "plain"
    run_dir = Path(
        args.run_dir
        or f"runs/{_slug(args.task)}_{args.learner}_{est}_{_slug(args.stiffness)}_s{args.seed}"
    )
    if args.resume:
        if not (run_dir / "run.json").exists():
            raise FileNotFoundError(f"--resume: no run in {run_dir} (missing run.json)")
        stored = json.loads((run_dir / "run.json").read_text())
        run = {**stored, "iterations": args.iterations}  # the stored run, maybe extended
        if run["learner"] == "ppo":  # the budget, maybe extended
            run["timesteps"] = _ppo_timesteps(args, run["num_envs"], run.get("horizon"))
    if run["learner"] == "ppo":
        if args.devices is not None:
            raise ValueError("--devices applies to shac / bptt (brax PPO places its own devices)")
        _setup_jax(run["float64"])
        return _train_ppo(args, run, run_dir)
    _setup_jax(run["float64"])
    from bcg.learners import harness

    env, learner = registry.build(run)
    learner = learner.sharded(args.devices)  # None: all devices; ValueError if not divisible
    n_dev = learner.mesh.devices.size
    steps = learner.env_steps_per_iteration // run["num_envs"]
    print(
        f"[bcg train] {run['task']} ({env.sim.stiffness.label} contact): {run['learner']} + "
        f"{run['estimator']}, {run['num_envs']} envs x {steps}"
        f" steps per iteration on {n_dev} device(s), {run['iterations']} iterations -> {run_dir}",
        file=sys.stderr,
    )
    out = harness.train(
        learner,
        run_dir,
        seed=run["seed"],
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        progress=not args.quiet,
        eval_episodes=args.eval_episodes,
        run_config=run,
    )
    last, ev, rows = out["last"], out["evals"], out["rows"]
    if last:
        n = len(rows)
        skipped = sum(float(r.get("actor_skipped") or 0) for r in rows)
        masked = sum(float(r.get("masked_fraction") or 0) for r in rows) / max(n, 1)
        print(
            f"iteration {last['iteration']}: env steps {last['env_steps']}, wall time "
            f"{last['wall_time']:.0f} s, training episode return {last['episode_return']:.2f}; "
            f"over the run: skipped actor updates {skipped:.0f}/{n}, masked env-steps "
            f"{masked:.2%} (diverged environments)"
        )
    if "initial" in ev and "final" in ev:
        for k in ("initial", "final"):
            e = ev[k]
            extra = "".join(f", {n} {v:.3f}" for n, v in e.items() if n.endswith(("_mean", "_max")))
            print(
                f"eval {k:7s}: return {e['mean_return']:.2f}, length {e['mean_length']:.1f}{extra}"
            )
    print(f"saved {run_dir}/metrics.csv, tb/, checkpoints/, training.png")
    return 0


def cmd_eval(args) -> int:
    if args.episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {args.episodes}")
    _transfer_precision(args.path)
    import jax

    from bcg.learners import harness
    from bcg.transfer.policy import load_policy

    pol = load_policy(args.path)  # every learner's run (run.json), or a legacy PPO run
    res = harness.evaluate(
        pol.env, lambda _, obs: pol.fn(obs), None, args.episodes, jax.random.PRNGKey(args.seed)
    )
    steps = f", {pol.env_steps} env steps" if pol.env_steps is not None else ""
    return _print_eval(args, res, f"{pol.label}{steps}")


def _print_eval(args, res: dict, label: str) -> int:
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{label}: {len(res['returns'])} episodes, deterministic policy, plain step")
    for i, (r, n) in enumerate(zip(res["returns"], res["lengths"], strict=True)):
        print(f"  episode {i}: return {r:.3f}, length {n}")
    extra = "".join(f", {k} {v:.3f}" for k, v in res.items() if k.endswith(("_mean", "_max")))
    print(f"mean return {res['mean_return']:.3f}, mean length {res['mean_length']:.1f}{extra}")
    return 0


def _transfer_precision(path) -> None:
    """JAX precision of the run at ``path`` (run.json's float64; PPO runs: float32)."""
    from bcg.transfer.policy import split_checkpoint_path

    run_dir, _ = split_checkpoint_path(path)
    run_file = run_dir / "run.json"
    x64 = json.loads(run_file.read_text()).get("float64", False) if run_file.exists() else False
    _setup_jax(bool(x64))


def cmd_export(args) -> int:
    _transfer_precision(args.path)
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


def cmd_transfer(args) -> int:
    if args.runs < 1:
        raise ValueError(f"--runs must be >= 1, got {args.runs}")
    if args.seconds is not None and args.seconds <= 0:
        raise ValueError(f"--seconds must be > 0, got {args.seconds}")
    _transfer_precision(args.path)
    from bcg.transfer import native
    from bcg.transfer.policy import load_policy

    pol = load_policy(args.path)
    out = Path(args.out) if args.out else pol.run_dir / "transfer.json"
    cfg = native.TransferConfig(
        runs=args.runs,
        seconds=args.seconds,
        randomize=not args.no_randomize,
        seed=args.seed,
        render=args.render,
        video_path=str(args.video or out.with_suffix(".mp4")),
        training_sim=not args.no_training_sim,
    )
    rep = native.transfer(pol, cfg)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rep, indent=2))
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        print(native.format_report(rep))
        print(f"saved {out}")
    return 0


def cmd_deploy(args) -> int:
    _transfer_precision(args.path)
    import numpy as np

    from bcg.transfer import deploy, native
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
        m, _ = native.native_model(env, pol.run.get("task"))
        import jax

        d = native.data_from_mjx(m, env.initial_data(jax.random.PRNGKey(args.seed)))
        mm = deploy.MotorMap.from_model(env.sim.mj_model, env.motor_joint_names)
        transport = deploy.MujocoTransport(m, mm, substeps=env.sim.substeps, data=d)
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


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bcg", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--platform",
        choices=PLATFORMS,
        help="JAX backend to run on (default: JAX's choice, or the JAX_PLATFORMS variable)",
    )

    g = sub.add_parser(
        "grad", parents=[common], help="gradient report of every estimator on a model or task"
    )
    src = g.add_mutually_exclusive_group()
    src.add_argument("--task", default="bouncing_ball", help="built-in task (see `bcg tasks`)")
    src.add_argument("--model", help="path to an MJCF file")
    g.add_argument(
        "--stiffness", default="stiff", help="soft | stiff | gated[:WIDTH] | model | solref tc (s)"
    )
    g.add_argument(
        "--sweep",
        default="soft",
        help="comma list of further stiffnesses for the spread-vs-stiffness plot (default: soft;"
        " '' for none); the compiled gradients are reused across stiffnesses",
    )
    g.add_argument(
        "--estimators",
        default="analytic,bcg,bcg-stein,zeroth-order",
        help="comma list of: analytic, bcg, bcg-stein, global-bundle, zeroth-order, alpha-order,"
        " or an import path package.module:factory of your own (bcg.estimators.registry)",
    )
    g.add_argument(
        "--param",
        action="append",
        help="estimator parameter, e.g. bcg.num_branches=16 (repeatable)",
    )
    g.add_argument("--capacity", help="BCG bundle slots: int or fraction of the batch")
    g.add_argument("--batch", type=int, default=32, help="initial states (default 32)")
    g.add_argument("--horizon", type=int, help="control steps (default: the task's, or 50)")
    g.add_argument("--substeps", type=int, default=4, help="physics steps per control (--model)")
    g.add_argument("--timestep", type=float, help="physics timestep override (--model)")
    g.add_argument("--qpos-noise", type=float, default=0.01, help="(--model) initial qpos std")
    g.add_argument("--qvel-noise", type=float, default=0.05, help="(--model) initial qvel std")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--no-reference", action="store_true", help="skip the native-MuJoCo FD")
    g.add_argument("--float32", action="store_true", help="single precision (default float64)")
    g.add_argument("--json", action="store_true", help="print the report as JSON")
    g.add_argument("--out", default="results", help="output folder for .json and .png")
    g.add_argument("--quiet", action="store_true")
    g.set_defaults(func=cmd_grad)

    t = sub.add_parser(
        "tasks", parents=[common], help="list the gradient-report and training tasks"
    )
    t.set_defaults(func=cmd_tasks)

    tr = sub.add_parser(
        "train", parents=[common], help="train a policy (SHAC / BPTT through an estimator, PPO)"
    )
    tr.add_argument(
        "--task",
        default="hopper_jump",
        help="training task (`bcg tasks`; default hopper_jump) or an import path "
        "package.module:factory returning a ContactEnv",
    )
    tr.add_argument("--learner", default="shac", help="shac | bptt | ppo")
    tr.add_argument(
        "--estimator",
        help="analytic | bcg | bcg-stein | global-bundle | package.module:factory (default bcg;"
        " ppo: none, plain step)",
    )
    tr.add_argument(
        "--param",
        action="append",
        help="NS.KEY=VALUE for the estimator (bcg.tau=100), the learner (shac.gamma=0.98, "
        "ppo.learning_rate=1e-4) or the env (env.reward=add); repeatable; unknown ones are "
        "errors",
    )
    tr.add_argument("--capacity", help="BCG bundle slots: int or fraction of the batch")
    tr.add_argument(
        "--stiffness", default="stiff", help="soft | stiff | gated[:WIDTH] | solref tc (s)"
    )
    tr.add_argument("--iterations", type=int, default=200, help="learner iterations")
    tr.add_argument("--num-envs", type=int, default=16, help="parallel environments")
    tr.add_argument(
        "--horizon", type=int, help="SHAC window (default 32) / BPTT episode steps (default all)"
    )
    tr.add_argument("--actor-hidden", help="actor layer sizes, e.g. 512,256,128 (default 64,64)")
    tr.add_argument("--critic-hidden", help="critic layer sizes (SHAC; default 64,64)")
    tr.add_argument(
        "--init-log-std", type=float, help="initial log action std (default 0 = log 1.0)"
    )
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--run-dir", help="output folder (default runs/TASK_LEARNER_EST_STIFF_sSEED)")
    tr.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    tr.add_argument("--checkpoint-every", type=int, default=25, help="iterations (default 25)")
    tr.add_argument("--eval-episodes", type=int, default=8, help="0 to skip the evaluations")
    tr.add_argument("--timesteps", type=int, help="(ppo) env steps, default from the sizes")
    tr.add_argument(
        "--devices",
        type=int,
        help="shard the env batch over the first N of jax.devices() (default: all; "
        "--num-envs must be divisible by N; shac / bptt)",
    )
    tr.add_argument("--float64", action="store_true", help="double precision (default float32)")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.set_defaults(func=cmd_train)

    ev = sub.add_parser(
        "eval", parents=[common], help="evaluate a trained policy (deterministic, plain step)"
    )
    ev.add_argument("path", help="run directory or one of its checkpoints/<iteration>")
    ev.add_argument("--episodes", type=int, default=8)
    ev.add_argument("--seed", type=int, default=1)
    ev.add_argument("--json", action="store_true", help="print the result as JSON")
    ev.set_defaults(func=cmd_eval)

    xp = sub.add_parser(
        "export", parents=[common], help="export a trained policy to ONNX (jax2onnx)"
    )
    xp.add_argument("path", help="run directory or one of its checkpoints/<iteration>")
    xp.add_argument("--onnx", required=True, help="output .onnx (metadata next to it as .json)")
    xp.add_argument("--check", type=int, default=256, help="random observations to check")
    xp.add_argument("--atol", type=float, default=1e-5, help="max abs diff allowed (exit 1)")
    xp.set_defaults(func=cmd_export)

    tf = sub.add_parser(
        "transfer",
        parents=[common],
        help="run a trained policy in native MuJoCo (falls, penetration, tracking)",
    )
    tf.add_argument("path", help="run directory or one of its checkpoints/<iteration>")
    tf.add_argument("--runs", type=int, default=5, help="runs (default 5)")
    tf.add_argument("--seconds", type=float, help="seconds per run (default: one episode)")
    tf.add_argument("--no-randomize", action="store_true", help="nominal model, no latency/pushes")
    tf.add_argument("--render", action="store_true", help="save an mp4 of run 0 (needs GL)")
    tf.add_argument("--video", help="video path (default: next to the JSON, .mp4)")
    tf.add_argument("--no-training-sim", action="store_true", help="skip the MJX comparison")
    tf.add_argument("--seed", type=int, default=0)
    tf.add_argument("--out", help="JSON path (default RUN_DIR/transfer.json)")
    tf.add_argument("--json", action="store_true", help="print the report as JSON")
    tf.set_defaults(func=cmd_transfer)

    dp = sub.add_parser(
        "deploy",
        parents=[common],
        help="50 Hz deploy loop over unitree_sdk2 LowCmd/LowState (MuJoCo or robot)",
    )
    dp.add_argument("path", help="run directory or one of its checkpoints/<iteration>")
    dp.add_argument("--onnx", help="run this exported policy with onnxruntime (default: JAX)")
    dp.add_argument("--seconds", type=float, default=2.0)
    dp.add_argument(
        "--interface", help="network interface of the real robot (needs unitree_sdk2py)"
    )
    dp.add_argument("--seed", type=int, default=0, help="initial state (MuJoCo transport)")
    dp.set_defaults(func=cmd_deploy)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import contextlib

    # mujoco.mjx print()s import notices ("Failed to import warp: ...") on stdout, which would
    # corrupt `bcg grad --json` output: send them to stderr (only the first import prints).
    with contextlib.redirect_stdout(sys.stderr):
        from bcg.sim.model import ModelError

    try:
        _select_platform(args.platform)
        print(device_line(), file=sys.stderr)
        return args.func(args)
    except (ModelError, ValueError, FileNotFoundError) as e:
        msg = " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip())  # one line
        print(f"bcg: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
