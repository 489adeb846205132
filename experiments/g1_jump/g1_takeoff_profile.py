"""Push-off and flight of a G1 jump policy, frame by frame, against the reference.

Plays the policy deterministically in its training simulator (MJX, its training contact, the
nominal model: no randomisation, plain step) from the clip's first frame, and prints for the
frames around the jump the root's vertical speed ``v_z`` beside the reference's ``v*_z``, the
lowest foot's height ``h`` (foot clearance) beside ``h*``, and the root-to-lowest-foot height
``z - h`` beside the reference's (how far the legs are retracted).

    .venv/bin/python experiments/g1_jump/g1_takeoff_profile.py \\
        results/g1/A_stage12_leg10_partial [RUN ...]
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import numpy as np

from bcg.envs.g1.randomization import Randomization
from bcg.transfer.policy import load_policy


def profile(path, frames: int = 90) -> dict:
    """Per control step k (state after step k, reference frame k + 1): v_z, h, z - h."""
    pol = load_policy(path)
    env = dataclasses.replace(pol.env, start="first", randomization=Randomization.none())
    d = env.initial_data(jax.random.PRNGKey(0))

    @jax.jit
    def step(d):
        nxt = env.plain_step(d, pol.fn(env.observe(d)[None])[0])[0]
        return nxt, env._foot_low(env.kinematics(nxt))

    vz, h, z = [], [], []
    for _ in range(frames):
        d, low = step(d)
        vz.append(float(d.qvel[2]))
        h.append(float(low))
        z.append(float(d.qpos[2]))
    ref_q, ref_v = np.asarray(env._ref["qpos"]), np.asarray(env._ref["qvel"])
    ref_h = np.asarray(env.reference.foot_height)
    k = np.arange(1, frames + 1)
    return {
        "frame": k,
        "vz": np.array(vz),
        "vz_ref": ref_v[k, 2],
        "h": np.array(h),
        "h_ref": ref_h[k],
        "leg": np.array(z) - np.array(h),
        "leg_ref": ref_q[k, 2] - ref_h[k],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="run directories, checkpoints or packed policies")
    p.add_argument("--first", type=int, default=57, help="first frame printed")
    p.add_argument("--last", type=int, default=85, help="last frame printed")
    p.add_argument("--every", type=int, default=2)
    args = p.parse_args(argv)
    for path in args.runs:
        r = profile(path, args.last + 1)
        print(f"\n{path}")
        print("| frame | v_z (m/s) | v*_z | h (cm) | h* | z - h (cm) | z* - h* |")
        print("|---|---|---|---|---|---|---|")
        for i in range(args.first - 1, args.last, args.every):
            print(
                f"| {r['frame'][i]} | {r['vz'][i]:.2f} | {r['vz_ref'][i]:.2f} | "
                f"{100 * r['h'][i]:.1f} | {100 * r['h_ref'][i]:.1f} | "
                f"{100 * r['leg'][i]:.1f} | {100 * r['leg_ref'][i]:.1f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
