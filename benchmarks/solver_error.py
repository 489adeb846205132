"""Trajectory error of the differentiable MJX model against native MuJoCo at full solver iterations.

The differentiable model runs ONE Newton iteration of the constraint solver per physics step,
warm-started from the previous step's accelerations (see ``bcg.sim.model``). This benchmark
rolls out the same initial state with

* native MuJoCo, the MJCF's solver settings (Newton, 100 iterations, tolerance 1e-8): reference;
* MJX, ``solver_iterations=1`` (the differentiable model);
* MJX, 1 iteration with ``mjDSBL_EULERDAMP`` set (integrates the solver's qacc, see
  :func:`no_eulerdamp`);
* MJX, ``solver_iterations=4`` (forward only: ``lax.while_loop``, not reverse-differentiable);
* native MuJoCo with ``opt.iterations=1`` (separates MJX-vs-C differences from truncation),

and reports, over the whole trajectory, the largest |position difference| of the free body (mm),
its largest orientation difference (deg) and the largest |qvel difference| (m/s or rad/s, any
component). Scenarios: a sphere dropped on a plane with horizontal velocity (it bounces / slides
/ rolls), a box resting on a plane (4 contact points, static friction) and the same box sliding
to a stop (0.3 m/s) or tipping onto its front edge (1.5 m/s, friction 1). Contact stiffness
``soft`` (solref time constant 0.02 s) and ``stiff`` (2 physics steps), float64.

    .venv/bin/python benchmarks/solver_error.py            # about 1-3 minutes on 2 CPU cores
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
import warnings

import jax  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

import bcg.sim as bs  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx  # noqa: E402

SPHERE_DROP = """
<mujoco><option timestep="{dt}"/>
  <worldbody><geom type="plane" size="20 20 .1"/>
    <body pos="0 0 0.5"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body>
  </worldbody>
</mujoco>"""

BOX_REST = """
<mujoco><option timestep="{dt}"/>
  <worldbody><geom type="plane" size="20 20 .1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.15 0.1 0.1" mass="2"/></body>
  </worldbody>
