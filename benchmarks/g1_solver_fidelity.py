"""G1 solver fidelity: foot slip, foot penetration and root drift of MJX at 1, 2, 4 solver
iterations against native MuJoCo (10 Newton iterations), and what each iteration count costs.

States. ``--states`` frames evenly spaced over the jump clip plus the key frames around take-off
and touchdown (see :func:`start_frames`), each set up as the env's reference state
initialisation does (``G1Tracking.initial_data`` without reset noise): ``qpos`` / ``qvel`` of the
reference frame, servo targets ``ctrl`` and ``act`` the (clipped) reference joints. From each
state ``--steps`` control steps (50 Hz, 4 physics steps of 5 ms) are rolled out **open loop**,
the PD targets of control step ``i`` being the reference joints of the current frame ``k0 + i``
(the last frame after the clip's end): the same controls in every simulator.

Simulators, per contact stiffness:

* ``native 10 it``: native MuJoCo, ``sim.mj_model`` as is (Newton, 10 iterations, 20 line-search
  iterations, warm start), float64: the reference;
* ``native 10 it, f32 start``: the same from the initial state rounded to float32 (how far two
  rollouts drift apart from a difference at float32 resolution: the floor of the comparison);
* ``native N it``: native MuJoCo with the MJX model's solver settings (N iterations, 8 line-search
  iterations, no warm start), float64: truncation alone, without MJX / float32;
* ``MJX N it``: ``load_g1(stiffness, solver_iterations=N)`` (the differentiable scan solver, no
  warm start), float32 as training uses (``--x64``: float64), ``bcg.sim.step.control_step``
  under ``jax.vmap`` over the rollouts;
* ``native ..., no actearly``: the native rows again with ``actearly`` off on every actuator.
  The G1's servos have ``actearly`` (:mod:`bcg.envs.g1.model`), which MJX ignores (MuJoCo
  4.0.0's MJX stores ``actuator_actearly`` but computes the force from the current ``act``):
  in MJX a new PD target acts one 5 ms physics step later than in native MuJoCo, a model
  difference that no number of solver iterations removes. Every metric is therefore also
  reported against ``native 10 it, no actearly`` (MJX's actuator semantics): the solver's share
  of the error.

Metrics over the rollouts, from the foot spheres' positions after every physics step (native
forward kinematics of the recorded ``qpos``; a sphere is in contact when its bottom is below the
floor, MuJoCo's activation rule at margin 0):

* slip: horizontal path length of the spheres over physics steps that start and end in contact,
  summed over the 8 spheres, per rollout (mm); ``|d slip|``: per sphere ``|slip - slip_native|``
  summed over the spheres, per rollout (mm);
* penetration: the deepest sphere penetration of a rollout (mm), ``|d pen|`` its difference to
  native per rollout (mm);
* root drift: ``|root position - native root position|`` after the last control step (mm).

Cost: ``s / (control step x env)`` of the forward rollout (the same jitted program the metrics
come from: a scan over control steps of ``vmap(control_step)``) and of ``jax.value_and_grad`` of
a tracking loss through the rollout with respect to the controls (built as
``bcg.learners.rollout`` builds the training rollout: ``vmap(control_step)`` with 4 substeps,
every control step under ``jax.checkpoint``), timed interleaved over ``--reps`` rounds (the
order rotated each round). The fastest call of each is its cost (the median is kept too): on a
shared machine the same call varies by up to 10x, in CPU time as well, so the minimum is the
least disturbed measurement. Build time of each program: trace + lower + XLA compile (on a
persistent-cache hit, the XLA compile time recorded in the cache entry). Soft contact runs the
same compiled programs (the model is an argument), so its cost is not timed again.

    .venv/bin/python benchmarks/g1_solver_fidelity.py
    .venv/bin/python benchmarks/g1_solver_fidelity.py --x64 --no-grad --out \
        results/g1_solver_fidelity/fidelity_float64.json

Run time on 2 CPU cores shared with other jobs: 24 min cold, 18 min with the programs in the
persistent compilation cache. Most of it is building the three gradient programs (4-5 min
each) and timing them. ``--no-grad`` takes 1-3 min.

Results: ``docs/reports/solver_fidelity.md``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import platform
import resource
import shlex
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx  # noqa: E402

CONTACT_EPS = 0.0  # a sphere touches the floor when its bottom is below this height (m)

# ----------------------------------------------------------------------------- compile timing

_CACHE_EVENTS: dict[str, float] = {}


def _on_duration(event: str, duration: float, **_kw) -> None:
    if event in (
        "/jax/compilation_cache/compile_time_saved_sec",
        "/jax/compilation_cache/cache_retrieval_time_sec",
    ):
        _CACHE_EVENTS[event] = _CACHE_EVENTS.get(event, 0.0) + float(duration)


def _cpu_s() -> float:
    """User + system CPU seconds of this process (all threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed_compile(fn, *args) -> tuple[object, dict]:
    """``fn.lower(*args).compile()`` and its times: trace + lower, compile (wall), and whether
    the persistent cache answered (then ``compile_s`` is the compile time the entry recorded)."""
    _CACHE_EVENTS.clear()
    t0 = time.perf_counter()
    lowered = fn.lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    saved = _CACHE_EVENTS.get("/jax/compilation_cache/compile_time_saved_sec")
    retrieval = _CACHE_EVENTS.get("/jax/compilation_cache/cache_retrieval_time_sec", 0.0)
    info = {"lower_s": t1 - t0, "compile_wall_s": t2 - t1, "cache_hit": saved is not None}
    info["compile_s"] = (saved + retrieval) if saved is not None else t2 - t1
    info["total_s"] = info["lower_s"] + info["compile_s"]
    return compiled, info


# ----------------------------------------------------------------------------- setup


def start_frames(foot_height: np.ndarray, num: int, steps: int) -> tuple[np.ndarray, dict]:
    """``num`` frames evenly spaced over ``[0, T - 2]`` (the env's reset range) plus the key
    frames of the jump: 6 and 2 frames before take-off (push-off), 4 after (flight), 3 before
    touchdown, touchdown, 4 after (landing). Take-off: the first frame whose lowest foot
    sphere is above 1 mm; touchdown: the first one after that back below 1 mm."""
    T = foot_height.shape[0]
    air = foot_height > 1e-3
    takeoff = int(np.argmax(air))
    touchdown = takeoff + int(np.argmax(~air[takeoff:]))
    key = [takeoff - 6, takeoff - 2, takeoff + 4, touchdown - 3, touchdown, touchdown + 4]
    frames = np.unique(
        np.clip(np.concatenate([np.linspace(0, T - 2, num).round(), key]), 0, T - 2)
    ).astype(int)
    return frames, {"takeoff": takeoff, "touchdown": touchdown, "key_frames": key}


def phase_of(k0: int, steps: int, events: dict, moving_from: int) -> str:
    """The part of the clip a rollout from frame ``k0`` covers."""
    end = k0 + steps
    if end <= moving_from:
        return "stand"
    if end <= events["takeoff"]:
        return "crouch/push"
    if k0 <= events["touchdown"] + 4 and end > events["takeoff"]:
        return "takeoff/flight/landing"
    return "recovery"


def initial_states(env, frames: np.ndarray, steps: int):
    """``(qpos0, qvel0, ctrl0, ctrl_seq)`` of the rollouts (numpy, float64)."""
    ref = env.reference
    lo, hi = env.sim.mj_model.actuator_ctrlrange.T
    targets = np.clip(ref.qpos[:, 7:], lo, hi)
    T = ref.num_frames
    idx = np.minimum(frames[:, None] + np.arange(steps)[None, :], T - 1)
    return ref.qpos[frames], ref.qvel[frames], targets[frames], targets[idx]


# ----------------------------------------------------------------------------- native


def native_rollouts(m: mujoco.MjModel, q0, v0, u0, useq, substeps: int) -> tuple[np.ndarray, float]:
    """qpos after every physics step (N, K * substeps, nq) and the wall time."""
    N, K, _ = useq.shape
    out = np.empty((N, K * substeps, m.nq))
    t0 = time.perf_counter()
    for r in range(N):
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:], d.ctrl[:] = q0[r], v0[r], u0[r]
        if m.na:
            d.act[:] = u0[r]
        for i in range(K):
            d.ctrl[:] = useq[r, i]
            for s in range(substeps):
                mujoco.mj_step(m, d)
                out[r, i * substeps + s] = d.qpos
    return out, time.perf_counter() - t0


