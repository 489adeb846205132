"""The ``bcg`` argument parser: one subcommand per handler of :mod:`bcg.cli.commands`, each
with its options, help texts and defaults."""

from __future__ import annotations

import argparse

from bcg.cli import commands
from bcg.cli.jax_setup import PLATFORMS
from bcg.transfer.config import MAX_ROOT_SPEED

DESCRIPTION = """\
Command line: ``bcg grad`` (gradient report), ``bcg tasks``, ``bcg train``, ``bcg eval``,
``bcg transfer`` (native MuJoCo), ``bcg export`` (ONNX), ``bcg deploy`` (LowCmd/LowState loop).

bcg grad --task bouncing_ball                 # table + results/grad_bouncing_ball.{json,png}
bcg grad --model my_robot.xml --json          # machine-readable report on your MJCF
bcg grad --task hopper --estimators analytic,bcg --sweep soft,0.015,stiff
bcg train --task hopper_jump --learner shac --estimator bcg --iterations 200
bcg eval runs/hopper_jump_shac_bcg_stiff_s0 --episodes 8
bcg transfer runs/hopper_jump_shac_bcg_stiff_s0 --runs 5 --render   # native MuJoCo
bcg export runs/hopper_jump_shac_bcg_stiff_s0 --onnx policy.onnx
"""


RUN_COMMANDS = {  # sub-commands that act on a trained run: their help
    "eval": "evaluate a trained policy (deterministic, plain step)",
    "export": "export a trained policy to ONNX (jax2onnx)",
    "transfer": "run a trained policy in native MuJoCo (falls, penetration, tracking, flight)",
    "deploy": "50 Hz deploy loop over unitree_sdk2 LowCmd/LowState (MuJoCo or robot)",
    "pack": "the policy alone (run.json + policy.npz, a few MB) for eval / transfer / export",
}


