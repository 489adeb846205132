"""Sim-to-sim transfer: run a trained policy in native MuJoCo (``bcg transfer RUN_DIR``).

The training simulator is MJX at the training contact stiffness with a 1-iteration
differentiable solver. The transfer target is native MuJoCo with

* MuJoCo's default contact: the env's MJCF loaded with stiffness ``"model"`` (its own solref;
  MuJoCo's default time constant 0.02 s when the MJCF sets none), or ``env.native_model()``;
* the full constraint solver: ``opt.iterations`` / ``ls_iterations`` raised to MuJoCo's
  defaults (100 / 50) unless the MJCF asks for more;
* domain randomisation per run (:class:`Randomizer`): the G1 env's own table (docs/method.md)
  (:mod:`bcg.envs.g1.randomization`); for other envs ``env.randomize(mj_model, rng)`` when the
  env has it, plus the runtime part of the table that does not change the model: action
  latency of 0 or 1 control steps (per run) and pushes every U(1, 3) s (root velocity +=
  U(+-0.5, +-0.5, +-0.2) m/s, U(+-0.52, +-0.52, +-0.78) rad/s) on models whose root is a free
  joint.

Each run starts from ``env.initial_data(key)`` (the env's reset distribution; the same keys for
both simulators) and lasts ``seconds`` (default: one episode) or until a fall. Observations,
rewards, falls and tracking errors are the env's own JAX functions evaluated on the native
state (every ``mjx.Data`` field that MuJoCo's ``MjData`` has, copied after each control step, so
``observe`` sees what it sees in training: the state after ``mj_step``, whose derived fields
(xpos, ...) are those of the last physics step's start, exactly as after ``mjx.step``).

Reported per run and as means, for both simulators (the training sim run is the same policy from
the same initial states, nominal model, no latency or pushes):

* fall: ``root height < env.fall_height`` (root height: ``env.root_height(data)`` or the free
  joint's z), else ``env.terminated(data)`` (said in the report);
* foot penetration: mean over contact steps (control steps with a foot-ground contact at
  negative distance) of the deepest foot-ground penetration max(0, -dist) (mm); foot geoms
  from ``env.foot_geom_ids``, else geoms whose name contains "foot", else every non-world geom;
* tracking error (cm), when the env has a reference: ``env.tracking_error(data)`` (metres),
  ``env.tracking_errors(data)["body_pos_error"]`` (the G1 env), or the mean over
  ``env.tracked_body_ids`` of |xpos - env.reference_body_positions(data)|, on forward
  kinematics of the current state;
* return: sum of ``env.reward`` until the fall (the reward of the falling step included).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.envs.base import ContactEnv
from bcg.sim import mjx_compat
from bcg.sim.step import make_data

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx

MUJOCO_DEFAULT_ITERATIONS = 100
MUJOCO_DEFAULT_LS_ITERATIONS = 50
PUSH_LIN = (0.5, 0.5, 0.2)  # m/s, docs/method.md
PUSH_ANG = (0.52, 0.52, 0.78)  # rad/s
PUSH_INTERVAL = (1.0, 3.0)  # s


@dataclasses.dataclass
class TransferConfig:
    runs: int = 5
    seconds: float | None = None  # default: the env's episode length
    randomize: bool = True
    latency: bool = True  # with randomize: 0 or 1 control steps per run
    pushes: bool = True  # with randomize, free-joint roots only
    seed: int = 0
    solver_iterations: int = MUJOCO_DEFAULT_ITERATIONS
    ls_iterations: int = MUJOCO_DEFAULT_LS_ITERATIONS
    render: bool = False
    video_path: str | None = None  # .mp4 (or a folder of PNG frames as fallback)
    render_size: tuple[int, int] = (360, 480)  # (height, width)
    training_sim: bool = True  # also run the MJX training simulator for the comparison
    randomization: str | None = None  # G1: items of its table (Randomization.parse), "all"


# ----------------------------------------------------------------------------- models, hooks


def native_model(env, task: str | None = None, cfg: TransferConfig | None = None):
    """``(mj_model, notes)``: the env's model with MuJoCo's default contact and full solver.

    ``env.native_model()`` if the env has it. Otherwise a copy of the *training* model (so that
    every option the run was built with is kept) whose contact parameters (geom and pair
    solref / solimp) are those of the task's MJCF loaded with stiffness ``"model"``; if that
    model's geoms do not match the training model's, the ``"model"`` build itself is used.
    """
    import copy

    cfg = cfg or TransferConfig()
    notes = []
    own = env.native_model()
    if own is not None:
        m = copy.copy(own)
        notes.append("model: env.native_model()")
    else:
        from bcg.envs import POLICY_ENVS, make_env

        m = copy.copy(env.sim.mj_model)
        if task in POLICY_ENVS:
            ref = make_env(task, stiffness="model").sim.mj_model
            if ref.ngeom == m.ngeom and ref.npair == m.npair:
                m.geom_solref[:], m.geom_solimp[:] = ref.geom_solref, ref.geom_solimp
                if m.npair:
                    m.pair_solref[:], m.pair_solimp[:] = ref.pair_solref, ref.pair_solimp
                notes.append(f"model: the training model with {task}'s own MJCF contact")
            else:
                m = copy.copy(ref)
                notes.append(f"model: {task} rebuilt with its own MJCF contact (stiffness 'model')")
        else:
            notes.append("model: the training model (task unknown: contact NOT reset)")
    m.opt.iterations = max(int(m.opt.iterations), int(cfg.solver_iterations))
    m.opt.ls_iterations = max(int(m.opt.ls_iterations), int(cfg.ls_iterations))
    tc = np.unique(np.round(m.geom_solref[:, 0], 6))
    notes.append(
        f"native solver: {m.opt.iterations} iterations, {m.opt.ls_iterations} line search; "
        f"contact solref time constant(s) {', '.join(f'{x:g}' for x in tc)} s"
    )
    return m, notes


def foot_geoms(env, m: mujoco.MjModel) -> tuple[np.ndarray, str]:
    if env.foot_geom_ids is not None:
        ids = np.asarray(env.foot_geom_ids, int)
        return ids, f"foot geoms: env.foot_geom_ids ({len(ids)})"
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i) or "" for i in range(m.ngeom)]
    ids = np.array([i for i, n in enumerate(names) if "foot" in n.lower()], int)
    if len(ids):
        return ids, f"foot geoms: named *foot* ({', '.join(names[i] for i in ids)})"
    ids = np.array([i for i in range(m.ngeom) if m.geom_bodyid[i] != 0], int)
    return ids, "foot geoms: none declared, every robot geom counts (env has no foot_geom_ids)"


def _free_root(m: mujoco.MjModel):
    """(qpos address, dof address) of the first free joint, or None."""
    for j in range(m.njnt):
        if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE):
            return int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
    return None


def fall_criterion(env, m: mujoco.MjModel):
    """``(fn(data) -> bool array, description)``: the env's :meth:`ContactEnv.fell`."""
    if type(env).fell is ContactEnv.fell:
        return env.fell, "fall: env.terminated() (the env declares no fell())"
    return env.fell, "fall: env.fell()"


