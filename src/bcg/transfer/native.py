"""Sim-to-sim transfer: run a trained policy in native MuJoCo (``bcg transfer RUN_DIR``).

This module is the public face of the transfer modules; it re-exports their names:

* :mod:`bcg.transfer.config`: :class:`TransferConfig` and the full solver's iteration counts;
* :mod:`bcg.transfer.model`: :func:`native_model`, the model transferred to;
* :mod:`bcg.transfer.bridge`: :class:`NativeBridge` (the env's JAX functions on native data),
  :func:`data_from_mjx`, :func:`warm_cached_properties`;
* :mod:`bcg.transfer.measures`: fall, tracking error and foot penetration per control step;
* :mod:`bcg.transfer.randomizer`: :class:`Randomizer`, the per-run domain randomisation;
* :mod:`bcg.transfer.runs`: :func:`run_native` and :func:`run_training_sim`, the episodes;
* :mod:`bcg.transfer.render`: video of the first native run;
* :mod:`bcg.transfer.report`: :func:`transfer` (the report) and :func:`format_report`.

The training simulator is MJX at the training contact stiffness with a 1-iteration
differentiable solver. The transfer target is native MuJoCo with

* MuJoCo's default contact: the env's MJCF loaded with stiffness ``"model"`` (its own solref;
  MuJoCo's default time constant 0.02 s when the MJCF sets none), or ``env.native_model()``;
* the full constraint solver: ``opt.iterations`` / ``ls_iterations`` raised to MuJoCo's
  defaults (100 / 50) unless the MJCF asks for more;
* domain randomisation per run (:class:`Randomizer`): the G1 env's own table (docs/method.md)
  (:mod:`bcg.envs.g1.randomization`); for other envs ``env.randomize(mj_model, rng)`` when the
  env has it, plus the runtime part of the table that does not change the model: action
  latency of 0 or 1 control steps (per run; the servos receive the previous step's ``ctrl``,
  the command as the policy sent it, reference frame included) and pushes every U(1, 3) s
  (root velocity += U(+-0.5, +-0.5, +-0.2) m/s, U(+-0.52, +-0.52, +-0.78) rad/s) on models
  whose root is a free joint.

Each run starts from ``env.initial_data(key)`` (the env's reset distribution; the same keys for
both simulators) and lasts ``seconds`` (default: one episode) or until a fall. Observations,
rewards, falls and tracking errors are the env's own JAX functions evaluated on the native
state (every ``mjx.Data`` field that MuJoCo's ``MjData`` has, copied after each control step, so
``observe`` sees what it sees in training: the state after ``mj_step``, whose derived fields
(xpos, ...) are those of the last physics step's start, exactly as after ``mjx.step``).

Reported per run and as means, for both simulators (the training sim run is the same policy from
the same initial states, nominal model, no latency or pushes):

* fall: ``env.fell(data)`` (default ``env.terminated(data)``; the report says which);
* foot penetration: mean over contact steps (control steps with a foot-ground contact at
  negative distance) of the deepest foot-ground penetration max(0, -dist) (mm); foot geoms
  from ``env.foot_geom_ids``, else geoms whose name contains "foot", else every non-world geom;
* tracking error (cm), when the env has a reference: ``env.tracking_error(data)`` (metres) on
  forward kinematics of the current state;
* flight: the highest foot clearance (cm; the smallest foot-ground distance of a control step)
  and the longest stretch with every foot off the ground (s);
* return: sum of ``env.reward`` until the fall (the reward of the falling step included);
* diverged: native MuJoCo blew up (:func:`bcg.transfer.measures.native_unstable`: a
  non-finite state, MuJoCo's bad qacc / qpos / qvel warning, after which it resets the data,
  or a free root faster than ``cfg.max_root_speed``, 10 m/s by default); the run stops there,
  counts as fallen and has no flight measures.
"""

from __future__ import annotations

from bcg.transfer.bridge import NativeBridge, data_from_mjx, warm_cached_properties
from bcg.transfer.config import (
    MUJOCO_DEFAULT_ITERATIONS,
    MUJOCO_DEFAULT_LS_ITERATIONS,
    TransferConfig,
)
from bcg.transfer.measures import (
    fall_criterion,
    foot_contact_slots,
    foot_geoms,
    foot_penetration_mjx,
    foot_penetration_native,
    tracking_fn,
)
from bcg.transfer.model import free_root as _free_root
from bcg.transfer.model import native_model
from bcg.transfer.randomizer import Randomizer
from bcg.transfer.render import make_renderer as _make_renderer
from bcg.transfer.render import render_frame as _render
from bcg.transfer.render import save_video
from bcg.transfer.report import format_report, transfer
from bcg.transfer.report import summarize as _summary
from bcg.transfer.runs import episode_steps as _steps
from bcg.transfer.runs import run_key as _run_key
from bcg.transfer.runs import run_native, run_training_sim

__all__ = [
    "MUJOCO_DEFAULT_ITERATIONS",
    "MUJOCO_DEFAULT_LS_ITERATIONS",
    "NativeBridge",
    "Randomizer",
    "TransferConfig",
    "data_from_mjx",
    "fall_criterion",
    "foot_contact_slots",
    "foot_geoms",
    "foot_penetration_mjx",
    "foot_penetration_native",
    "format_report",
    "native_model",
    "run_native",
    "run_training_sim",
    "save_video",
    "tracking_fn",
    "transfer",
    "warm_cached_properties",
    # helpers of the submodules, under this module's private names
    "_free_root",
    "_make_renderer",
    "_render",
    "_run_key",
    "_steps",
    "_summary",
]