def _run_parser(sub, common, name: str):
    """The parser of a :data:`RUN_COMMANDS` sub-command, with the ``path`` argument."""
    p = sub.add_parser(name, parents=[common], help=RUN_COMMANDS[name])
    p.add_argument("path", help="run directory or one of its checkpoints/<iteration>")
    return p


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bcg", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
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
    g.set_defaults(func=commands.cmd_grad)

    t = sub.add_parser(
        "tasks", parents=[common], help="list the gradient-report and training tasks"
    )
    t.set_defaults(func=commands.cmd_tasks)

    tr = sub.add_parser(
        "train", parents=[common], help="train a policy (SHAC / BPTT through an estimator, PPO)"
    )
    tr.add_argument(
        "--recipe",
        help="a recipe file (TOML, e.g. recipes/g1_jump.toml: every setting and a schedule; "
        "bcg.learners.recipe); the options given here override it",
    )
    tr.add_argument(
        "--task",
        help="training task (`bcg tasks`; default hopper_jump) or an import path "
        "package.module:factory returning a ContactEnv",
    )
    tr.add_argument("--learner", help="shac | bptt | ppo (default shac)")
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
        "--stiffness", help="soft | stiff | gated[:WIDTH] | solref tc (s) (default stiff)"
    )
    tr.add_argument("--iterations", type=int, help="learner iterations (default 200)")
    tr.add_argument("--num-envs", type=int, help="parallel environments (default 16)")
    tr.add_argument(
        "--horizon", type=int, help="SHAC window (default 32) / BPTT episode steps (default all)"
    )
    tr.add_argument("--actor-hidden", help="actor layer sizes, e.g. 512,256,128 (default 64,64)")
    tr.add_argument("--critic-hidden", help="critic layer sizes (SHAC; default 64,64)")
    tr.add_argument(
        "--init-log-std", type=float, help="initial log action std (default 0 = log 1.0)"
    )
    tr.add_argument("--seed", type=int, help="(default 0)")
    tr.add_argument("--run-dir", help="output folder (default runs/TASK_LEARNER_EST_STIFF_sSEED)")
    tr.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    tr.add_argument("--checkpoint-every", type=int, default=25, help="iterations (default 25)")
    tr.add_argument(
        "--init-from",
        help="(shac / bptt) start from the state of RUN_DIR or RUN_DIR/checkpoints/K (same "
        "sizes and networks; the env may differ, e.g. in reward weights): a training stage",
    )
    tr.add_argument("--eval-episodes", type=int, default=8, help="0 to skip the evaluations")
    tr.add_argument("--timesteps", type=int, help="(ppo) env steps, default from the sizes")
    tr.add_argument(
        "--devices",
        type=int,
        help="shard the env batch over the first N of jax.devices() (default: all; "
        "--num-envs must be divisible by N; shac / bptt)",
    )
    tr.add_argument(
        "--float64", action="store_true", default=None, help="double precision (default float32)"
    )
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.set_defaults(func=commands.cmd_train)

    ev = _run_parser(sub, common, "eval")
    ev.add_argument("--episodes", type=int, default=8)
    ev.add_argument("--seed", type=int, default=1)
    ev.add_argument("--json", action="store_true", help="print the result as JSON")
    ev.set_defaults(func=commands.cmd_eval)

    xp = _run_parser(sub, common, "export")
    xp.add_argument("--onnx", required=True, help="output .onnx (metadata next to it as .json)")
    xp.add_argument("--check", type=int, default=256, help="random observations to check")
    xp.add_argument("--atol", type=float, default=1e-5, help="max abs diff allowed (exit 1)")
    xp.set_defaults(func=commands.cmd_export)

    tf = _run_parser(sub, common, "transfer")
    tf.add_argument("--runs", type=int, default=5, help="runs (default 5)")
    tf.add_argument("--seconds", type=float, help="seconds per run (default: one episode)")
    tf.add_argument("--no-randomize", action="store_true", help="nominal model, no latency/pushes")
    tf.add_argument(
        "--randomization",
        help="items of the env's own randomisation table (the G1's), e.g. 'all,-friction' or "
        "'latency,push' (default: all)",
    )
    tf.add_argument("--render", action="store_true", help="save an mp4 of run 0 (needs GL)")
    tf.add_argument("--video", help="video path (default: next to the JSON, .mp4)")
    tf.add_argument("--no-training-sim", action="store_true", help="skip the MJX comparison")
    tf.add_argument("--seed", type=int, default=0)
    tf.add_argument(
        "--max-root-speed",
        type=float,
        default=MAX_ROOT_SPEED,
        help="m/s: a run whose free root moves faster has blown up and counts as diverged "
        f"(default {MAX_ROOT_SPEED:g}; 0: only MuJoCo's own checks)",
    )
    tf.add_argument("--out", help="JSON path (default RUN_DIR/transfer.json)")
    tf.add_argument("--json", action="store_true", help="print the report as JSON")
    tf.set_defaults(func=commands.cmd_transfer)

    dp = _run_parser(sub, common, "deploy")
    dp.add_argument("--onnx", help="run this exported policy with onnxruntime (default: JAX)")
    dp.add_argument("--seconds", type=float, default=2.0)
    dp.add_argument(
        "--interface", help="network interface of the real robot (needs unitree_sdk2py)"
    )
    dp.add_argument("--seed", type=int, default=0, help="initial state (MuJoCo transport)")
    dp.set_defaults(func=commands.cmd_deploy)

    pk = _run_parser(sub, common, "pack")
    pk.add_argument("out", help="output folder (a run directory that holds only the policy)")
    pk.add_argument(
        "--action-range",
        metavar="env.NAME=VALUE",
        help="set an env parameter of the action range (env.residual_scale=1.0, "
        "env.leg_residual_scale=1.0) and "
        "rescale the policy's mean to keep its unsaturated actions (bcg.transfer.pack)",
    )
    pk.add_argument(
        "--std-scale",
        type=float,
        metavar="F",
        help="multiply the policy's exploration std by F (the mean unchanged), for a further "
        "training stage that explores less (F < 1) or more",
    )
    pk.set_defaults(func=commands.cmd_pack)
    return ap