def tracking_fn(env):
    """``(fn(data_with_fresh_kinematics) -> metres, description)`` or ``(None, reason)``: the
    env's :meth:`ContactEnv.tracking_error` (None at trace time: no reference motion)."""
    if jax.eval_shape(env.tracking_error, make_data(env.sim)) is None:
        return None, "tracking error: n/a (the env has no reference motion)"
    return env.tracking_error, "tracking error: env.tracking_error"


# ----------------------------------------------------------------------------- native <-> MJX


def warm_cached_properties(env) -> None:
    """Evaluate the env's ``functools.cached_property`` attributes eagerly, so that a first
    access inside a jit trace cannot cache (and later leak) a tracer."""
    import functools

    for klass in type(env).__mro__:
        for name, attr in vars(klass).items():
            if isinstance(attr, functools.cached_property):
                getattr(env, name)


class NativeBridge:
    """Evaluates the env's JAX functions on native ``MjData`` (see module docstring)."""

    def __init__(self, env, m: mujoco.MjModel):
        warm_cached_properties(env)
        self.env, self.m = env, m
        self.template = mjx.make_data(env.sim.mjx_model)
        self.fields = [
            name for name in mjx_compat.public_fields(self.template) if hasattr(mujoco.MjData, name)
        ]
        self._scratch = mujoco.MjData(m)
        fall, self.fall_note = fall_criterion(env, m)
        track, self.track_note = tracking_fn(env)
        self.has_tracking = track is not None
        self._observe = jax.jit(env.observe)
        self._reward = jax.jit(env.reward)
        self._fall = jax.jit(fall)
        self._track = jax.jit(track) if track is not None else None
        self._ctrl = jax.jit(env.action_to_ctrl)

    def to_mjx(self, d: mujoco.MjData):
        t = self.template
        upd = {}
        for name in self.fields:
            ref = getattr(t, name)
            v = np.asarray(getattr(d, name))
            if v.shape != ref.shape and v.size == np.size(ref):
                v = v.reshape(ref.shape)  # rotation matrices: native (n, 9), MJX (n, 3, 3)
            if v.shape != ref.shape:
                continue
            upd[name] = v.astype(ref.dtype)
        return t.replace(**upd)

    def observe(self, d) -> np.ndarray:
        return np.asarray(self._observe(self.to_mjx(d)))

    def reward(self, d0, action, d1) -> float:
        return float(self._reward(d0, jnp.asarray(action), d1))

    def fell(self, dx) -> bool:
        return bool(self._fall(dx))

    def ctrl(self, action, d: mujoco.MjData) -> np.ndarray:
        """MuJoCo ``ctrl`` of ``action`` taken in the native state ``d`` (the env's
        ``action_to_ctrl``)."""
        return np.asarray(self._ctrl(jnp.asarray(action), self.to_mjx(d)), np.float64)

    def tracking_error(self, d: mujoco.MjData) -> float:
        s = self._scratch
        s.qpos[:], s.qvel[:], s.time = d.qpos, d.qvel, d.time
        s.mocap_pos[:], s.mocap_quat[:] = d.mocap_pos, d.mocap_quat
        mujoco.mj_kinematics(self.m, s)
        mujoco.mj_comPos(self.m, s)
        return float(self._track(self.to_mjx(s)))


