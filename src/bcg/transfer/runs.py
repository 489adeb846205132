"""The episodes of a transfer report: the policy in native MuJoCo (randomised model, latency,
pushes, full solver) and the same policy from the same initial states in the training simulator
(MJX, training stiffness, nominal model, plain step), each returning one dict per run.

Each run starts from ``env.initial_data(key)`` (the env's reset distribution; the same keys for
both simulators) and lasts ``cfg.seconds`` (default: one episode) or until a fall. Per run:
fall, fall time, steps, divergence, return (the sum of ``env.reward`` until the fall, the
falling step's reward included), mean foot penetration over contact steps (mm), mean tracking
error (cm), the highest foot clearance (cm) and the longest flight with every foot off the
ground (s), latency and pushes (:mod:`bcg.transfer.measures`).
"""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.sim import servo_schedule
from bcg.transfer import measures
from bcg.transfer.bridge import NativeBridge, data_from_mjx, warm_cached_properties
from bcg.transfer.config import TransferConfig
from bcg.transfer.model import free_root
from bcg.transfer.randomizer import Randomizer
from bcg.transfer.render import make_renderer, render_frame

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx


def run_key(seed: int, i: int):
    """The JAX key of run ``i``'s initial state (the same in both simulators)."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), i)


def episode_steps(env, cfg: TransferConfig) -> int:
    """Control steps per run: ``cfg.seconds`` or, when None, the env's episode length."""
    if cfg.seconds is None:
        return int(env.episode_length)
    return max(1, int(round(cfg.seconds / env.sim.control_dt)))


def run_native(
    policy,
    cfg: TransferConfig,
    m: mujoco.MjModel,
    bridge=None,
    feet=None,
    randomizer=None,
    on_step=None,
):
    """Run ``cfg.runs`` episodes in native MuJoCo; returns ``(runs, notes, frames)``.
    ``on_step(run, step, model, data)``, if given, sees every control step's state (after
    the physics, before the fall check)."""
    env = policy.env
    bridge = bridge or NativeBridge(env, m)
    if feet is None:
        feet, _ = measures.foot_geoms(env, m)
    T = episode_steps(env, cfg)
    n_sub = int(env.sim.substeps)
    root = free_root(m)
    root_dof = None if root is None else root[1]
    schedule = env.sim.servo_scale_at
    pol = jax.jit(policy.fn)
    rand = randomizer or Randomizer(env, cfg, m)
    notes, runs, frames = list(rand.notes), [], None
    renderer = None
    for i in range(cfg.runs):
        rng = np.random.default_rng([cfg.seed, i])
        mi = rand.model(m, rng)
        servos = (mi.actuator_gainprm.copy(), mi.actuator_biasprm.copy())
        latency, pushes = rand.episode(rng, T, env.sim.control_dt)
        dx0 = rand.init_env.initial_data(run_key(cfg.seed, i))
        d = data_from_mjx(mi, dx0)
        if cfg.render and i == 0:
            renderer, frames = make_renderer(mi, cfg), []
            if isinstance(renderer, str):
                notes.append(renderer)
                renderer, frames = None, None
        prev = bridge.to_mjx(d)
        obs = np.asarray(bridge._observe(prev))
        a_prev, c_prev = None, d.ctrl.copy()
        ret, pens, touch, track, fell_at, diverged = 0.0, [], 0, [], None, False
        clear = []
        n_push = 0
        for t in range(T):
            a = np.asarray(pol(obs[None]))[0]
            c = bridge.ctrl(a, d)
            # latency delays the command sent to the servos (its ctrl, as on the robot and in
            # MJX training's hold), not the action: a residual action's reference frame is
            # delayed with it; the first step applies the initial servo targets
            delayed = latency > 0
            applied = a_prev if (delayed and a_prev is not None) else a
            d.ctrl[:] = c_prev if delayed else c
            a_prev, c_prev = a, c
            if t in pushes:
                lin, ang = pushes[t]
                d.qvel[root[1] : root[1] + 3] += lin  # world linear velocity
                d.qvel[root[1] + 3 : root[1] + 6] += ang  # body-frame angular velocity
                n_push += 1
            if schedule is not None:  # the gain schedule of the step starting at d.time
                servo_schedule.apply_native(mi, servos, *schedule(float(d.time)))
            for _ in range(n_sub):
                mujoco.mj_step(mi, d)
            if measures.native_unstable(d, root_dof, cfg.max_root_speed):
                diverged, fell_at = True, t
                break
            # the state's ctrl is the last command *sent* (MJX training's hold keeps it there,
            # the deploy runner too): an env that observes it sees the one still in flight
            cur = bridge.to_mjx(d)
            cur = cur.replace(ctrl=jnp.asarray(c, cur.ctrl.dtype))
            ret += bridge.reward(prev, applied, cur)
            p, tc = measures.foot_penetration_native(mi, d, feet)
            if tc:
                pens.append(p)
                touch += 1
            clear.append(measures.foot_clearance_native(mi, d, feet))
            if bridge.has_tracking:
                track.append(bridge.tracking_error(d))
            if renderer is not None and i == 0:
                frames.append(render_frame(renderer, mi, d))
            if on_step is not None:
                on_step(i, t, mi, d)
            if bridge.fell(cur):
                fell_at = t
                break
            prev, obs = cur, np.asarray(bridge._observe(cur))
        if schedule is not None:  # mi may be the shared nominal model: give its gains back
            mi.actuator_gainprm[:], mi.actuator_biasprm[:] = servos
        runs.append(
            {
                "run": i,
                "fell": fell_at is not None,
                "fall_time": None if fell_at is None else (fell_at + 1) * env.sim.control_dt,
                "steps": (fell_at + 1) if fell_at is not None else T,
                "diverged": diverged,
                "return": ret,
                "penetration_mm": 1e3 * float(np.mean(pens)) if pens else math.nan,
                "contact_steps": touch,
                "tracking_error_cm": 100 * float(np.mean(track)) if track else math.nan,
                **_flight(clear, env.sim.control_dt, diverged),
                "latency_steps": latency,
                "pushes": n_push,
            }
        )
    if renderer is not None:
        renderer.close()
    return runs, notes, frames


