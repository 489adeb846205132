"""How often the G1 forward simulation diverges under the initial SHAC policy's random actions.

Rolls out a batch of ``g1_jump`` environments with the plain MJX control step (no gradient),
actions ``a = tanh(mu + std * eps)`` with ``mu = 0`` and ``std = 1`` (the initial SHAC policy:
nearly uniform in [-1, 1]), mapped by the env's ``action_to_ctrl`` to PD targets. Every
environment is reset (reference state initialisation) when it falls, reaches the episode length
or diverges. A state is *diverged* when ``qpos`` or ``qvel`` is not finite, or any joint speed
exceeds ``--vmax`` (1000 rad/s: far beyond any G1 motor, always on the way to NaN). Per
configuration (contact stiffness x solver iterations x warm start) it prints the diverged
env-steps, the rate per env-step and percentiles of the largest joint speed.

With ``--diagnose`` it replays the first diverged environment from a few control steps before
its divergence, physics step by physics step, in MJX and in native MuJoCo (the same solver
settings, and 10 iterations), printing the fastest joint and the active constraints.

    .venv/bin/python benchmarks/g1_divergence.py                 # soft + stiff, as loaded
    .venv/bin/python benchmarks/g1_divergence.py --warmstart on,off --diagnose
    .venv/bin/python benchmarks/g1_divergence.py --warmstart on,off --track 25

With ``--policy PACKED`` (a ``bcg pack`` folder) the actions are that policy's stochastic
ones, ``tanh(mu(o) + std eps)`` as SHAC samples them, in the run's own training env (its
randomisation, servos and action range; the stiffness / iterations / warm-start lists are not
used), and the fastest joint of each step is counted::

    .venv/bin/python benchmarks/g1_divergence.py --policy results/g1/A_stage12_leg10_partial

``--warmstart on`` is the G1 MJX model before the fix (MuJoCo's default warm start). About
2-4 minutes per configuration on 2 CPU cores, mostly the compile. Results: the
``bcg.envs.g1.model`` module docstring ("Why no warm start").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx  # noqa: E402


def variant(env, iterations: int, warmstart: bool):
    """``env`` with its MJX model rebuilt at ``iterations`` solver iterations and the warm start
    on or off (the native model is kept)."""
    from bcg.sim.model import load

    sim = env.sim
    new = load(
        sim.mj_model,
        stiffness="model",  # sim.mj_model already carries the env's contact solref
        substeps=sim.substeps,
        solver_iterations=iterations,
        warmstart=warmstart,
        name=sim.name,
    )
    return dataclasses.replace(env, sim=dataclasses.replace(sim, mjx_model=new.mjx_model))


def policy_sampler(path):
    """``(env, sample)`` of a packed policy: its run's training env and ``sample(d, key)``, the
    actions ``tanh(mu(o) + std eps)`` of the batch of states ``d`` as SHAC's rollouts draw them."""
    from pathlib import Path

    from bcg.learners import registry
    from bcg.transfer.pack import load_packed_params

    run = json.loads((Path(path) / "run.json").read_text())
    _, learner = registry.build(run)
    params = load_packed_params(Path(path), learner)
    policy = learner._sampling_policy(params["obs_rms"])
    env = learner.env

    def sample(d, key):
        obs = jax.vmap(env.observe)(d)
        return policy(params["actor"], obs, None, key)

    return env, sample


def make_rollout(env, num_envs: int, steps: int, action_std: float, vmax: float, sample=None):
    from bcg.sim.step import control_step

    sim = env.sim
    nu = sim.nu
    init = jax.vmap(env.initial_data)
    to_ctrl = jax.vmap(env.action_to_ctrl)
    step = jax.vmap(lambda d, u: control_step(sim, d, u)[0])
    terminated = jax.vmap(env.terminated)

    def body(carry, k):
        d, ep = carry
        ka, kr = jax.random.split(k)
        if sample is None:
            a = jnp.tanh(action_std * jax.random.normal(ka, (num_envs, nu)))
        else:
            a = sample(d, ka)
        ctrl = to_ctrl(a, d)
        nxt = step(d, ctrl)
        nxt = nxt.replace(time=d.time + sim.control_dt)
        finite = jnp.isfinite(nxt.qpos).all(-1) & jnp.isfinite(nxt.qvel).all(-1)
        speed = jnp.where(finite, jnp.max(jnp.abs(nxt.qvel[:, 6:]), -1), jnp.inf)
        diverged = ~finite | (speed > vmax)
        fell = terminated(nxt) & ~diverged
        ep = ep + 1
        done = diverged | fell | (ep >= env.episode_length)
        fresh = init(jax.random.split(kr, num_envs))

        def sel(x, y):
            return jnp.where(done.reshape(done.shape + (1,) * (x.ndim - 1)), x, y)

        new = jax.tree_util.tree_map(sel, fresh, nxt)
        pre = dict(qpos=d.qpos, qvel=d.qvel, act=d.act, qacc_warmstart=d.qacc_warmstart, ctrl=ctrl)
        fastest = jnp.argmax(jnp.abs(nxt.qvel[:, 6:]), -1)
        out = dict(diverged=diverged, fell=fell, speed=speed, ep=ep, pre=pre, fastest=fastest)
        return (new, jnp.where(done, 0, ep)), out

    @jax.jit
    def run(key):
        k0, k1 = jax.random.split(key)
        d = init(jax.random.split(k0, num_envs))
        ep = jnp.zeros((num_envs,), jnp.int32)
        _, out = jax.lax.scan(body, (d, ep), jax.random.split(k1, steps))
        return out

    return run