def data_from_mjx(m: mujoco.MjModel, dx) -> mujoco.MjData:
    """Native data at the state of a single ``mjx.Data`` (qpos, qvel, act, ctrl, time, mocap)."""
    d = mujoco.MjData(m)
    for name in ("qpos", "qvel", "act", "ctrl", "mocap_pos", "mocap_quat", "userdata"):
        src = np.asarray(getattr(dx, name))
        if src.size:
            getattr(d, name)[:] = src.reshape(getattr(d, name).shape)
    d.time = float(dx.time)
    return d


def foot_penetration_native(m, d, feet: np.ndarray) -> tuple[float, bool]:
    """(deepest foot-ground penetration (m, >= 0), any foot-ground contact at dist < 0)."""
    pen, touching = 0.0, False
    fs = set(int(x) for x in feet)
    for i in range(d.ncon):
        c = d.contact[i]
        g1, g2 = int(c.geom1), int(c.geom2)
        if (g1 in fs and m.geom_bodyid[g2] == 0) or (g2 in fs and m.geom_bodyid[g1] == 0):
            if c.dist < 0:
                touching = True
                pen = max(pen, -float(c.dist))
    return pen, touching


def foot_contact_slots(sim, feet: np.ndarray) -> np.ndarray:
    """Indices of the MJX contact slots between a foot geom and a world geom (the geom pair of
    every slot is fixed by the model)."""
    d = jax.jit(mjx.forward)(sim.mjx_model, mjx.make_data(sim.mjx_model))  # fills contact.geom
    geom = np.asarray(mjx_compat.contacts(d).geom).reshape(-1, 2)
    if geom.shape[0] == 0:
        return np.zeros((0,), int)
    body = sim.mj_model.geom_bodyid[geom]
    foot = np.isin(geom, feet)
    mask = (foot[:, 0] & (body[:, 1] == 0)) | (foot[:, 1] & (body[:, 0] == 0))
    return np.nonzero(mask)[0]


