"""Step-by-step trace of `bcg transfer`'s native runs: pelvis height, vertical speed, tilt and
the lowest foot's clearance and the knee angles per control step, to see when and how a run
falls.

    python experiments/g1_jump/g1_native_trace.py results/g1/A_stage2 --runs 4 [--every 3]

Runs 0..max(--runs) are played exactly as ``bcg transfer`` plays them (same seed, same
randomisation draws, latency and pushes); the listed runs are printed. Tilt is the angle
between the pelvis's z axis and the world's vertical.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from bcg.transfer import measures
from bcg.transfer.config import TransferConfig
from bcg.transfer.model import native_model
from bcg.transfer.policy import load_policy
from bcg.transfer.runs import run_native


def tilt_degrees(quat) -> float:
    """Angle between a body's z axis (unit quaternion w, x, y, z) and the world's vertical."""
    _, x, y, _ = quat
    return float(np.degrees(np.arccos(np.clip(1.0 - 2.0 * (x * x + y * y), -1.0, 1.0))))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", help="run directory, checkpoint or packed policy")
    p.add_argument("--runs", default="0", help="runs to print, comma-separated")
    p.add_argument("--every", type=int, default=3, help="print every k-th step (and the last 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the full traces here")
    a = p.parse_args(argv)
    which = [int(x) for x in a.runs.split(",")]
    policy = load_policy(a.path)
    cfg = TransferConfig(runs=max(which) + 1, seed=a.seed)
    m, _ = native_model(policy.env, policy.run.get("task"), cfg)
    feet, _ = measures.foot_geoms(policy.env, m)
    knees = [m.jnt_qposadr[j] for j in range(m.njnt) if "knee" in m.joint(j).name]
    traces = {i: [] for i in which}

    def on_step(i, t, mi, d):
        if i in traces:
            c = measures.foot_clearance_native(mi, d, feet)
            knee = tuple(float(d.qpos[k]) for k in knees)
            row = (float(d.time), float(d.qpos[2]), float(d.qvel[2]), tilt_degrees(d.qpos[3:7]), c)
            traces[i].append(row + (knee,))

    runs, _, _ = run_native(policy, cfg, m, feet=feet, on_step=on_step)
    for i in which:
        r = runs[i]
        print(f"run {i}: fell at {r['fall_time']} s, latency {r['latency_steps']}")
        rows = traces[i]
        for k, (t, z, vz, tilt, c, knee) in enumerate(rows):
            if k % a.every == 0 or k >= len(rows) - 5:
                print(
                    f"  t={t:5.2f} s  z={z:.3f} m  vz={vz:+.2f} m/s  "
                    f"tilt={tilt:5.1f} deg  clearance={100 * c:5.1f} cm  knees="
                    + " ".join(f"{x:.2f}" for x in knee)
                    + " rad"
                )
    if a.json:
        keys = ("time", "root_z", "root_vz", "tilt_deg", "clearance_m", "knees_rad")
        out = {str(i): [dict(zip(keys, row, strict=True)) for row in traces[i]] for i in which}
        with open(a.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