def run_training_sim(policy, cfg: TransferConfig, feet: np.ndarray, init_env=None):
    """The same policy and initial states in the training simulator (MJX, training stiffness,
    nominal model, plain step, no latency or pushes). Per-run dicts like :func:`run_native`."""
    env = policy.env
    sim = env.sim
    T = episode_steps(env, cfg)
    fall, _ = measures.fall_criterion(env, sim.mj_model)
    track, _ = measures.tracking_fn(env)
    keys = jnp.stack([run_key(cfg.seed, i) for i in range(cfg.runs)])
    slots = measures.foot_contact_slots(sim, feet)

    init_env = init_env or env
    warm_cached_properties(env)
    warm_cached_properties(init_env)

    def one(key):
        d0 = init_env.initial_data(key)
        # the nominal model even for an env that draws per-environment models into userdata
        d0 = d0.replace(userdata=jnp.zeros_like(d0.userdata))

        def body(c, _):
            d, alive = c
            a = policy.fn(env.observe(d)[None])[0]
            nd, r, _ = env.plain_step(d, a)
            bad = ~(jnp.all(jnp.isfinite(nd.qpos)) & jnp.all(jnp.isfinite(nd.qvel)))
            p, tc = measures.foot_penetration_mjx(nd, slots)
            te = track(mjx.kinematics(sim.mjx_model, nd)) if track is not None else 0.0
            f = fall(nd) | bad
            c = measures.foot_clearance_mjx(nd, slots)
            out = (alive, r, p, tc, te, f, bad, c)
            return (nd, alive & ~f), out

        _, out = jax.lax.scan(body, (d0, jnp.array(True)), None, T)
        return out

    out = jax.jit(jax.vmap(one))(keys)
    alive, r, p, tc, te, f, bad, clear = (np.asarray(x) for x in out)
    runs = []
    for i in range(cfg.runs):
        w = alive[i]
        fell = bool(np.any(f[i] & w))
        steps = int(np.sum(w))
        contact = w & tc[i]
        runs.append(
            {
                "run": i,
                "fell": fell,
                "fall_time": steps * sim.control_dt if fell else None,
                "steps": steps,
                "diverged": bool(np.any(bad[i] & w)),
                "return": float(np.sum(np.where(w, r[i], 0.0))),
                "penetration_mm": (
                    1e3 * float(np.mean(p[i][contact])) if contact.any() else math.nan
                ),
                "contact_steps": int(contact.sum()),
                "tracking_error_cm": 100 * float(np.mean(te[i][w]))
                if (track is not None and w.any())
                else math.nan,
                **_flight(clear[i][w], sim.control_dt),
                "latency_steps": 0,
            }
        )
    return runs


def _flight(clearance, dt: float, diverged: bool = False) -> dict:
    """The per-run flight entries of :func:`bcg.transfer.measures.flight`; NaN for a run that
    diverged (the steps before MuJoCo's reset are a blow-up, not a flight)."""
    if diverged:
        return {"clearance_cm": math.nan, "airborne_s": math.nan}
    top, air = measures.flight(clearance, dt)
    return {"clearance_cm": 100 * top, "airborne_s": air}
