"""Domain randomisation of the G1 (docs/method.md, "Domain randomisation"), every item switchable.

Model-level items change a copy of the model:

=================  ==============================================  ===============================
item               docs/method.md                                  applied to
=================  ==============================================  ===============================
``friction``       U(0.3, 1.2)                                     foot spheres and floor
                                                                   (``geom_friction[:, 0]``,
                                                                   MuJoCo combines by max)
``base_mass``      +-3 kg                                          pelvis mass (inertia scaled)
``link_mass``      x U(0.8, 1.2)                                   every other body, per body
                                                                   (inertia scaled alike)
``com``            +-3 cm                                          pelvis CoM, per axis
``kp``, ``kd``     x U(0.8, 1.2)                                   per actuator
``armature``       x U(0.75, 1.25)                                 per joint
``joint_friction`` x U(0.5, 1.5)                                   ``dof_frictionloss`` per joint
``joint_offset``   +-0.01 rad                                      per joint: the servo holds
                                                                   ``target + offset``
                                                                   (``biasprm[0] = kp offset``)
=================  ==============================================  ===============================

Episode-level items (:func:`sample_episode`: the shared sampler of
:mod:`bcg.envs.episode_randomization` with this table's ranges) are applied by whoever runs
the episode: action latency {0, 1} control steps, pushes every U(1, 3) s (root velocity kicks
of +-0.5 m/s in x, y, +-0.2 m/s in z, +-0.52 rad/s roll and pitch, +-0.78 rad/s yaw;
:func:`apply_push`) and reset noise (root position +-2 cm in x, y and 0-1 cm up, root rotation
+-0.05 rad per axis, joints +-0.1 rad; used by :class:`bcg.envs.g1.tracking.G1Tracking` when
``reset_noise`` is on).

:func:`randomize` works on a native ``MjModel`` (numpy, for native-MuJoCo evaluation),
:func:`randomize_mjx_draws` on an ``mjx.Model`` from a vector of uniform draws (JAX, vmappable).
In MJX training each environment carries its draws in its state (``data.userdata``, drawn at
reset by :meth:`bcg.envs.g1.tracking.G1Tracking.initial_data`) and every control step builds
its model from them (:func:`userdata_model`, :attr:`bcg.sim.Sim.model_at`), so the per-environment
model also reaches every BCG branch, which copies the state. Action latency (one control step)
holds the previous control for a step in the environments that draw it (:func:`userdata_hold`,
:attr:`bcg.sim.Sim.hold_at`), or with ``latency_mode="lag"`` is a servo-filter lag of the same
mean delay. Pushes follow a per-environment schedule drawn with the rest
(:func:`push_schedule`, :func:`userdata_push`, :attr:`bcg.sim.Sim.push_at`): kicks at the clip
times ``t_1 = U(1, 3)`` s, ``t_{j+1} = t_j + U(1, 3)`` s, as :func:`sample_episode` draws them
for a native run.
"""

from __future__ import annotations

import copy
import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.envs import episode_randomization
from bcg.envs.episode_randomization import (
    PUSH_ANGULAR,
    PUSH_INTERVAL,
    PUSH_LINEAR,
    Episode,
    Push,  # noqa: F401  (re-exported: bcg.envs.g1.randomization.Push)
    apply_push,  # noqa: F401  (re-exported)
)
from bcg.envs.g1 import model as g1m

MODEL_ITEMS = (
    "friction",
    "base_mass",
    "link_mass",
    "com",
    "kp",
    "kd",
    "armature",
    "joint_friction",
    "joint_offset",
)
EPISODE_ITEMS = ("latency", "push", "reset_noise")
ITEMS = MODEL_ITEMS + EPISODE_ITEMS
MAX_PUSHES = 8  # pushes per MJX episode schedule: at least 8 s at the shortest interval, 1 s