def no_actearly(m: mujoco.MjModel) -> mujoco.MjModel:
    """``m`` with ``actearly`` off on every actuator: MJX's actuator semantics (MJX ignores
    ``actuator_actearly`` and computes the force from the current ``act``, so a new servo
    target acts one physics step later than in native MuJoCo with ``actearly``)."""
    m = copy.copy(m)
    m.actuator_actearly[:] = 0
    return m


# ----------------------------------------------------------------------------- MJX


def batch_data(sim, q0, v0, u0) -> mjx.Data:
    from bcg.sim.step import make_data

    d = make_data(sim)
    N = q0.shape[0]
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (N,) + x.shape), d)
    upd = dict(
        qpos=jnp.asarray(q0, d.qpos.dtype),
        qvel=jnp.asarray(v0, d.qvel.dtype),
        ctrl=jnp.asarray(u0, d.ctrl.dtype),
    )
    if sim.mj_model.na:
        upd["act"] = jnp.asarray(u0, d.act.dtype)
    return d.replace(**upd)


def make_forward(sim):
    """``(mjx_model, data (N,), ctrl_seq (N, K, nu)) -> qpos (N, K S, nq)``, ``qpos`` after
    every physics step: a scan over the control steps of ``vmap(control_step)`` (as the
    training rollout batches it), each control step ``S`` calls of ``control_step`` with one
    substep (the same computation as one ``control_step`` of ``S`` substeps)."""
    from bcg.sim.step import control_step

    one_sub = dataclasses.replace(sim, substeps=1)
    S = sim.substeps

    def rollout(mx, d, useq):
        s = dataclasses.replace(one_sub, mjx_model=mx)
        step = jax.vmap(lambda dd, u: control_step(s, dd, u)[0])

        def ctrl_body(d, u):
            def phys(d, _):
                d = step(d, u)
                return d, d.qpos

            return jax.lax.scan(phys, d, None, S)

        _, qs = jax.lax.scan(ctrl_body, d, jnp.swapaxes(useq, 0, 1))  # (K, S, N, nq)
        return jnp.moveaxis(qs, 2, 0).reshape((qs.shape[2], -1, qs.shape[-1]))

    return jax.jit(rollout)


