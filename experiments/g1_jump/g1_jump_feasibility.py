"""Can the G1's servos make the jump clip fly within the residual action range?

Plays the ``g1_jump`` clip in native MuJoCo (the env's model: stiff contact, 10 solver
iterations, 200 Hz physics, 50 Hz control) from its first frame with a *fixed* feedback law in
place of a policy, each control step ``k``:

    ctrl = q*_k + clip((q*_{k+L} - q*_k) + alpha (q*_k - q), -r, r)

``L`` frames of phase lead, ``alpha`` the joint-error feedback gain (``alpha = 1`` doubles the
servos' proportional gain in effect), ``r`` the residual bound (the training's
``env.residual_scale``; ``inf`` for none). ``L = alpha = 0`` replays the clip through the servos.
A second table replays the clip (``L = alpha = 0``) on models whose servos are stiffer,
``G1Config.kp_scale`` s in ``--kp-scales`` (kp x s, kd x sqrt(s)).
Per law it prints the highest lowest-foot clearance, the longest airborne stretch (lowest foot
above 5 mm, the transfer's flight measure), whether the root fell below 0.3 m and the largest
residual used. No balance feedback on the base: a law that flies may still topple, which is
what the policy has to add. Seconds on a CPU.

    .venv/bin/python experiments/g1_jump/g1_jump_feasibility.py [--json]
"""

from __future__ import annotations

import argparse
import json

import mujoco
import numpy as np

from bcg.envs.g1.tracking import g1_jump

LAWS = [  # (lead L, gain alpha, residual bound r)
    (0, 0.0, np.inf),
    (2, 0.0, np.inf),
    (3, 0.0, np.inf),
    (0, 1.0, np.inf),
    (2, 1.0, 0.5),
    (2, 2.0, np.inf),
    (2, 2.0, 0.5),
    (3, 2.0, 0.5),
    (2, 3.0, 0.5),
]


def play(env, lead: int, alpha: float, bound: float = np.inf) -> dict:
    """One clip playback under the feedback law (module docstring)."""
    m = env.sim.mj_model
    ref = env.reference
    n_sub = int(round(env.sim.control_dt / m.opt.timestep))
    feet = env.foot_geom_ids
    lo, hi = m.actuator_ctrlrange.T
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = ref.qpos[0], ref.qvel[0]
    if m.na:
        d.act[:] = ref.qpos[0, 7:]
    T = ref.num_frames
    clearance, longest, run, used, fell = 0.0, 0, 0, 0.0, False
    for k in range(T - 1):
        q_ref = ref.qpos[k, 7:]
        res = ref.qpos[min(k + lead, T - 1), 7:] - q_ref + alpha * (q_ref - d.qpos[7:])
        res = np.clip(res, -bound, bound)
        used = max(used, float(np.abs(res).max()))
        d.ctrl[:] = np.clip(q_ref + res, lo, hi)
        for _ in range(n_sub):
            mujoco.mj_step(m, d)
        mujoco.mj_kinematics(m, d)
        low = float(np.min(d.geom_xpos[feet, 2] - m.geom_size[feet, 0]))
        clearance = max(clearance, low)
        run = run + 1 if low > 0.005 else 0
        longest = max(longest, run)
        if d.qpos[2] < env.min_height:
            fell = True
            break
    return {
        "lead": lead,
        "alpha": alpha,
        "bound": None if np.isinf(bound) else bound,
        "clearance_cm": 100 * clearance,
        "flight_s": longest * env.sim.control_dt,
        "fell": fell,
        "max_residual_rad": used,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--kp-scales", default="1,2,2.5,3", help="comma list for the replay table")
    args = ap.parse_args(argv)
    env = g1_jump("stiff")
    ref = env.reference
    rows = [play(env, *law) for law in LAWS]
    scales = [float(x) for x in args.kp_scales.split(",") if x]
    replays = [
        {"kp_scale": s, **play(g1_jump("stiff", config={"kp_scale": s}), 0, 0.0)} for s in scales
    ]
    clip = {
        "clearance_cm": 100 * float(ref.foot_height.max()),
        "flight_frames": int(np.sum(ref.foot_height > 0.005)),
    }
    if args.json:
        print(json.dumps({"clip": clip, "laws": rows, "kp_scale_replays": replays}, indent=1))
        return
    print(f"clip: foot clearance {clip['clearance_cm']:.1f} cm, {clip['flight_frames']} frames")
    print("lead alpha bound | clearance (cm) flight (s) fell max residual (rad)")
    for r in rows:
        b = "inf" if r["bound"] is None else f"{r['bound']:.1f}"
        print(
            f"{r['lead']:4d} {r['alpha']:5.1f} {b:>5} | {r['clearance_cm']:14.1f} "
            f"{r['flight_s']:10.2f} {str(r['fell']):>5} {r['max_residual_rad']:8.2f}"
        )
    print("clip replay (zero residual) | clearance (cm) flight (s) fell")
    for r in replays:
        print(
            f"kp_scale {r['kp_scale']:4.1f}               | {r['clearance_cm']:14.1f} "
            f"{r['flight_s']:10.2f} {str(r['fell']):>5}"
        )


if __name__ == "__main__":
    main()
