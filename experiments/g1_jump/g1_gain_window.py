"""Native runs of a G1 policy with its leg servos stiffened only inside a window of clip frames
(an experiment: would a gain schedule, which the G1's LowCmd allows per message, keep the stiff
push-off and the nominal-gain balance elsewhere?).

    python experiments/g1_jump/g1_gain_window.py CKPT --window 60,85 --factor 2 [--runs 5] \\
        [--seed 0]

Inside frames [a, b) the 12 leg servos get kp x factor and kd x sqrt(factor) on top of the
run's randomised gains (:func:`bcg.envs.g1.model.leg_servo_schedule`, the schedule that
``G1Config.leg_kp_window`` trains with); elsewhere the policy's own gains. Runs are played as
``bcg transfer`` plays them (same draws, latency, pushes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from bcg.envs.g1.model import leg_servo_schedule
from bcg.transfer.config import TransferConfig
from bcg.transfer.model import native_model
from bcg.transfer.policy import load_policy
from bcg.transfer.runs import run_native


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--window", default="60,85", help="clip frames a,b (control steps)")
    p.add_argument("--factor", type=float, default=2.0)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--zero", action="store_true", help="zero actions: replay the reference")
    p.add_argument("--json")
    a = p.parse_args(argv)
    lo, hi = (int(x) for x in a.window.split(","))
    policy = load_policy(a.path)
    env = policy.env
    at = leg_servo_schedule(env.sim.mj_model, (lo, hi), a.factor, env.sim.control_dt)
    env = dataclasses.replace(env, sim=dataclasses.replace(env.sim, servo_scale_at=at))
    policy = dataclasses.replace(policy, env=env)
    if a.zero:  # residual actions: a = 0 holds the current reference frame's joints
        policy = dataclasses.replace(policy, fn=lambda obs: 0.0 * obs[:, : env.action_size])
    cfg = TransferConfig(runs=a.runs, seed=a.seed, training_sim=False)
    m, _ = native_model(env, policy.run.get("task"), cfg)
    runs, _, _ = run_native(policy, cfg, m)
    for r in runs:
        print(
            f"run {r['run']}: "
            + (f"FELL at {r['fall_time']:.2f} s" if r["fell"] else "landed")
            + f"  latency {r['latency_steps']}  tracking {r['tracking_error_cm']:.1f} cm"
            f"  clearance {r['clearance_cm']:.1f} cm  airborne {r['airborne_s']:.2f} s"
        )
    falls = sum(r["fell"] for r in runs)
    clear = np.nanmean([r["clearance_cm"] for r in runs])
    air = np.nanmean([r["airborne_s"] for r in runs])
    print(
        f"window {lo}-{hi} x{a.factor:g}: falls {falls}/{len(runs)}, clearance mean "
        f"{clear:.1f} cm, airborne mean {air:.3f} s"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"window": [lo, hi], "factor": a.factor, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