def foot_penetration_mjx(dx, slots: np.ndarray):
    """Same as :func:`foot_penetration_native` on one ``mjx.Data`` (jit-able), over the
    contact ``slots`` of :func:`foot_contact_slots`."""
    if len(slots) == 0:
        return jnp.zeros(()), jnp.zeros((), bool)
    dist = mjx_compat.contacts(dx).dist[slots]
    return jnp.max(jnp.maximum(-dist, 0.0)), jnp.any(dist < 0)


# ----------------------------------------------------------------------------- runs


def _run_key(seed: int, i: int):
    return jax.random.fold_in(jax.random.PRNGKey(seed), i)


def _steps(env, cfg: TransferConfig) -> int:
    if cfg.seconds is None:
        return int(env.episode_length)
    return max(1, int(round(cfg.seconds / env.sim.control_dt)))


class Randomizer:
    """Per-run domain randomisation of the native runs.

    * an env with its own table (:meth:`ContactEnv.native_randomization` not None, e.g. the G1
      tracking env: :class:`bcg.envs.g1.randomization.NativeRandomization`, items from
      ``cfg.randomization``) randomises the model, the episode (latency, pushes) and the
      initial states itself;
    * any other env: ``env.randomize(mj_model, rng)`` (default: the model unchanged), action
      latency 0 or 1 control steps and pushes every U(1, 3) s on free-joint roots (the paper's
      ranges).
    """

    def __init__(self, env, cfg: TransferConfig, m: mujoco.MjModel):
        self.env, self.cfg, self.root = env, cfg, _free_root(m)
        self.init_env = env
        self.own = None
        if not cfg.randomize:
            self.notes = ["no randomisation"]
            return
        self.own = env.native_randomization(cfg.randomization)
        if self.own is not None:
            self.init_env = self.own.init_env
            warm_cached_properties(self.init_env)
            self.notes = list(self.own.notes)
            return
        has_model = type(env).randomize is not ContactEnv.randomize
        pushes = cfg.pushes and self.root is not None
        self.notes = [
            "model randomisation: "
            + ("env.randomize" if has_model else "none (the env declares no randomize())"),
            "runtime randomisation: "
            + ("latency 0/1 step" if cfg.latency else "no latency")
            + (
                ", pushes every U(1,3) s"
                if pushes
                else (", no pushes (root is not a free joint)" if cfg.pushes else "")
            ),
        ]

    def model(self, m, rng):
        import copy

        if not self.cfg.randomize:
            return m
        if self.own is not None:
            return self.own.model(m, rng)
        mm = copy.copy(m)
        out = self.env.randomize(mm, rng)
        return out if isinstance(out, mujoco.MjModel) else mm

    def episode(self, rng, steps: int, control_dt: float) -> tuple[int, dict]:
        """(latency in control steps, {control step: (linear, angular) root kick})."""
        if not self.cfg.randomize:
            return 0, {}
        if self.own is not None:
            return self.own.episode(rng, steps, control_dt)
        latency = int(rng.integers(0, 2)) if self.cfg.latency else 0
        pushes = {}
        if self.cfg.pushes and self.root is not None:
            t = rng.uniform(*PUSH_INTERVAL)
            while t < steps * control_dt:
                lin = rng.uniform(-1, 1, 3) * np.asarray(PUSH_LIN)
                ang = rng.uniform(-1, 1, 3) * np.asarray(PUSH_ANG)
                pushes[int(round(t / control_dt))] = (lin, ang)
                t += rng.uniform(*PUSH_INTERVAL)
        return latency, pushes


