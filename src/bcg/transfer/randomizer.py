"""Per-run domain randomisation of the native transfer runs.

The G1 env randomises with its own table (docs/method.md, :mod:`bcg.envs.g1.randomization`);
any other env with ``env.randomize(mj_model, rng)`` (default: the model unchanged), plus the
runtime part of the table that does not change the model, drawn by the shared sampler
(:func:`bcg.envs.episode_randomization.sample_episode`, its default ranges): action latency of
0 or 1 control steps (per run) and pushes every U(1, 3) s (root velocity += U(+-0.5, +-0.5,
+-0.2) m/s, U(+-0.52, +-0.52, +-0.78) rad/s) on models whose root is a free joint.
"""

from __future__ import annotations

import copy

import mujoco

from bcg.envs.base import ContactEnv
from bcg.envs.episode_randomization import (
    LATENCY,
    PUSH_INTERVAL,
    sample_episode,
)
from bcg.transfer.bridge import warm_cached_properties
from bcg.transfer.config import TransferConfig
from bcg.transfer.model import free_root


class Randomizer:
    """Per-run domain randomisation of the native runs.

    * an env with its own table (:meth:`ContactEnv.native_randomization` not None, e.g. the G1
      tracking env: :class:`bcg.envs.g1.randomization.NativeRandomization`, items from
      ``cfg.randomization``) randomises the model, the episode (latency, pushes) and the
      initial states itself; ``cfg.latency`` / ``cfg.pushes`` False switch its latency /
      pushes off after they are drawn, so a run meets the same model and initial state with
      and without them;
    * any other env: ``env.randomize(mj_model, rng)`` (default: the model unchanged), action
      latency 0 or 1 control steps and pushes every U(1, 3) s on free-joint roots (the paper's
      ranges).
    """

    def __init__(self, env, cfg: TransferConfig, m: mujoco.MjModel):
        self.env, self.cfg, self.root = env, cfg, free_root(m)
        self.init_env = env
        self.own = None
        if not cfg.randomize:  # an env's own table switched off still picks the start states
            nominal = env.native_randomization("none")
            if nominal is not None:
                self.init_env = nominal.init_env
                warm_cached_properties(self.init_env)
            self.notes = ["no randomisation"]
            return
        self.own = env.native_randomization(cfg.randomization)
        if self.own is not None:
            self.init_env = self.own.init_env
            warm_cached_properties(self.init_env)
            self.notes = list(self.own.notes)
            self.notes += [
                f"{k} off" for k, on in (("latency", cfg.latency), ("pushes", cfg.pushes)) if not on
            ]
            return
        has_model = type(env).randomize is not ContactEnv.randomize
        pushes = cfg.pushes and self.root is not None
        self.notes = [
            "model randomisation: "
            + ("env.randomize" if has_model else "none (the env declares no randomize())"),
            "runtime randomisation: "
            + ("latency 0/1 step" if cfg.latency else "no latency")
            + (
                ", pushes every U(1,3) s"
                if pushes
                else (", no pushes (root is not a free joint)" if cfg.pushes else "")
            ),
        ]

    def model(self, m, rng):
        if not self.cfg.randomize:
            return m
        if self.own is not None:
            return self.own.model(m, rng)
        mm = copy.copy(m)
        out = self.env.randomize(mm, rng)
        return out if isinstance(out, mujoco.MjModel) else mm

    def episode(self, rng, steps: int, control_dt: float) -> tuple[int, dict]:
        """(latency in control steps, {control step: (linear, angular) root kick})."""
        if not self.cfg.randomize:
            return 0, {}
        if self.own is not None:  # drawn in full, then switched off: the same draws either way
            latency, pushes = self.own.episode(rng, steps, control_dt)
            return (latency if self.cfg.latency else 0), (pushes if self.cfg.pushes else {})
        ep = sample_episode(
            rng,
            control_dt,
            steps,
            latency=LATENCY if self.cfg.latency else None,
            push_interval=PUSH_INTERVAL if self.cfg.pushes and self.root is not None else None,
        )
        return ep.latency, {p.step: (p.linear, p.angular) for p in ep.pushes}