def replay(env, pre, t0: int, t1: int, e: int, vmax: float) -> None:
    """Physics step by physics step from control step ``t0`` to ``t1`` of env ``e``: MJX,
    native MuJoCo with the MJX solver settings, native MuJoCo at 10 iterations."""
    from bcg.envs.g1 import model as g1m
    from bcg.sim.solver import differentiable_solver

    sim = env.sim
    names = ["root_x", "root_y", "root_z", "root_rx", "root_ry", "root_rz"]
    names += list(g1m.JOINT_NAMES)
    mx = sim.mjx_model

    def one(d):
        with differentiable_solver():
            return mjx.step(mx, d)

    jstep = jax.jit(one)
    d = mjx.make_data(mx)
    d = d.replace(
        **{f: jnp.asarray(pre[f][t0, e]) for f in ("qpos", "qvel", "act", "qacc_warmstart")}
    )
    m_same = sim.native_with_mjx_solver()
    m_full = _copy(sim.mj_model)
    natives = {"native(same)": m_same, "native(10 it)": m_full}
    nd = {}
    for k, m in natives.items():
        dd = mujoco.MjData(m)
        dd.qpos[:] = pre["qpos"][t0, e]
        dd.qvel[:] = pre["qvel"][t0, e]
        dd.act[:] = pre["act"][t0, e]
        dd.qacc_warmstart[:] = pre["qacc_warmstart"][t0, e]
        nd[k] = dd
    print(
        f"  replay env {e} from control step {t0} (first diverged at {t1}); per physics step: "
        "fastest dof |qvel| / active joint limits / contacts"
    )
    for t in range(t0, t1 + 1):
        ctrl = np.asarray(pre["ctrl"][t, e])
        d = d.replace(ctrl=jnp.asarray(ctrl, d.ctrl.dtype))
        for _ in range(sim.substeps):
            d = jstep(d)
            v = np.asarray(d.qvel)
            i = int(np.nanargmax(np.abs(np.where(np.isfinite(v), v, np.inf))))
            row = f"    t={t:3d} mjx {names[i]:>26s} {abs(v[i]):9.3g}"
            for k, m in natives.items():
                dd = nd[k]
                dd.ctrl[:] = ctrl
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    mujoco.mj_step(m, dd)
                vv = np.abs(dd.qvel)
                j = int(np.argmax(vv))
                lim = int(np.sum(dd.efc_type == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT))
                row += f" | {k} {names[j]:>26s} {vv[j]:9.3g} lim {lim:2d} con {dd.ncon}"
            print(row)
            if not np.all(np.isfinite(v)) or np.max(np.abs(v[6:])) > vmax:
                return


def track_reference(env, num_starts: int, steps: int):
    """Hold the reference pose as PD targets (``ctrl = reference joints`` of the current frame)
    from ``num_starts`` evenly spaced reference frames for ``steps`` control steps, in MJX and
    in native MuJoCo (the MJCF's 10 Newton iterations). Returns per start the final root
    height, body-position error against the reference (m), and the MJX - native root-position
    and joint differences at the end (m, rad)."""
    from bcg.sim.step import control_step

    sim = env.sim
    ref = env.reference
    lo, hi = sim.mj_model.actuator_ctrlrange.T
    T = env.num_frames
    starts = np.linspace(0, T - steps - 2, num_starts).astype(int)
    targets = np.clip(ref.qpos[:, 7:], lo, hi)

    def one(k0):
        d = env.initial_data(jax.random.PRNGKey(0))  # overwritten below
        d = d.replace(
            qpos=jnp.asarray(ref.qpos)[k0].astype(d.qpos.dtype),
            qvel=jnp.asarray(ref.qvel)[k0].astype(d.qvel.dtype),
            time=(k0 * sim.control_dt).astype(d.time.dtype),
            ctrl=jnp.asarray(targets)[k0].astype(d.ctrl.dtype),
            act=jnp.asarray(targets)[k0].astype(d.act.dtype),
        )

        def body(d, i):
            u = jnp.asarray(targets)[jnp.minimum(k0 + i + 1, T - 1)]
            n, _ = control_step(sim, d, u)
            return n.replace(time=d.time + sim.control_dt), None

        d, _ = jax.lax.scan(body, d, jnp.arange(steps))
        return d.qpos, env.tracking_errors(d)["body_pos_error"]

    qpos, err = jax.jit(jax.vmap(one))(jnp.asarray(starts))
    qpos, err = np.asarray(qpos), np.asarray(err)
    m = sim.mj_model
    nat = np.empty_like(qpos)
    for i, k0 in enumerate(starts):
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:] = ref.qpos[k0], ref.qvel[k0]
        d.ctrl[:] = targets[k0]
        d.act[:] = targets[k0]
        for j in range(steps):
            d.ctrl[:] = targets[min(k0 + j + 1, T - 1)]
            for _ in range(sim.substeps):
                mujoco.mj_step(m, d)
        nat[i] = d.qpos
    return {
        "root_height": qpos[:, 2],
        "body_pos_error": err,
        "root_diff": np.linalg.norm(qpos[:, :3] - nat[:, :3], axis=-1),
        "joint_diff": np.max(np.abs(qpos[:, 7:] - nat[:, 7:]), axis=-1),
        "native_root_height": nat[:, 2],
    }