def run_native(
    policy, cfg: TransferConfig, m: mujoco.MjModel, bridge=None, feet=None, randomizer=None
):
    """Run ``cfg.runs`` episodes in native MuJoCo; returns ``(runs, notes, frames)``."""
    env = policy.env
    bridge = bridge or NativeBridge(env, m)
    if feet is None:
        feet, _ = foot_geoms(env, m)
    T = _steps(env, cfg)
    n_sub = int(env.sim.substeps)
    root = _free_root(m)
    pol = jax.jit(policy.fn)
    rand = randomizer or Randomizer(env, cfg, m)
    notes, runs, frames = list(rand.notes), [], None
    renderer = None
    for i in range(cfg.runs):
        rng = np.random.default_rng([cfg.seed, i])
        mi = rand.model(m, rng)
        latency, pushes = rand.episode(rng, T, env.sim.control_dt)
        dx0 = rand.init_env.initial_data(_run_key(cfg.seed, i))
        d = data_from_mjx(mi, dx0)
        if cfg.render and i == 0:
            renderer, frames = _make_renderer(mi, cfg), []
            if isinstance(renderer, str):
                notes.append(renderer)
                renderer, frames = None, None
        prev = bridge.to_mjx(d)
        obs = np.asarray(bridge._observe(prev))
        a_prev = None
        ret, pens, touch, track, fell_at, diverged = 0.0, [], 0, [], None, False
        n_push = 0
        for t in range(T):
            a = np.asarray(pol(obs[None]))[0]
            applied = a if (latency == 0 or a_prev is None) else a_prev
            a_prev = a
            d.ctrl[:] = bridge.ctrl(applied, d)
            if t in pushes:
                lin, ang = pushes[t]
                d.qvel[root[1] : root[1] + 3] += lin  # world linear velocity
                d.qvel[root[1] + 3 : root[1] + 6] += ang  # body-frame angular velocity
                n_push += 1
            for _ in range(n_sub):
                mujoco.mj_step(mi, d)
            if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
                diverged, fell_at = True, t
                break
            cur = bridge.to_mjx(d)
            ret += bridge.reward(prev, applied, cur)
            p, tc = foot_penetration_native(mi, d, feet)
            if tc:
                pens.append(p)
                touch += 1
            if bridge.has_tracking:
                track.append(bridge.tracking_error(d))
            if renderer is not None and i == 0:
                frames.append(_render(renderer, mi, d))
            if bridge.fell(cur):
                fell_at = t
                break
            prev, obs = cur, np.asarray(bridge._observe(cur))
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
    T = _steps(env, cfg)
    fall, _ = fall_criterion(env, sim.mj_model)
    track, _ = tracking_fn(env)
    keys = jnp.stack([_run_key(cfg.seed, i) for i in range(cfg.runs)])
    slots = foot_contact_slots(sim, feet)

    init_env = init_env or env
    warm_cached_properties(env)
    warm_cached_properties(init_env)

    def one(key):
        d0 = init_env.initial_data(key)

        def body(c, _):
            d, alive = c
            a = policy.fn(env.observe(d)[None])[0]
            nd, r, _ = env.plain_step(d, a)
            bad = ~(jnp.all(jnp.isfinite(nd.qpos)) & jnp.all(jnp.isfinite(nd.qvel)))
            p, tc = foot_penetration_mjx(nd, slots)
            te = track(mjx.kinematics(sim.mjx_model, nd)) if track is not None else 0.0
            f = fall(nd) | bad
            out = (alive, r, p, tc, te, f, bad)
            return (nd, alive & ~f), out

        _, (alive, r, p, tc, te, f, bad) = jax.lax.scan(body, (d0, jnp.array(True)), None, T)
        return alive, r, p, tc, te, f, bad

    alive, r, p, tc, te, f, bad = jax.jit(jax.vmap(one))(keys)
    alive, r, p, tc, te, f, bad = (np.asarray(x) for x in (alive, r, p, tc, te, f, bad))
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
                "latency_steps": 0,
            }
        )
    return runs