@dataclasses.dataclass(frozen=True)
class Randomization:
    """Ranges of every item; ``None`` switches an item off."""

    friction: tuple[float, float] | None = (0.3, 1.2)
    base_mass: tuple[float, float] | None = (-3.0, 3.0)
    link_mass: tuple[float, float] | None = (0.8, 1.2)
    com: float | None = 0.03
    kp: tuple[float, float] | None = (0.8, 1.2)
    kd: tuple[float, float] | None = (0.8, 1.2)
    armature: tuple[float, float] | None = (0.75, 1.25)
    joint_friction: tuple[float, float] | None = (0.5, 1.5)
    joint_offset: float | None = 0.01
    latency: tuple[int, int] | None = (0, 1)
    push: tuple[float, float] | None = PUSH_INTERVAL
    push_linear: tuple[float, float, float] = PUSH_LINEAR
    push_angular: tuple[float, float, float] = PUSH_ANGULAR
    # MJX training: latency as a one-step "hold" of the previous control (exact, at most 1
    # step) or as a servo-filter "lag" of the same mean delay (native runs always hold)
    latency_mode: str = "hold"
    reset_noise: tuple[float, float] | None = (0.05, 0.1)  # (root rotation rad, joints rad)
    reset_root_xy: float = 0.02
    reset_root_up: float = 0.01

    def __post_init__(self):
        if self.latency_mode not in ("hold", "lag"):
            raise ValueError(f"latency_mode must be 'hold' or 'lag', got {self.latency_mode!r}")

    @classmethod
    def none(cls) -> Randomization:
        return cls(**{k: None for k in ITEMS})

    @classmethod
    def full(cls) -> Randomization:
        return cls()

    def only(self, *items: str) -> Randomization:
        """A copy with only ``items`` on (their ranges from ``self``)."""
        _check(items)
        return dataclasses.replace(self, **{k: None for k in ITEMS if k not in items})

    def without(self, *items: str) -> Randomization:
        _check(items)
        return dataclasses.replace(self, **{k: None for k in items})

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(k for k in ITEMS if getattr(self, k) is not None)

    @classmethod
    def parse(cls, text: str | None) -> Randomization:
        """``"all"``/``"full"``, ``"none"``/``"off"``/empty, or a comma list of items to switch
        on (``"friction,kp,push"``), or ``"all,-push,-latency"`` to switch items off."""
        if text is None:
            return cls.none()
        t = text.strip().lower()
        if t in ("", "none", "off", "false", "0"):
            return cls.none()
        parts = [p.strip() for p in t.split(",") if p.strip()]
        base = cls.full() if parts[0] in ("all", "full", "on", "true", "1") else None
        if base is not None:
            parts = parts[1:]
        on = [p for p in parts if not p.startswith("-")]
        off = [p[1:] for p in parts if p.startswith("-")]
        _check(on + off)
        cfg = base if base is not None else cls.full().only(*on)
        return cfg.without(*off) if off else cfg


def _check(items) -> None:
    bad = [i for i in items if i not in ITEMS]
    if bad:
        raise ValueError(f"unknown randomisation item(s) {bad}; choose from {', '.join(ITEMS)}")


def _contact_geoms(m: mujoco.MjModel) -> np.ndarray:
    return np.concatenate([g1m.foot_geom_ids(m), [m.geom("floor").id]])


def randomize(mj_model: mujoco.MjModel, rng, cfg: Randomization) -> mujoco.MjModel:
    """A randomised copy of a native G1 model (``rng``: numpy Generator or int seed)."""
    rng = np.random.default_rng(rng)
    m = copy.copy(mj_model)
    u = rng.uniform
    root = m.body(g1m.ROOT_BODY).id
    if cfg.friction is not None:
        m.geom_friction[_contact_geoms(m), 0] = u(*cfg.friction)
    if cfg.link_mass is not None:
        others = np.array([b for b in range(1, m.nbody) if b != root])
        f = u(*cfg.link_mass, size=others.size)
        m.body_mass[others] *= f
        m.body_inertia[others] *= f[:, None]
    if cfg.base_mass is not None:
        m0 = m.body_mass[root]
        m1 = max(m0 + u(*cfg.base_mass), 0.1 * m0)
        m.body_mass[root] = m1
        m.body_inertia[root] *= m1 / m0
    if cfg.com is not None:
        m.body_ipos[root] += u(-cfg.com, cfg.com, size=3)
    kp = m.actuator_gainprm[:, 0].copy()
    if cfg.kp is not None:
        kp = kp * u(*cfg.kp, size=m.nu)
        m.actuator_gainprm[:, 0] = kp
        m.actuator_biasprm[:, 1] = -kp
    if cfg.kd is not None:
        m.actuator_biasprm[:, 2] *= u(*cfg.kd, size=m.nu)
    dofs = g1m.joint_dof_indices(m)
    if cfg.armature is not None:
        m.dof_armature[dofs] *= u(*cfg.armature, size=dofs.size)
    if cfg.joint_friction is not None:
        m.dof_frictionloss[dofs] *= u(*cfg.joint_friction, size=dofs.size)
    if cfg.joint_offset is not None:
        m.actuator_biasprm[:, 0] = kp * u(-cfg.joint_offset, cfg.joint_offset, size=m.nu)
    return m


