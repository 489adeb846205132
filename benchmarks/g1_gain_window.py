"""Native runs of a G1 policy with its leg servos stiffened only inside a window of clip frames
(an experiment: would a gain schedule, which the G1's LowCmd allows per message, keep the stiff
push-off and the nominal-gain balance elsewhere?).

    python benchmarks/g1_gain_window.py CKPT --window 60,85 --factor 2 [--runs 5] [--seed 0]

Inside frames [a, b) the 12 leg servos get kp x factor and kd x sqrt(factor) (and the joint
offset's kp share with them) on top of the run's randomised gains; elsewhere the policy's own
gains. Runs are played as ``bcg transfer`` plays them (same draws, latency, pushes).
"""

from __future__ import annotations

import argparse
import json
import math

import mujoco
import numpy as np

from bcg.envs.g1.model import is_leg_joint
from bcg.transfer import measures
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
    p.add_argument("--json")
    a = p.parse_args(argv)
    lo, hi = (int(x) for x in a.window.split(","))
    policy = load_policy(a.path)
    cfg = TransferConfig(runs=a.runs, seed=a.seed, training_sim=False)
    m, _ = native_model(policy.env, policy.run.get("task"), cfg)
    feet, _ = measures.foot_geoms(policy.env, m)
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(m.nu)]
    legs = np.array([i for i, n in enumerate(names) if is_leg_joint(n)], int)
    base = {}

    def on_step(i, t, mi, d):
        if t == 0:
            base[i] = (mi.actuator_gainprm[legs, 0].copy(), mi.actuator_biasprm[legs].copy())
        kp, bias = base[i]
        f = a.factor if lo <= t + 1 < hi else 1.0  # the gains of the next control step
        mi.actuator_gainprm[legs, 0] = f * kp
        mi.actuator_biasprm[legs, 0] = f * bias[:, 0]
        mi.actuator_biasprm[legs, 1] = f * bias[:, 1]
        mi.actuator_biasprm[legs, 2] = math.sqrt(f) * bias[:, 2]

    runs, _, _ = run_native(policy, cfg, m, feet=feet, on_step=on_step)
    for r in runs:
        print(
            f"run {r['run']}: {'FELL at %.2f s' % r['fall_time'] if r['fell'] else 'landed'}"
            f"  latency {r['latency_steps']}  tracking {r['tracking_error_cm']:.1f} cm"
            f"  clearance {r['clearance_cm']:.1f} cm  airborne {r['airborne_s']:.2f} s"
        )
    falls = sum(r["fell"] for r in runs)
    clear = [r["clearance_cm"] for r in runs]
    print(
        f"window {lo}-{hi} x{a.factor:g}: falls {falls}/{len(runs)}, clearance mean "
        f"{np.nanmean(clear):.1f} cm, airborne mean {np.nanmean([r['airborne_s'] for r in runs]):.3f} s"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"window": [lo, hi], "factor": a.factor, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