</mujoco>"""


def scenarios(dt: float, sphere_time: float, box_time: float):
    """(name, xml, qvel0, duration)."""
    return [
        ("sphere drop, vx=1 m/s", SPHERE_DROP.format(dt=dt), [1.0, 0, 0, 0, 0, 0], sphere_time),
        ("box resting", BOX_REST.format(dt=dt), [0.0] * 6, box_time),
        ("box sliding, vx=0.3 m/s", BOX_REST.format(dt=dt), [0.3, 0, 0, 0, 0, 0], box_time),
        ("box sliding, vx=1.5 m/s", BOX_REST.format(dt=dt), [1.5, 0, 0, 0, 0, 0], box_time),
    ]


def native_traj(m: mujoco.MjModel, qvel0, nstep: int, iterations: int | None = None):
    m = _copy(m)
    if iterations is not None:
        m.opt.iterations = iterations
    d = mujoco.MjData(m)
    d.qvel[:] = qvel0
    qpos = np.empty((nstep, m.nq))
    qvel = np.empty((nstep, m.nv))
    pen = 0.0
    for i in range(nstep):
        mujoco.mj_step(m, d)
        qpos[i], qvel[i] = d.qpos, d.qvel
        if d.ncon:
            pen = max(pen, -float(np.min(d.contact.dist[: d.ncon])))
    return qpos, qvel, pen


def _copy(m):
    import copy

    return copy.copy(m)


_ROLLOUT = {}


def mjx_traj(sim: bs.Sim, qvel0, nstep: int):
    """One jitted scan of ``nstep`` mjx.step calls; the compiled function is shared by models
    that differ only in array values (e.g. contact stiffness)."""
    opt = sim.mjx_model.opt
    key = (nstep, int(opt.iterations), int(opt.disableflags), tuple(sim.mj_model.geom_type))
    if key not in _ROLLOUT:

        def run(mx: mjx.Model, d: mjx.Data):
            def body(dd, _):
                dd = mjx.step(mx, dd)
                return dd, (dd.qpos, dd.qvel)

            return jax.lax.scan(body, d, None, nstep)[1]

        _ROLLOUT[key] = jax.jit(run)
    d = bs.make_data(sim, qvel=np.asarray(qvel0, float))
    qpos, qvel = _ROLLOUT[key](sim.mjx_model, d)
    return np.asarray(qpos), np.asarray(qvel)


def no_eulerdamp(sim: bs.Sim) -> bs.Sim:
    """The same MJX model with ``mjDSBL_EULERDAMP`` set.

    MJX's Euler integrator always (unless this flag is set) recomputes the acceleration as
    ``(M + h D)^-1 (qfrc_smooth + qfrc_constraint)``; native MuJoCo does that only when some
    dof has damping and otherwise integrates the solver's ``qacc``. The two agree when the
    constraint solver has converged, but not after a single Newton iteration. Setting the flag
    makes MJX integrate ``qacc`` (identical to native here: none of these models has damping;
    with damping it would make the damping explicit).
    """
    src = _copy(sim.mj_model)
    src.opt.iterations = int(sim.mjx_model.opt.iterations)
    src.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mx = mjx.put_model(src)
    return bs.Sim(sim.mj_model, mx, sim.substeps, sim.stiffness, sim.name)


def quat_angle_deg(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    dot = np.abs(np.sum(q1 * q2, axis=-1)) / (
        np.linalg.norm(q1, axis=-1) * np.linalg.norm(q2, axis=-1)
    )
    return np.degrees(2.0 * np.arccos(np.clip(dot, -1.0, 1.0)))


def errors(ref, other, dt):
    (qr, vr), (qo, vo) = ref[:2], other[:2]
    dpos = np.max(np.abs(qo[:, :3] - qr[:, :3]), axis=1)
    over = np.nonzero(dpos > 1e-3)[0]
    t_over = (over[0] + 1) * dt if over.size else float("nan")
    return (
        1e3 * float(np.max(dpos)),
        float(np.max(quat_angle_deg(qo[:, 3:7], qr[:, 3:7]))),
        float(np.max(np.abs(vo - vr))),
        1e3 * float(np.max(np.abs(qo[-1, :3] - qr[-1, :3]))),
        t_over,
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--timestep", type=float, default=0.005, help="physics dt (s), paper: 5 ms")
    p.add_argument("--sphere-time", type=float, default=2.0, help="sphere rollout length (s)")
    p.add_argument("--box-time", type=float, default=1.0, help="box rollout length (s)")
    args = p.parse_args(argv)

    print("$ " + shlex.join(["python", *sys.argv]))
    print(
        f"mujoco {mujoco.__version__}, jax {jax.__version__}, float64, "
        f"physics dt {args.timestep * 1e3:g} ms, CPU"
    )
    t_start = time.time()
    rows = []
    for name, xml, qvel0, duration in scenarios(args.timestep, args.sphere_time, args.box_time):
        nstep = int(round(duration / args.timestep))
        for stiff in ("soft", "stiff"):
            sim1 = bs.load(xml, stiffness=stiff, substeps=1, solver_iterations=1, name=name)
            sim4 = bs.load(xml, stiffness=stiff, substeps=1, solver_iterations=4, name=name)
            m = sim1.mj_model
            ref = native_traj(m, qvel0, nstep)
            variants = {
                "MJX 1 iter (differentiable)": mjx_traj(sim1, qvel0, nstep),
                "MJX 1 iter, EULERDAMP off": mjx_traj(no_eulerdamp(sim1), qvel0, nstep),
                "MJX 4 iter (forward only)": mjx_traj(sim4, qvel0, nstep),
                "native 1 iter": native_traj(m, qvel0, nstep, iterations=1),
            }
            tc = sim1.stiffness.timeconst
            for label, traj in variants.items():
                rows.append(
                    (
                        name,
                        f"{stiff} tc={tc:g}",
                        f"{duration:g}",
                        label,
                        *errors(ref, traj, sim1.physics_dt),
                    )
                )
            rows.append(
                (name, f"{stiff} tc={tc:g}", f"{duration:g}", "(native penetration mm)",
                 1e3 * ref[2], float("nan"), float("nan"), float("nan"), float("nan"))
            )  # fmt: skip
            print(f"  done: {name} / {stiff} ({time.time() - t_start:.0f} s)", flush=True)

    print()
    print("Reference: native MuJoCo, full solver iterations (MJCF default: Newton, 100, tol 1e-8).")
    head = (
        f"{'scenario':<24} {'stiffness':<16} {'T(s)':>4}  {'model':<28} "
        f"{'max|dpos|mm':>11} {'max dori deg':>12} {'max|dqvel|':>10} {'final|dpos|mm':>13} "
        f"{'t(>1mm) s':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        name, stiff, dur, label, dp, dori, dv, dfin, t_over = r
        if label.startswith("("):
            print(f"{name:<24} {stiff:<16} {dur:>4}  {label:<28} {dp:>11.3f}")
            continue
        print(
            f"{name:<24} {stiff:<16} {dur:>4}  {label:<28} "
            f"{dp:>11.4f} {dori:>12.4f} {dv:>10.2e} {dfin:>13.4f} "
            + (f"{t_over:>9.3f}" if np.isfinite(t_over) else f"{'-':>9}")
        )
    print(
        "\nmax|dpos|: largest |x, y or z difference| of the body over the trajectory; dori: angle "
        "between the quaternions; dqvel: any qvel component (m/s, rad/s); t(>1mm): first time "
        "the position error exceeds 1 mm."
    )
    print(f"wall time {time.time() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
