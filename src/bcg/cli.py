"""Command line: ``bcg grad`` (gradient report), ``bcg tasks``.

bcg grad --task bouncing_ball                 # table + results/grad_bouncing_ball.{json,png}
bcg grad --model my_robot.xml --json          # machine-readable report on your MJCF
bcg grad --task hopper --estimators analytic,bcg --sweep soft,0.015,stiff
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _setup_jax(x64: bool):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
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


def _estimator_params(args) -> dict:
    p = {"bcg": {}, "bcg-stein": {}}
    if args.capacity is not None:
        try:
            c = float(args.capacity)
        except ValueError:
            raise ValueError(f"--capacity must be a number, got {args.capacity!r}") from None
        for name in ("bcg", "bcg-stein"):
            p[name]["capacity"] = int(c) if c >= 1 and c == int(c) else c
    for kv in args.param or []:
        if "=" not in kv or "." not in kv.split("=")[0]:
            raise ValueError(f"--param expects ESTIMATOR.NAME=VALUE, got {kv!r}")
        k, v = kv.split("=", 1)
        name, par = k.split(".", 1)
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
    bad = sorted(set(params) - set(E.NAMES))
    if bad:
        raise ValueError(
            f"--param names unknown estimator(s) {bad}; choose from {', '.join(E.NAMES)}"
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
    from bcg.envs import tasks

    for name in tasks.list_tasks():
        print(f"{name:16s} {tasks.get(name).description}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bcg", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    g = sub.add_parser("grad", help="gradient report of every estimator on a model or task")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--task", default="bouncing_ball", help="built-in task (see `bcg tasks`)")
    src.add_argument("--model", help="path to an MJCF file")
    g.add_argument("--stiffness", default="stiff", help="soft | stiff | model | solref tc (s)")
    g.add_argument(
        "--sweep",
        default="soft",
        help="comma list of further stiffnesses for the spread-vs-stiffness plot (default: soft;"
        " '' for none); the compiled gradients are reused across stiffnesses",
    )
    g.add_argument(
        "--estimators",
        default="analytic,bcg,bcg-stein,zeroth-order",
        help="comma list of: analytic, bcg, bcg-stein, global-bundle, zeroth-order, alpha-order",
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

    t = sub.add_parser("tasks", help="list built-in tasks")
    t.set_defaults(func=cmd_tasks)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import contextlib

    # mujoco.mjx print()s import notices ("Failed to import warp: ...") on stdout, which would
    # corrupt `bcg grad --json` output: send them to stderr (only the first import prints).
    with contextlib.redirect_stdout(sys.stderr):
        from bcg.sim.model import ModelError

    try:
        return args.func(args)
    except (ModelError, ValueError, FileNotFoundError) as e:
        msg = " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip())  # one line
        print(f"bcg: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
