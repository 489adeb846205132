"""The ``bcg`` command line: :func:`main` parses the arguments (:mod:`bcg.cli.parser`), sets up
JAX (:mod:`bcg.cli.jax_setup`) and runs the subcommand's handler (:mod:`bcg.cli.commands`),
reporting a bad argument as one line ``bcg: error: ...`` with exit code 2.

``bcg --help`` lists the subcommands; ``python -m bcg.cli`` is the same command.
"""

from __future__ import annotations

import contextlib
import sys

from bcg.cli.commands import (
    _run_description,
    cmd_deploy,
    cmd_eval,
    cmd_export,
    cmd_grad,
    cmd_tasks,
    cmd_train,
    cmd_transfer,
)
from bcg.cli.jax_setup import PLATFORMS, device_line
from bcg.cli.jax_setup import select_platform as _select_platform
from bcg.cli.jax_setup import setup_jax as _setup_jax
from bcg.cli.parser import build_parser
from bcg.options import parse_stiffness as _parse_stiffness

__all__ = [
    "PLATFORMS",
    "build_parser",
    "cmd_deploy",
    "cmd_eval",
    "cmd_export",
    "cmd_grad",
    "cmd_tasks",
    "cmd_train",
    "cmd_transfer",
    "device_line",
    "main",
    # used by tests and benchmarks under these names
    "_parse_stiffness",
    "_run_description",
    "_select_platform",
    "_setup_jax",
]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)

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