def draw_layout(mj_model: mujoco.MjModel) -> dict[str, int]:
    """The uniform draws each model item takes, in the order :func:`randomize` consumes its
    generator: friction 1, link_mass one per body other than the world and the pelvis,
    base_mass 1, com 3, kp, kd nu each, armature, joint_friction one per joint dof,
    joint_offset nu; then the MJX-only blocks: latency 1, push 7 per push of the schedule
    (interval, linear kick 3, angular kick 3; :func:`push_schedule`)."""
    n_other = mj_model.nbody - 2
    dofs = g1m.joint_dof_indices(mj_model).size
    return {  # (the last blocks have no native counterpart: see randomize_mjx_draws)
        "friction": 1,
        "link_mass": n_other,
        "base_mass": 1,
        "com": 3,
        "kp": mj_model.nu,
        "kd": mj_model.nu,
        "armature": dofs,
        "joint_friction": dofs,
        "joint_offset": mj_model.nu,
        "latency": 1,
        "push": 7 * MAX_PUSHES,
    }


def _block_start(mj_model: mujoco.MjModel, name: str) -> int:
    """Index of block ``name``'s first draw in the draw vector (:func:`draw_layout`)."""
    layout = draw_layout(mj_model)
    return sum(layout[k] for k in list(layout)[: list(layout).index(name)])


def num_draws(mj_model: mujoco.MjModel) -> int:
    """Length of the draw vector of :func:`randomize_mjx_draws` (every model item)."""
    return sum(draw_layout(mj_model).values())


def randomize_mjx_draws(mjx_model, draws, cfg: Randomization, mj_model: mujoco.MjModel):
    """JAX twin of :func:`randomize` on an ``mjx.Model`` from a vector of uniform draws
    ``draws`` in [0, 1) of length :func:`num_draws` (every item has its block,
    :func:`draw_layout`; a switched-off item ignores its block). Each item is
    ``lo + (hi - lo) * draw`` as in :func:`randomize`, so ``draws =
    numpy.random.default_rng(s).random(num_draws(m))`` reproduces ``randomize(m, s, full)``.
    ``mj_model``: the native model the MJX model was made from (the indices)."""
    return mjx_model.replace(**_draw_updates(mjx_model, draws, cfg, mj_model))


def _draw_updates(m, draws, cfg: Randomization, mj_model: mujoco.MjModel) -> dict:
    """The randomised ``mjx.Model`` fields of :func:`randomize_mjx_draws`, by name."""
    layout = draw_layout(mj_model)
    draws = jnp.asarray(draws)
    blocks, at = {}, 0
    for name, n in layout.items():
        blocks[name] = draws[at : at + n]
        at += n
    root = mj_model.body(g1m.ROOT_BODY).id
    others = np.array([b for b in range(1, mj_model.nbody) if b != root])
    upd = {}

    def u(name, lo, hi):
        return lo + (hi - lo) * blocks[name].astype(m.body_mass.dtype)

    if cfg.friction is not None:
        mu = u("friction", *cfg.friction)[0]
        upd["geom_friction"] = m.geom_friction.at[_contact_geoms(mj_model), 0].set(mu)
    mass, inertia = m.body_mass, m.body_inertia
    if cfg.link_mass is not None:
        f = u("link_mass", *cfg.link_mass)
        mass, inertia = mass.at[others].multiply(f), inertia.at[others].multiply(f[:, None])
    if cfg.base_mass is not None:
        m0 = mass[root]
        m1 = jnp.maximum(m0 + u("base_mass", *cfg.base_mass)[0], 0.1 * m0)
        mass = mass.at[root].set(m1)
        inertia = inertia.at[root].multiply(m1 / m0)
    upd["body_mass"], upd["body_inertia"] = mass, inertia
    if cfg.com is not None:
        upd["body_ipos"] = m.body_ipos.at[root].add(u("com", -cfg.com, cfg.com))
    gain, bias = m.actuator_gainprm, m.actuator_biasprm
    kp = gain[:, 0]
    if cfg.kp is not None:
        kp = kp * u("kp", *cfg.kp)
        gain = gain.at[:, 0].set(kp)
        bias = bias.at[:, 1].set(-kp)
    if cfg.kd is not None:
        bias = bias.at[:, 2].multiply(u("kd", *cfg.kd))
    if cfg.joint_offset is not None:
        bias = bias.at[:, 0].set(kp * u("joint_offset", -cfg.joint_offset, cfg.joint_offset))
    upd["actuator_gainprm"], upd["actuator_biasprm"] = gain, bias
    dofs = g1m.joint_dof_indices(mj_model)
    if cfg.armature is not None:
        upd["dof_armature"] = m.dof_armature.at[dofs].multiply(u("armature", *cfg.armature))
    if cfg.joint_friction is not None:
        f = u("joint_friction", *cfg.joint_friction)
        upd["dof_frictionloss"] = m.dof_frictionloss.at[dofs].multiply(f)
    if cfg.latency is not None and cfg.latency_mode == "lag" and mj_model.na:
        # L control steps of latency, L uniform over {lo..hi}, as a servo-filter lag of
        # L control_dt (same mean delay; MJX has no actuator delay buffer). L = 0: unchanged.
        steps = latency_steps(blocks["latency"][0], cfg)
        tc = steps * g1m.SUBSTEPS * float(mj_model.opt.timestep)
        dyn = m.actuator_dynprm
        upd["actuator_dynprm"] = dyn.at[:, 0].set(jnp.where(steps > 0, tc, dyn[:, 0]))
    return upd