# ----------------------------------------------------------------------------- rendering


def _make_renderer(m, cfg: TransferConfig):
    """A ``mujoco.Renderer`` or a string saying why rendering is unavailable.

    With MUJOCO_GL set, MuJoCo's choice is used. Without it and without a display (where
    MuJoCo's default, GLFW, cannot work and a failed GLFW attempt can abort the process), EGL
    and then OSMesa are tried."""
    import os

    h, w = cfg.render_size
    h, w = min(h, int(m.vis.global_.offheight)), min(w, int(m.vis.global_.offwidth))
    # a brighter headlight (visual only) for models without lights of their own
    m.vis.headlight.ambient = np.maximum(m.vis.headlight.ambient, 0.3)
    m.vis.headlight.diffuse = np.maximum(m.vis.headlight.diffuse, 0.7)
    gl = os.environ.get("MUJOCO_GL")
    if gl or os.environ.get("DISPLAY"):
        try:
            return mujoco.Renderer(m, h, w)
        except Exception as e:  # noqa: BLE001 - any GL failure means "no rendering"
            first = f"{type(e).__name__}: {e}".splitlines()[0]
            return f"rendering unavailable (MUJOCO_GL={gl or 'default'}: {first})"
    from mujoco.rendering.classic import gl_context

    orig, errors = gl_context.GLContext, []
    for backend in ("egl", "osmesa"):
        try:
            mod = __import__(f"mujoco.{backend}", fromlist=["GLContext"])
            gl_context.GLContext = mod.GLContext
            return mujoco.Renderer(m, h, w)
        except Exception as e:  # noqa: BLE001
            gl_context.GLContext = orig
            errors.append(f"{backend}: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
    return (
        f"rendering unavailable (no display; {'; '.join(errors)}): set MUJOCO_GL=egl or "
        "MUJOCO_GL=osmesa with a working EGL / OSMesa library"
    )


def _render(renderer, m, d) -> np.ndarray:
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    cam.trackbodyid = 1 if m.nbody > 1 else 0
    cam.distance = max(1.5, 1.5 * float(m.stat.extent))
    cam.elevation = -15.0
    cam.azimuth = 90.0
    renderer.update_scene(d, camera=cam)
    return renderer.render().copy()


def save_video(frames, path, fps: float) -> str:
    """Write ``frames`` as an mp4 (imageio + ffmpeg) or, failing that, a PNG strip of up to 8
    frames next to it. Returns a line saying what was written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import imageio.v2 as imageio

        with warnings.catch_warnings():  # imageio-ffmpeg runs ffmpeg as a subprocess (fork+exec)
            warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
            imageio.mimwrite(str(path), frames, fps=fps, macro_block_size=1)
        return f"video: {path} ({len(frames)} frames, {fps:g} fps)"
    except Exception as e:  # noqa: BLE001
        why = f"{type(e).__name__}: {e}".splitlines()[0]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idx = np.linspace(0, len(frames) - 1, min(8, len(frames))).astype(int)
    fig, axes = plt.subplots(1, len(idx), figsize=(2.5 * len(idx), 2.2))
    for ax, k in zip(np.atleast_1d(axes), idx, strict=True):
        ax.imshow(frames[k])
        ax.set_title(f"t={k / fps:.2f}s", fontsize=8)
        ax.axis("off")
    png = path.with_suffix(".png")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return f"frames: {png} (no mp4 writer: {why})"


# ----------------------------------------------------------------------------- report


def _summary(runs: list[dict]) -> dict:
    def mean(k):
        v = [r[k] for r in runs if r[k] is not None and not math.isnan(r[k])]
        return float(np.mean(v)) if v else math.nan

    return {
        "runs": len(runs),
        "falls": int(sum(r["fell"] for r in runs)),
        "diverged": int(sum(r["diverged"] for r in runs)),
        "mean_return": mean("return"),
        "mean_steps": mean("steps"),
        "penetration_mm": mean("penetration_mm"),
        "tracking_error_cm": mean("tracking_error_cm"),
    }


def transfer(policy, cfg: TransferConfig | None = None) -> dict:
    """Native-MuJoCo transfer report of ``policy`` (a :class:`bcg.transfer.policy.LoadedPolicy`)."""
    cfg = cfg or TransferConfig()
    if cfg.runs < 1:
        raise ValueError(f"runs must be >= 1, got {cfg.runs}")
    env = policy.env
    m, notes = native_model(env, policy.run.get("task"), cfg)
    feet, feet_note = foot_geoms(env, m)
    bridge = NativeBridge(env, m)
    notes += [feet_note, bridge.fall_note, bridge.track_note]
    rand = Randomizer(env, cfg, m)
    runs, run_notes, frames = run_native(policy, cfg, m, bridge, feet, rand)
    notes += run_notes
    report = {
        "policy": policy.label,
        "task": policy.run.get("task"),
        "training_stiffness": env.sim.stiffness.label,
        "control_dt": env.sim.control_dt,
        "steps": _steps(env, cfg),
        "config": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "render_size"},
        "native": {"summary": _summary(runs), "runs": runs},
    }
    if cfg.training_sim:
        tr = run_training_sim(policy, cfg, feet, rand.init_env)
        report["training_sim"] = {"summary": _summary(tr), "runs": tr}
        gap = report["native"]["summary"]["penetration_mm"] - _summary(tr)["penetration_mm"]
        report["penetration_gap_mm"] = gap
    if cfg.render:
        if frames:
            path = cfg.video_path or "transfer.mp4"
            notes.append(save_video(frames, path, 1.0 / env.sim.control_dt))
        elif not any(n.startswith("rendering unavailable") for n in notes):
            notes.append("rendering: no frames")
    report["notes"] = notes
    return report


def format_report(rep: dict) -> str:
    def f(x, fmt):
        return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)

    lines = [
        f"transfer of {rep['policy']}: task {rep['task']}, trained with "
        f"{rep['training_stiffness']} contact, {rep['steps']} control steps "
        f"({rep['steps'] * rep['control_dt']:.2f} s) per run",
        "",
        "| simulator | runs | falls | diverged | mean return | mean steps | foot penetration (mm)"
        " | tracking error (cm) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = [("training sim (MJX)", "training_sim"), ("native MuJoCo", "native")]
    for label, k in rows:
        if k not in rep:
            continue
        s = rep[k]["summary"]
        lines.append(
            f"| {label} | {s['runs']} | {s['falls']}/{s['runs']} | {s['diverged']} | "
            f"{f(s['mean_return'], '.2f')} | {f(s['mean_steps'], '.1f')} | "
            f"{f(s['penetration_mm'], '.2f')} | {f(s['tracking_error_cm'], '.1f')} |"
        )
    if "penetration_gap_mm" in rep:
        lines.append("")
        lines.append(
            "foot penetration gap (native - training sim): "
            f"{f(rep['penetration_gap_mm'], '.2f')} mm"
        )
    lines.append("")
    lines += [f"- {n}" for n in rep.get("notes", [])]
    return "\n".join(lines)
