"""Replay the G1 clip's reference through the servos in native MuJoCo, with and without
feed-forward terms in the servo target (is the reference executable by PD tracking alone?).

    python experiments/g1_jump/g1_reference_replay.py [--clip jump] [--runs 5] [--seed 0]
        [--lead 0,2] [--vel-ff 0,1] [--no-randomize] [--leg-kp-scale S] [--json OUT]

A position servo applies ``kp (u - q) - kd qdot``. Commanding the reference pose ``u = q*``
brakes every reference motion with ``-kd qdot*`` (G1 servos: kd / kp = 2 zeta / omega
= 64 ms, so a 10 rad/s knee extension lags by about 0.6 rad). Variants of the target:

    u = q*(f + lead) + c (kd / kp) qdot*(f + lead)

``lead`` in control steps, ``c`` in {0, 1}: with ``c = 1`` the servo law becomes
``kp (q* - q) + kd (qdot* - qdot)``, the law of the G1's LowCmd with its ``dq`` field set to
the reference velocity. Runs are drawn as ``bcg transfer`` draws them (model items, latency,
pushes, reset noise) unless ``--no-randomize``; the policy is replaced by the replay.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

from bcg.envs.g1.tracking import g1_tracking
from bcg.transfer.bridge import NativeBridge
from bcg.transfer.config import TransferConfig
from bcg.transfer.model import native_model
from bcg.transfer.policy import LoadedPolicy
from bcg.transfer.runs import run_native

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import row_line, runs_row  # noqa: E402


class ReplayBridge(NativeBridge):
    """A bridge whose ``ctrl`` ignores the action and commands the fed-forward reference."""

    def __init__(self, env, m, lead: int, vel_ff: float):
        super().__init__(env, m)
        ref = env.reference
        self.q = np.asarray(ref.qpos[:, 7:])
        self.qd = np.asarray(ref.qvel[:, 6:])
        kp = m.actuator_gainprm[:, 0]
        kd = -m.actuator_biasprm[:, 2]
        self.ratio = kd / kp
        self.lead, self.vel_ff = lead, vel_ff
        self.lo, self.hi = m.actuator_ctrlrange.T
        self.dt = env.sim.control_dt

    def ctrl(self, action, d):
        f = min(int(round(d.time / self.dt)) + self.lead, len(self.q) - 1)
        u = self.q[f] + self.vel_ff * self.ratio * self.qd[f]
        return np.clip(u, self.lo, self.hi)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clip", default="jump")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lead", default="0,2", help="comma list of leads (control steps)")
    p.add_argument("--vel-ff", default="0,1", help="comma list of velocity feed-forward c")
    p.add_argument("--no-randomize", action="store_true")
    p.add_argument("--leg-kp-scale", type=float, default=None)
    p.add_argument("--json")
    a = p.parse_args(argv)
    config = {} if a.leg_kp_scale is None else {"leg_kp_scale": a.leg_kp_scale}
    env = g1_tracking(a.clip, stiffness="stiff", actions="residual", config=config)
    zero = LoadedPolicy(
        fn=lambda obs: 0.0 * obs[:, : env.action_size],
        env=env,
        run={},
        run_dir=Path("."),
        iteration=None,
        env_steps=None,
        learner="replay",
    )
    cfg = TransferConfig(runs=a.runs, seed=a.seed, training_sim=False, randomize=not a.no_randomize)
    m, _ = native_model(env, None, cfg)
    rows = []
    leads = [int(x) for x in a.lead.split(",")]
    ffs = [float(x) for x in a.vel_ff.split(",")]
    for lead, ff in itertools.product(leads, ffs):
        bridge = ReplayBridge(env, m, lead, ff)
        runs, _, _ = run_native(zero, cfg, m, bridge=bridge)
        row = {"lead": lead, "vel_ff": ff, **runs_row(runs)}
        rows.append(row)
        print(f"lead {lead} vel_ff {ff:g}: {row_line(row)}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"clip": a.clip, "leg_kp_scale": a.leg_kp_scale, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