def _copy(m):
    import copy

    return copy.copy(m)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="g1_jump")
    p.add_argument("--stiffness", default="soft,stiff", help="comma list")
    p.add_argument("--iterations", default="1", help="comma list of solver iterations")
    p.add_argument("--warmstart", default="default", help="comma list of on | off | default")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=300, help="control steps")
    p.add_argument("--action-std", type=float, default=1.0)
    p.add_argument("--vmax", type=float, default=1000.0, help="rad/s counted as diverged")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--x64", action="store_true", help="float64 (default float32)")
    p.add_argument("--diagnose", action="store_true", help="replay the first divergence")
    p.add_argument("--policy", help="a packed policy (bcg pack) acting in its own training env")
    p.add_argument(
        "--track",
        type=int,
        default=0,
        metavar="STEPS",
        help="instead: hold the reference PD targets for STEPS control steps from 16 frames, "
        "MJX against native MuJoCo (10 iterations)",
    )
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", bool(args.x64))
    from bcg.envs import make_env

    print("$ " + shlex.join([sys.executable, *sys.argv]), flush=True)
    dtype = "float64" if args.x64 else "float32"
    configs = [
        (stiff, int(its), ws)
        for stiff in args.stiffness.split(",")
        for its in args.iterations.split(",")
        for ws in args.warmstart.split(",")
    ]
    sample = None
    if args.policy:
        policy_env, sample = policy_sampler(args.policy)
        configs = [("policy", int(policy_env.sim.mjx_model.opt.iterations), "default")]
    for stiff, its, ws in configs:
        if sample is not None:
            env = policy_env
        else:
            env = make_env(args.task, stiffness=stiff, solver_iterations=its)
        if ws != "default":
            env = variant(env, its, ws == "on")
        flag = int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)
        ws_on = not (int(env.sim.mjx_model.opt.disableflags) & flag)
        head = f"{args.task} {stiff:6s} {dtype} iterations {its} warmstart " + (
            "on " if ws_on else "off"
        )
        if args.track:
            t = time.time()
            r = track_reference(env, 16, args.track)
            print(
                f"{head}: reference PD targets, {args.track} control steps: root height "
                f"mean {r['root_height'].mean():.3f} m (native "
                f"{r['native_root_height'].mean():.3f}), body-position error mean "
                f"{r['body_pos_error'].mean():.3f} m; MJX - native: root mean "
                f"{1e3 * r['root_diff'].mean():.1f} mm "
                f"(max {1e3 * r['root_diff'].max():.1f}"
                f"), joints max {r['joint_diff'].max():.3f} rad ({time.time() - t:.0f} s)",
                flush=True,
            )
            continue
        run = make_rollout(env, args.num_envs, args.steps, args.action_std, args.vmax, sample)
        t = time.time()
        out = jax.tree_util.tree_map(np.asarray, run(jax.random.PRNGKey(args.seed)))
        wall = time.time() - t
        div = out["diverged"]
        n = div.size
        sp = out["speed"][np.isfinite(out["speed"])]
        print(
            f"{head}: diverged {int(div.sum()):4d} / {n} env-steps "
            f"({div.sum() / n:.2e} per env-step), fell {int(out['fell'].sum())}, "
            f"max joint speed p50 {np.percentile(sp, 50):.1f} p99 "
            f"{np.percentile(sp, 99):.1f} p99.9 {np.percentile(sp, 99.9):.1f} max "
            f"{sp.max():.0f} rad/s "
            f"({wall:.0f} s incl. compile)",
            flush=True,
        )
        fast = out["fastest"][out["speed"] > 50.0]
        if sample is not None and fast.size:
            from bcg.envs.g1 import model as g1m

            joints, counts = np.unique(fast, return_counts=True)
            top = sorted(zip(counts, joints, strict=True), reverse=True)[:4]
            print(
                "  env-steps with a joint above 50 rad/s: "
                f"{fast.size} of {div.size}; fastest joint: "
                + ", ".join(f"{g1m.JOINT_NAMES[j]} {c}" for c, j in top),
                flush=True,
            )
        if args.diagnose and div.any():
            t1, e = (int(x[0]) for x in np.nonzero(div))
            t0 = max(t1 - int(out["ep"][t1, e]) + 1, t1 - 4)  # same episode
            replay(env, out["pre"], t0, t1, e, args.vmax)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