def latency_steps(draw, cfg: Randomization):
    """Control steps of latency, uniform over {lo..hi}, from one uniform draw in [0, 1)."""
    lo, hi = cfg.latency
    return jnp.clip(jnp.floor(lo + (hi + 1.0 - lo) * draw), lo, hi)


def userdata_hold(cfg: Randomization, mj_model: mujoco.MjModel):
    """A :attr:`bcg.sim.Sim.hold_at` for ``latency_mode="hold"``: a state with randomisation
    draws (``userdata[0] > 0.5``) whose latency draw gives one step holds its previous control
    for a control step, as a native run with that latency applies the previous command
    (:func:`bcg.transfer.runs.run_native`)."""
    if cfg.latency[1] > 1:
        raise ValueError(
            f"latency_mode='hold' emulates at most one control step of latency, got "
            f"{cfg.latency}; use latency_mode='lag'"
        )
    at = 1 + _block_start(mj_model, "latency")

    def hold_at(data):
        ud = jax.lax.stop_gradient(data.userdata)
        return (ud[0] > 0.5) & (latency_steps(ud[at], cfg) > 0)

    return hold_at


def push_schedule(draws, cfg: Randomization, control_dt: float):
    """The push schedule of a draw block (``7 * MAX_PUSHES`` uniforms in [0, 1)): control steps
    ``round(t_j / control_dt)`` with ``t_j = sum_{i <= j} U(cfg.push)`` (clip time, s), and the
    kicks ``linear_j = U(-1, 1)^3 * cfg.push_linear`` (world, m/s), ``angular_j = U(-1, 1)^3 *
    cfg.push_angular`` (root frame, rad/s), as :func:`sample_episode` draws them.
    Returns ``(steps (P,), linear (P, 3), angular (P, 3))``."""
    d = jnp.asarray(draws).reshape(MAX_PUSHES, 7)
    lo, hi = cfg.push
    steps = jnp.round(jnp.cumsum(lo + (hi - lo) * d[:, 0]) / control_dt)
    linear = (2.0 * d[:, 1:4] - 1.0) * jnp.asarray(cfg.push_linear, d.dtype)
    angular = (2.0 * d[:, 4:7] - 1.0) * jnp.asarray(cfg.push_angular, d.dtype)
    return steps, linear, angular


def userdata_push(cfg: Randomization, mj_model: mujoco.MjModel, control_dt: float):
    """A :attr:`bcg.sim.Sim.push_at` for pushes in MJX training: a state with randomisation
    draws (``userdata[0] > 0.5``) at control step ``k = round(time / control_dt)`` gets the
    kicks of its :func:`push_schedule` due at ``k`` (:func:`apply_push`: world linear velocity,
    root-frame angular velocity, the free joint's 6 dofs)."""
    at, size = 1 + _block_start(mj_model, "push"), draw_layout(mj_model)["push"]
    nv = mj_model.nv

    def push_at(data):
        ud = jax.lax.stop_gradient(data.userdata)
        steps, lin, ang = push_schedule(ud[at : at + size], cfg, control_dt)
        k = jnp.round(jax.lax.stop_gradient(data.time) / control_dt)
        due = ((ud[0] > 0.5) & (steps == k)).astype(lin.dtype)
        return jnp.zeros(nv, lin.dtype).at[0:3].set(due @ lin).at[3:6].set(due @ ang)

    return push_at