def make_grad(sim):
    """jit(value_and_grad) w.r.t. the controls of a tracking loss through the batched rollout,
    built as training builds it (``bcg.learners.rollout``): a scan over the control steps of
    ``vmap(control_step)`` (``sim.substeps`` substeps), each step under ``jax.checkpoint``;
    loss ``sum_{rollouts, steps} |qpos_t - qpos*_t|^2``."""
    from bcg.sim.step import control_step

    def loss(useq, mx, d, qref):
        s = dataclasses.replace(sim, mjx_model=mx)
        step = jax.vmap(lambda dd, u: control_step(s, dd, u)[0])

        @jax.checkpoint
        def body(d, xs):
            u, qr = xs
            d = step(d, u)
            return d, jnp.sum((d.qpos - qr) ** 2)

        _, err = jax.lax.scan(body, d, (jnp.swapaxes(useq, 0, 1), jnp.swapaxes(qref, 0, 1)))
        return jnp.sum(err)

    return jax.jit(jax.value_and_grad(loss))


# ----------------------------------------------------------------------------- metrics


def foot_tracks(m: mujoco.MjModel, q0: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """Foot-sphere bottom points (N, 1 + K S, 8, 3) of the initial state and every recorded
    physics step (native forward kinematics, float64)."""
    from bcg.envs.g1 import model as g1m

    ids = g1m.foot_geom_ids(m)
    r = m.geom_size[ids, 0]
    q = np.concatenate([q0[:, None], qs], axis=1)
    out = np.empty(q.shape[:2] + (len(ids), 3))
    d = mujoco.MjData(m)
    for a in range(q.shape[0]):
        for b in range(q.shape[1]):
            d.qpos[:] = q[a, b]
            mujoco.mj_kinematics(m, d)
            out[a, b] = d.geom_xpos[ids]
    out[..., 2] -= r
    return out


def rollout_metrics(tracks: np.ndarray, qs: np.ndarray) -> dict:
    """Per rollout: slip per sphere (N, 8) m, deepest penetration (N,) m, mean penetration of
    the contacts (N,) m, contact fraction (N,), final root position (N, 3), finite (N,)."""
    z = tracks[..., 2]
    touch = z < CONTACT_EPS
    both = touch[:, 1:] & touch[:, :-1]
    dxy = np.linalg.norm(np.diff(tracks[..., :2], axis=1), axis=-1)
    slip = np.sum(np.where(both, dxy, 0.0), axis=1)
    pen = np.maximum(-z[:, 1:], 0.0)
    n_touch = np.sum(touch[:, 1:], axis=(1, 2))
    return {
        "slip": slip,
        "pen_max": np.max(pen, axis=(1, 2)),
        "pen_mean": np.sum(pen, axis=(1, 2)) / np.maximum(n_touch, 1),
        "contact_fraction": n_touch / pen[0].size,
        "contact_time": np.sum(both, axis=(1, 2)),  # sphere-physics-steps in contact
        "root_end": qs[:, -1, :3],
        "finite": np.all(np.isfinite(qs), axis=(1, 2)),
    }


def compare(mt: dict, ref: dict, dt: float) -> dict:
    """Summary numbers of one simulator against the reference (mm)."""
    ok = mt["finite"] & ref["finite"]
    mm = 1e3
    slip_tot = mm * mt["slip"].sum(1)
    drift = mm * np.linalg.norm(mt["root_end"] - ref["root_end"], axis=-1)
    contact_s = mt["contact_time"] * dt
    return {
        "rollouts": int(ok.size),
        "nonfinite": int((~mt["finite"]).sum()),
        "slip_mm": float(np.mean(slip_tot[ok])),
        "slip_speed_mm_s": float(
            np.sum(mm * mt["slip"][ok]) / max(float(np.sum(contact_s[ok])), 1e-12)
        ),
        "slip_abs_err_mm": float(
            np.mean(mm * np.sum(np.abs(mt["slip"] - ref["slip"]), axis=1)[ok])
        ),
        "pen_max_mean_mm": float(np.mean(mm * mt["pen_max"][ok])),
        "pen_max_worst_mm": float(np.max(mm * mt["pen_max"][ok])),
        "pen_contact_mean_mm": float(np.mean(mm * mt["pen_mean"][ok])),
        "pen_abs_err_mm": float(np.mean(mm * np.abs(mt["pen_max"] - ref["pen_max"])[ok])),
        "drift_mean_mm": float(np.mean(drift[ok])),
        "drift_median_mm": float(np.median(drift[ok])),
        "drift_max_mm": float(np.max(drift[ok])),
        "contact_fraction": float(np.mean(mt["contact_fraction"][ok])),
    }


def per_rollout(mt: dict, ref: dict) -> dict:
    mm = 1e3
    return {
        "slip_mm": np.round(mm * mt["slip"].sum(1), 3).tolist(),
        "slip_abs_err_mm": np.round(mm * np.sum(np.abs(mt["slip"] - ref["slip"]), 1), 3).tolist(),
        "pen_max_mm": np.round(mm * mt["pen_max"], 3).tolist(),
        "drift_mm": np.round(
            mm * np.linalg.norm(mt["root_end"] - ref["root_end"], axis=-1), 3
        ).tolist(),
        "root_height_end_m": np.round(mt["root_end"][:, 2], 4).tolist(),
    }


# ----------------------------------------------------------------------------- main


def _fmt_row(name: str, s: dict, cost: dict | None) -> str:
    c = cost or {}
    fr = c.get("fwd_ratio")
    gr = c.get("grad_ratio")
    comp = c.get("compile_s")
    return (
        f"{name:<36} {s['slip_mm']:>7.2f} {s['slip_abs_err_mm']:>7.2f} "
        f"{s['pen_max_mean_mm']:>6.2f} {s['pen_max_worst_mm']:>6.2f} {s['pen_abs_err_mm']:>6.2f} "
        f"{s['drift_mean_mm']:>6.1f} {s['drift_median_mm']:>7.1f} {s['drift_max_mm']:>7.1f} "
        + (f"{fr:>6.2f}" if fr is not None else f"{'':>6}")
        + (f" {gr:>6.2f}" if gr is not None else f" {'':>6}")
        + (f" {comp:>7.0f}" if comp is not None else f" {'':>7}")
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clip", default="jump", help="built-in clip (the g1_<clip> env)")
    p.add_argument("--states", type=int, default=24, help="clip frames evenly spaced (+6 key)")
    p.add_argument("--steps", type=int, default=20, help="control steps per rollout")
    p.add_argument("--iterations", default="1,2,4", help="comma list of MJX solver iterations")
    p.add_argument("--stiffness", default="stiff,soft", help="comma list; the first is timed")
    p.add_argument("--x64", action="store_true", help="MJX in float64 (default float32)")
    p.add_argument("--no-grad", action="store_true", help="skip the gradient cost")
    p.add_argument("--reps", type=int, default=10, help="interleaved timing rounds")
    p.add_argument("--no-cache", action="store_true", help="no persistent compilation cache")
    p.add_argument("--out", default="results/g1_solver_fidelity/fidelity.json")
    args = p.parse_args(argv)

    jax.config.update("jax_enable_x64", bool(args.x64))
    if not args.no_cache:
        jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    jax.monitoring.register_event_duration_secs_listener(_on_duration)

    from bcg.envs.g1 import model as g1m
    from bcg.envs.g1.tracking import g1_tracking

    cmd = shlex.join([".venv/bin/python", *sys.argv])
    dtype = "float64" if args.x64 else "float32"
    print("$ " + cmd, flush=True)
    print(
        f"mujoco {mujoco.__version__}, jax {jax.__version__} ({jax.default_backend()}), MJX "
        f"{dtype}, {os.cpu_count()} CPU cores",
        flush=True,
    )
    t_start = time.time()
    iters = [int(x) for x in args.iterations.split(",")]
    stiffs = args.stiffness.split(",")

    env = g1_tracking(args.clip, stiffs[0])
    frames, events = start_frames(env.reference.foot_height, args.states, args.steps)
    moving_from = int(np.argmax(np.any(np.abs(np.diff(env.reference.qpos, axis=0)) > 1e-9, 1)))
    phases = [phase_of(int(k), args.steps, events, moving_from) for k in frames]
    q0, v0, u0, useq = initial_states(env, frames, args.steps)
    N, K = useq.shape[:2]
    S = env.sim.substeps
    print(
        f"{N} rollouts x {K} control steps ({K * S} physics steps of "
        f"{env.sim.physics_dt * 1e3:g} ms) from frames {frames.tolist()}; take-off frame "
        f"{events['takeoff']}, touchdown {events['touchdown']}",
        flush=True,
    )
    T = env.num_frames
    qref = env.reference.qpos[np.minimum(frames[:, None] + 1 + np.arange(K)[None], T - 1)]

    sims = {
        (st, n): g1m.load_g1(st, solver_iterations=n, warmstart=False)
        for st in stiffs
        for n in iters
    }
    # compile (one forward, one gradient program per iteration count, shared by stiffnesses)
    fwd, grad, cost = {}, {}, {}
    for n in iters:
        sim = sims[(stiffs[0], n)]
        d0 = batch_data(sim, q0, v0, u0)
        u = jnp.asarray(useq, d0.qpos.dtype)
        fwd[n], info = timed_compile(make_forward(sim), sim.mjx_model, d0, u)
        cost[n] = {"compile_s": info["total_s"], "compile": {"forward": info}}
        print(
            f"  MJX {n} it forward: lower {info['lower_s']:.0f} s, compile "
            f"{info['compile_s']:.0f} s" + (" (cache hit)" if info["cache_hit"] else ""),
            flush=True,
        )
        if not args.no_grad:
            qr = jnp.asarray(qref, d0.qpos.dtype)
            grad[n], gi = timed_compile(make_grad(sim), u, sim.mjx_model, d0, qr)
            cost[n]["compile"]["grad"] = gi
            cost[n]["compile_s"] += gi["total_s"]
            print(
                f"  MJX {n} it value_and_grad: lower {gi['lower_s']:.0f} s, compile "
                f"{gi['compile_s']:.0f} s" + (" (cache hit)" if gi["cache_hit"] else ""),
                flush=True,
            )

    # fidelity
    results = {}
    f32 = [np.asarray(x, np.float32).astype(np.float64) for x in (q0, v0, u0)]
    for st in stiffs:
        sim0 = sims[(st, iters[0])]
        m = sim0.mj_model
        m_ne = no_actearly(m)
        trajs = {}
        trajs["native 10 it"], t_nat = native_rollouts(m, q0, v0, u0, useq, S)
        trajs["native 10 it, f32 start"], _ = native_rollouts(m, *f32, useq, S)
        for n in iters:
            mn = sims[(st, n)].native_with_mjx_solver()
            trajs[f"native {n} it"], _ = native_rollouts(mn, q0, v0, u0, useq, S)
        trajs["native 10 it, no actearly"], _ = native_rollouts(m_ne, q0, v0, u0, useq, S)
        trajs["native 10 it, no actearly, f32 start"], _ = native_rollouts(m_ne, *f32, useq, S)
        for n in iters:
            mn = no_actearly(sims[(st, n)].native_with_mjx_solver())
            trajs[f"native {n} it, no actearly"], _ = native_rollouts(mn, q0, v0, u0, useq, S)
        for n in iters:
            sim = sims[(st, n)]
            d0 = batch_data(sim, q0, v0, u0)
            qs = fwd[n](sim.mjx_model, d0, jnp.asarray(useq, d0.qpos.dtype))
            trajs[f"MJX {n} it {dtype}"] = np.asarray(qs, np.float64)
        mets = {k: rollout_metrics(foot_tracks(m, q0, q), q) for k, q in trajs.items()}
        mjx_rows = [k for k in mets if k.startswith("MJX")]
        no_ae = "native 10 it, no actearly"
        blocks = {}
        for ref_key, rows in (
            ("native 10 it", [k for k in mets if "actearly" not in k or k == no_ae]),
            ("native 10 it, no actearly", [k for k in mets if "no actearly" in k] + mjx_rows),
        ):
            ref = mets[ref_key]
            by_phase = {}
            for ph in dict.fromkeys(phases):
                sel = np.array([x == ph for x in phases])
                rsel = {a: b[sel] for a, b in ref.items()}
                by_phase[ph] = {
                    k: compare({a: b[sel] for a, b in mets[k].items()}, rsel, sim0.physics_dt)
                    for k in rows
                }
            blocks[ref_key] = {
                "summary": {k: compare(mets[k], ref, sim0.physics_dt) for k in rows},
                "by_phase": by_phase,
                "per_rollout": {k: per_rollout(mets[k], ref) for k in rows},
            }
        results[st] = {
            "timeconst_s": sim0.stiffness.timeconst,
            "native_wall_s_per_control_step": t_nat / (N * K),
            "reference": blocks,
        }
        print(f"  fidelity {st} done ({time.time() - t_start:.0f} s)", flush=True)

    # cost, interleaved
    st0 = stiffs[0]
    cost_rows = {f"MJX {n} it {dtype}" for n in iters}
    if args.reps > 0:
        times = {n: {k: [] for k in ("fwd", "fwd_cpu", "grad", "grad_cpu")} for n in iters}
        inputs = {}
        for n in iters:
            sim = sims[(st0, n)]
            d0 = batch_data(sim, q0, v0, u0)
            u = jnp.asarray(useq, d0.qpos.dtype)
            inputs[n] = (sim.mjx_model, d0, u, jnp.asarray(qref, d0.qpos.dtype))
            jax.block_until_ready(fwd[n](*inputs[n][:3]))  # warm
            if not args.no_grad:
                jax.block_until_ready(grad[n](u, inputs[n][0], d0, inputs[n][3]))
        for r in range(args.reps):
            for n in iters[r % len(iters) :] + iters[: r % len(iters)]:  # rotate the order
                mx, d0, u, qr = inputs[n]
                t, c0 = time.perf_counter(), _cpu_s()
                jax.block_until_ready(fwd[n](mx, d0, u))
                times[n]["fwd"].append(time.perf_counter() - t)
                times[n]["fwd_cpu"].append(_cpu_s() - c0)
                if not args.no_grad:
                    t, c0 = time.perf_counter(), _cpu_s()
                    val, g = grad[n](u, mx, d0, qr)
                    jax.block_until_ready(g)
                    times[n]["grad"].append(time.perf_counter() - t)
                    times[n]["grad_cpu"].append(_cpu_s() - c0)
                    cost[n]["grad_finite"] = bool(np.all(np.isfinite(np.asarray(g))))
        base = iters[0]
        kinds = ("fwd",) if args.no_grad else ("fwd", "grad")
        for n in iters:
            c = cost[n]
            for kind in kinds:
                tt, tb = np.asarray(times[n][kind]), np.asarray(times[base][kind])
                c[f"{kind}_s"] = float(tt.min())
                c[f"{kind}_s_per_step_env"] = float(tt.min()) / (N * K)
                c[f"{kind}_ratio"] = float(tt.min() / tb.min())
                c[f"{kind}_median_s"] = float(np.median(tt))
                c[f"{kind}_ratio_median"] = float(np.median(tt) / np.median(tb))
                c[f"{kind}_times_s"] = times[n][kind]
                c[f"{kind}_cpu_times_s"] = times[n][f"{kind}_cpu"]
            if not args.no_grad:
                c["grad_over_fwd"] = c["grad_s"] / c["fwd_s"]

    # report
    for st in stiffs:
        R = results[st]
        for ref_key, blk in R["reference"].items():
            print(
                f"\n{args.clip}, {st} contact (solref tc {R['timeconst_s']:g} s), {N} rollouts x "
                f"{K} control steps; reference: {ref_key}. Lengths in mm."
            )
            head = (
                f"{'simulator':<36} {'slip':>7} {'|dslip|':>7} {'pen':>6} {'penmax':>6} "
                f"{'|dpen|':>6} {'drift':>6} {'drift50':>7} {'driftmx':>7} {'fwd x':>6} "
                f"{'grad x':>6} {'comp s':>7}"
            )
            print(head)
            print("-" * len(head))
            for k, s in blk["summary"].items():
                c = None
                if k.startswith("MJX") and st == st0 and k in cost_rows:
                    c = cost[int(k.split()[1])]
                print(_fmt_row(k, s, c) + (f"  ({s['nonfinite']} NaN)" if s["nonfinite"] else ""))
            print("root drift mean (mm) by phase:")
            for ph, tab in blk["by_phase"].items():
                n_ph = next(iter(tab.values()))["rollouts"]
                row = ", ".join(
                    f"{k} {v['drift_mean_mm']:.1f}" for k, v in tab.items() if k != ref_key
                )
                print(f"  {ph} ({n_ph}): {row}")
    print(
        "\nslip: horizontal path of the foot spheres in contact, summed over the 8, mean per "
        "rollout; |dslip|: sum over spheres of |slip - reference slip|; pen / penmax: deepest "
        "penetration of a rollout, mean / worst; |dpen|: |pen - reference pen| per rollout; "
        "drift: |root - reference root| at the end, mean / median / max; fwd x, grad x: time "
        "vs MJX 1 it; comp s: trace + compile, forward + value_and_grad"
    )
    if args.reps > 0:
        print(
            f"\ncost ({st0}, {N} envs under vmap, fastest of {args.reps} interleaved rounds "
            "(median ratio in brackets), per control step per env:"
        )
        for n in iters:
            c = cost[n]
            line = (
                f"  MJX {n} it: forward {c['fwd_s_per_step_env'] * 1e3:.3f} ms "
                f"(x{c['fwd_ratio']:.2f} [x{c['fwd_ratio_median']:.2f}])"
            )
            if not args.no_grad:
                line += (
                    f", value_and_grad {c['grad_s_per_step_env'] * 1e3:.3f} ms "
                    f"(x{c['grad_ratio']:.2f} [x{c['grad_ratio_median']:.2f}]; "
                    f"{c['grad_over_fwd']:.1f} x forward), grad finite {c['grad_finite']}"
                )
            line += f", compile {c['compile_s']:.0f} s"
            print(line)
    wall = time.time() - t_start
    print(f"wall time {wall:.0f} s")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": cmd,
        "versions": {
            "mujoco": mujoco.__version__,
            "jax": jax.__version__,
            "python": platform.python_version(),
        },
        "backend": jax.default_backend(),
        "cpu_cores": os.cpu_count(),
        "clip": args.clip,
        "mjx_dtype": dtype,
        "rollouts": N,
        "control_steps": K,
        "substeps": S,
        "physics_dt": env.sim.physics_dt,
        "start_frames": frames.tolist(),
        "phases": phases,
        "events": events,
        "contact_eps_m": CONTACT_EPS,
        "stiffness": results,
        "cost": {str(n): cost[n] for n in iters},
        "cost_stiffness": st0,
        "wall_s": wall,
    }
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
