"""Singular values of the G1's foot-centre Jacobian w.r.t. its leg joints along the jump clip.

    python experiments/g1_jump/g1_limb_conditioning.py

For every frame of the built-in ``jump`` reference clip (native MuJoCo kinematics) and each
foot on or within 2 cm of the floor, J is the translational Jacobian of the foot's sole centre
(mean of its 4 contact spheres, lowered by their radius) restricted to the dofs ``bcg``'s limb
offsets perturb (:func:`bcg.estimators.offsets.limb_columns`: the 6 leg joints). Prints the
percentiles of its singular values, the direction of the smallest one at the first (standing)
frame, and the joint offset that ``M = J^T (J J^T + lambda I)^-1`` asks for a 1 cm offset along
it. Compare with the hopper's ``python benchmarks/bundle_offset_probe.py --task hopper``.
"""

from __future__ import annotations

import argparse

import mujoco
import numpy as np

from bcg.envs.g1 import clips
from bcg.envs.g1 import model as g1m
from bcg.estimators.bcg import BCG
from bcg.estimators.offsets import limb_columns
from bcg.estimators.trigger import group_bodies


def sole_jacobian(m, d, body, cols, feet):
    spheres = [f for f in feet if m.geom_bodyid[f] == body]
    centre = d.geom_xpos[spheres].mean(0) - [0.0, 0.0, m.geom_size[spheres[0], 0]]
    jac = np.zeros((3, m.nv))
    mujoco.mj_jac(m, d, jac, None, centre, body)
    return centre, jac[:, cols]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--damping", type=float, default=BCG().damping, help="lambda of the pseudo-inverse"
    )
    p.add_argument("--max-height", type=float, default=0.02, help="foot counts up to this (m)")
    a = p.parse_args(argv)
    m = g1m.mj_model()
    d = mujoco.MjData(m)
    clip = clips.jump_clip()
    feet, bodies, cols = g1m.foot_geom_ids(m), group_bodies(m), limb_columns(m)
    svals = []
    for q in clip.qpos:
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        for g, b in enumerate(bodies):
            centre, J = sole_jacobian(m, d, b, cols[g], feet)
            if centre[2] <= a.max_height:
                svals.append(np.linalg.svd(J, compute_uv=False))
    s = np.array(svals)
    pct = (0, 10, 50, 90, 100)
    print(
        f"{len(s)} foot-frames of {clip.num_frames} frames x {len(bodies)} feet; percentiles {pct}"
    )
    for i, name in enumerate(("largest", "middle", "smallest")):
        print(f"  {name} singular value (m/rad): {np.round(np.percentile(s[:, i], pct), 3)}")
    print(f"  smallest / largest: {np.round(np.percentile(s[:, 2] / s[:, 0], pct), 3)}")
    d.qpos[:] = clip.qpos[0]
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    _, J = sole_jacobian(m, d, bodies[0], cols[0], feet)
    U, sv, _ = np.linalg.svd(J)
    dq = J.T @ np.linalg.solve(J @ J.T + a.damping * np.eye(3), 0.01 * U[:, -1])
    print(
        f"frame 0, first foot: singular values {np.round(sv, 3)}, "
        f"smallest along {np.round(U[:, -1], 3)}"
    )
    print(f"  1 cm along it needs dq = {np.round(dq, 3)} rad (max |dq| {np.abs(dq).max():.3f})")
    max_dq = BCG().max_dq
    realised = 1e3 * np.linalg.norm(J @ np.clip(dq, -max_dq, max_dq))
    print(f"  realised after the {max_dq} rad clamp: {realised:.2f} mm")


if __name__ == "__main__":
    main()