def randomize_mjx(mjx_model, key, cfg: Randomization, mj_model: mujoco.MjModel):
    """:func:`randomize_mjx_draws` with draws from ``key``. ``jax.vmap`` over keys gives
    per-environment models."""
    draws = jax.random.uniform(key, (num_draws(mj_model),))
    return randomize_mjx_draws(mjx_model, draws, cfg, mj_model)


def userdata_model(cfg: Randomization, mj_model: mujoco.MjModel):
    """A :attr:`bcg.sim.Sim.model_at` for per-environment randomisation carried in the state:
    ``data.userdata = [flag, draws]``; a state with ``flag > 0.5`` steps with
    ``randomize_mjx_draws(model, draws, cfg)``, any other (e.g. a fresh ``make_data``) with the
    nominal model. The draws carry no gradient."""
    n = num_draws(mj_model)

    def model_at(mjx_model, data):
        ud = jax.lax.stop_gradient(data.userdata)
        if ud.shape[-1] < n + 1:
            raise ValueError(
                f"per-environment randomisation needs nuserdata >= {n + 1}, the model has "
                f"{ud.shape[-1]}"
            )
        on = ud[0] > 0.5
        upd = _draw_updates(mjx_model, ud[1 : n + 1], cfg, mj_model)
        return mjx_model.replace(
            **{k: jnp.where(on, v, getattr(mjx_model, k)) for k, v in upd.items()}
        )

    return model_at


def sample_episode(rng, cfg: Randomization, control_dt: float, num_steps: int) -> Episode:
    """Action latency and the push schedule of one episode: the shared sampler
    (:func:`bcg.envs.episode_randomization.sample_episode`) with ``cfg``'s ranges."""
    return episode_randomization.sample_episode(
        rng,
        control_dt,
        num_steps,
        latency=cfg.latency,
        push_interval=cfg.push,
        push_linear=cfg.push_linear,
        push_angular=cfg.push_angular,
    )


@dataclasses.dataclass(frozen=True)
class NativeRandomization:
    """The G1's transfer randomisation (:meth:`bcg.envs.ContactEnv.native_randomization`):
    ``cfg``'s model items by :func:`randomize`, latency and pushes by :func:`sample_episode`,
    initial states by ``init_env`` (the env with ``cfg``, for its reset noise)."""

    cfg: Randomization
    init_env: object

    @property
    def notes(self) -> list[str]:
        return [f"randomisation: G1 table, items {', '.join(self.cfg.enabled) or 'none'}"]

    def model(self, m: mujoco.MjModel, rng) -> mujoco.MjModel:
        return randomize(m, rng, self.cfg)

    def episode(self, rng, steps: int, control_dt: float) -> tuple[int, dict]:
        ep = sample_episode(rng, self.cfg, control_dt, steps)
        return ep.latency, {p.step: (p.linear, p.angular) for p in ep.pushes}


def load_randomized_g1(stiffness="stiff", *, randomization=None, config=None, **kw):
    """:func:`bcg.envs.g1.model.load_g1` whose MJX model, latency and push schedule are drawn
    per environment by ``randomization`` (a :class:`Randomization`) where any of its model
    items, latency or pushes is on: from draws in each environment's state
    (``data.userdata``: :func:`userdata_model`, :func:`userdata_hold`,
    :func:`userdata_push`)."""
    per_env = randomization is not None and any(
        getattr(randomization, k) is not None for k in MODEL_ITEMS + ("latency", "push")
    )
    if not per_env:
        return g1m.load_g1(stiffness, config=config, **kw)
    c = config or g1m.G1Config()
    n = num_draws(g1m.mj_model(c.mjcf, **g1m.model_options(c)))
    sim = g1m.load_g1(stiffness, config=c, nuserdata=1 + n, **kw)
    sim = dataclasses.replace(sim, model_at=userdata_model(randomization, sim.mj_model))
    if randomization.latency is not None and randomization.latency_mode == "hold":
        sim = dataclasses.replace(sim, hold_at=userdata_hold(randomization, sim.mj_model))
    if randomization.push is not None:
        push = userdata_push(randomization, sim.mj_model, sim.control_dt)
        sim = dataclasses.replace(sim, push_at=push)
    return sim
