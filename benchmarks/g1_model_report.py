"""G1 model and clip report (native MuJoCo; no MJX compile unless --mjx).

Measures, and prints as a table (``--json`` for machine-readable output):

* model: mass, nq / nv / nu, PD gains per motor group, crouch pelvis height;
* standing: 2 s in the default crouch under PD + the ankle CoM feedback of
  :func:`bcg.envs.g1.model.balance_ctrl` at soft and stiff contact: final pelvis height, largest
  foot penetration, foot sliding; and fixed-target PD alone (tips over: time of the fall);
* clips: duration, frames at 50 Hz, airborne time (lowest foot sphere > 5 mm), largest foot
  clearance, root height range, largest joint speed, joint-limit margin;
* native speed: physics steps per second of the G1 in native MuJoCo;
* ``--mjx``: MJX forward control steps per second at a batch (compile time reported).

Usage: ``.venv/bin/python benchmarks/g1_model_report.py [--json] [--mjx --batch 64]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

from bcg.envs.g1 import clips as gc
from bcg.envs.g1 import model as gm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import stand  # noqa: E402


def clip_stats(name: str) -> dict:
    c = gc.BUILTIN_CLIPS[name](fps=50.0)
    h = gc.clip_foot_heights(c)
    m = gm.mj_model(visuals=False)
    lo, hi = m.jnt_range[1:].T
    margin = float(np.min(np.minimum(c.joints - lo, hi - c.joints)))
    v = c.qvel()
    air = h > 0.005
    return {
        "clip": name,
        "duration_s": round(c.duration, 3),
        "frames_50hz": c.num_frames,
        "airborne_s": round(float(air.sum()) / c.fps, 3),
        "airborne_phases": int(np.sum(air[1:] & ~air[:-1])),
        "max_foot_clearance_m": round(float(h.max()), 4),
        "start_end_foot_height_mm": [round(1e3 * float(h[0]), 3), round(1e3 * float(h[-1]), 3)],
        "root_height_range_m": [
            round(float(c.qpos[:, 2].min()), 3),
            round(float(c.qpos[:, 2].max()), 3),
        ],
        "max_root_vz_m_s": round(float(np.abs(v[:, 2]).max()), 3),
        "max_joint_speed_rad_s": round(float(np.abs(v[:, 6:]).max()), 2),
        "joint_limit_margin_rad": round(margin, 3),
    }


def native_speed(seconds: float = 2.0) -> float:
    m = gm.mj_model(visuals=False)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    n = int(seconds / m.opt.timestep)
    t = time.perf_counter()
    for _ in range(n):
        mujoco.mj_step(m, d)
    return n / (time.perf_counter() - t)


def mjx_speed(batch: int, steps: int = 20) -> dict:
    import jax
    import jax.numpy as jnp

    from bcg.envs.g1.tracking import g1_jump

    env = g1_jump()
    keys = jax.random.split(jax.random.PRNGKey(0), batch)
    d = jax.vmap(env.initial_data)(keys)

    @jax.jit
    def run(d):
        def body(d, _):
            d, r, _ = jax.vmap(env.plain_step)(d, jnp.zeros((batch, 29)))
            return d, r

        return jax.lax.scan(body, d, None, steps)

    t = time.perf_counter()
    out = run(d)
    jax.block_until_ready(out)
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    out = run(d)
    jax.block_until_ready(out)
    dt = time.perf_counter() - t
    return {
        "batch": batch,
        "compile_and_first_run_s": round(compile_s, 1),
        "control_steps_per_s": round(batch * steps / dt, 1),
        "physics_steps_per_s": round(batch * steps * env.sim.substeps / dt, 1),
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--mjx", action="store_true", help="also time MJX forward steps (compiles)")
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args(argv)

    m = gm.mj_model(visuals=False)
    kp, kd = gm.pd_gains(m.dof_armature[6:])
    report = {
        "model": {
            "source": str(gm.source_mjcf()),
            "mass_kg": round(float(m.body_mass.sum()), 3),
            "nq_nv_nu": [m.nq, m.nv, m.nu],
            "crouch_pelvis_height_m": round(float(m.key_qpos[0][2]), 4),
            "kp_kd": {
                n: [round(float(a), 2), round(float(b), 3)]
                for n, a, b in zip(gm.JOINT_NAMES, kp, kd, strict=True)
            },
        },
        "standing": [stand(s, True) for s in ("soft", "stiff")] + [stand("stiff", False)],
        "clips": [clip_stats(n) for n in gc.BUILTIN_CLIPS],
        "native_physics_steps_per_s": round(native_speed(), 0),
    }
    if args.mjx:
        report["mjx"] = mjx_speed(args.batch)
    if args.json:
        print(json.dumps(report, indent=2))
        return report
    print(f"G1 from {report['model']['source']}")
    mod = report["model"]
    print(f"mass {mod['mass_kg']} kg, crouch pelvis {mod['crouch_pelvis_height_m']} m")
    print("\nstanding 2 s (native MuJoCo)")
    for s in report["standing"]:
        print(
            f"  {s['stiffness']:5s} {s['controller']:24s} "
            f"pelvis {s['final_pelvis_height_m']:.3f} m  "
            f"penetration {s['max_foot_penetration_mm']:5.2f} mm  "
            f"slide {s['foot_slide_mm']:6.2f} mm  fell at {s['fell_at_s']}"
        )
    print("\nclips (50 Hz)")
    for c in report["clips"]:
        print(
            f"  {c['clip']:10s} {c['duration_s']:.2f} s  airborne {c['airborne_s']:.2f} s "
            f"({c['airborne_phases']} phase)  clearance {c['max_foot_clearance_m']:.3f} m  "
            f"root z {c['root_height_range_m']}  |vz| {c['max_root_vz_m_s']} m/s  "
            f"joint speed {c['max_joint_speed_rad_s']} rad/s  "
            f"limit margin {c['joint_limit_margin_rad']}"
        )
    print(f"\nnative MuJoCo: {report['native_physics_steps_per_s']:.0f} physics steps/s")
    if "mjx" in report:
        print(f"MJX: {report['mjx']}")
    return report


if __name__ == "__main__":
    main()
