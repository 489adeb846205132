"""Small built-in contact tasks (MuJoCo-Playground style) for tests and gradient-estimator demos.

Every task is a self-contained MJCF string (spheres, capsules, boxes and planes only, so MJX
supports it) with 200 Hz physics (``timestep = 0.005``), 4 physics substeps per control step
(50 Hz control), a keyframe named ``init`` and a default rollout horizon in control steps.

Native MuJoCo at the nominal (keyframe) state, 'stiff' / 'soft' contact (peak = largest normal
contact force; times in control steps of 20 ms):

* ``falling_mass`` (1 kg sphere, r 0.1, one vertical slide; horizon 50 = 1 s): dropped from
  0.5 m, lands at step 14 (0.28 s), peak 638 / 310 N, settles at 0.1 m.
* ``bouncing_ball`` (1 kg free sphere, r 0.1; horizon 40 = 0.8 s): from 0.4 m with
  v = (1, 0, -2) m/s, contact dampratio 0.5; hits the floor at step 6 (0.12 s), peak
  1217 / 474 N; stiff bounces back to 0.51 m and lands again at step 35, soft only to 0.15 m
  and lands again at step 17, then rolls.
* ``ball_wall`` (1 kg sphere, r 0.1, x and z slides; horizon 30 = 0.6 s): thrown at 2.5 m/s
  from 0.8 m at a wall whose face is at x = 0.6; hits the wall at step 10 (0.2 s), drops and
  hits the floor at step 26 / 28, peak 668 / 364 N.
* ``hopper`` (planar one-legged hopper, 4 kg: torso 2, thigh 1, shin 0.5, foot 0.5; hip and knee
  motors, gear 10 Nm; horizon 50 = 1 s): dropped with the foot 5 cm above the floor, lands at
  step 5 (0.1 s), peak 729 / 357 N; its spring-loaded leg keeps it up over the horizon under the
  nominal controls (a 2 Hz crouch pattern).

Slide joints use ``ref`` so that ``qpos`` of a vertical slide is the body's absolute height
(and of a horizontal slide its absolute x). Usage::

    task = bcg.envs.get("bouncing_ball")
    sim = task.load("stiff")
    qpos, qvel = task.initial_states(sim, n=64, seed=0)
    ctrl = task.nominal_controls(sim)            # (horizon, nu)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import mujoco
import numpy as np

from bcg.sim.model import Sim
from bcg.sim.model import load as _load_sim
from bcg.sim.step import quat_slices

PHYSICS_DT = 0.005
SUBSTEPS = 4


@dataclasses.dataclass(frozen=True)
class Task:
    """A built-in contact task.

    Attributes:
      name: registry key.
      description: one-line description.
      xml: self-contained MJCF string with a keyframe named ``init``.
      timestep: physics timestep in seconds.
      substeps: physics steps per control step.
      horizon: control steps of the default gradient-report rollout.
      qpos_noise: std (m or rad) of the Gaussian initial-state perturbation of every qpos
        coordinate except quaternion parts.
      qvel_noise: std of the Gaussian initial qvel perturbation.
      dampratio: contact solref damping ratio kept when a stiffness preset is applied
        (1.0 critical damping; < 1 lets contacts bounce).
      ctrl_fn: ``ctrl_fn(t, nu) -> (len(t), nu)`` open-loop nominal controls at control times
        ``t`` (seconds); ``None`` means zeros.
    """

    name: str
    description: str
    xml: str
    timestep: float = PHYSICS_DT
    substeps: int = SUBSTEPS
    horizon: int = 50
    qpos_noise: float = 0.01
    qvel_noise: float = 0.02
    dampratio: float = 1.0
    ctrl_fn: Callable[[np.ndarray, int], np.ndarray] | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    def load(self, stiffness="stiff", **kw) -> Sim:
        """``bcg.sim.load`` of the task's MJCF with its timestep, substeps and dampratio
        (any of them, and the other ``bcg.sim.load`` arguments, can be overridden in ``kw``)."""
        kw.setdefault("substeps", self.substeps)
        kw.setdefault("timestep", self.timestep)
        kw.setdefault("name", self.name)
        kw.setdefault("dampratio", self.dampratio)
        return _load_sim(self.xml, stiffness=stiffness, **kw)

    @property
    def duration(self) -> float:
        """Length of the default rollout in seconds."""
        return self.horizon * self.substeps * self.timestep

    def keyframe_state(self, sim: Sim) -> tuple[np.ndarray, np.ndarray]:
        """The noise-free initial ``(qpos (nq,), qvel (nv,))``: keyframe ``init`` (else qpos0)."""
        m = sim.mj_model
        k = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "init")
        if k >= 0:
            return (
                np.array(m.key_qpos[k], dtype=np.float64),
                np.array(m.key_qvel[k], dtype=np.float64),
            )
        return np.array(m.qpos0, dtype=np.float64), np.zeros(m.nv, dtype=np.float64)

    def initial_states(self, sim: Sim, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``n`` random initial states ``(qpos (n, nq), qvel (n, nv))`` (float64).

        The keyframe state plus N(0, qpos_noise^2) on every qpos coordinate except quaternion
        parts (left at the keyframe's unit quaternion) and N(0, qvel_noise^2) on qvel.
        Reproducible for a given ``seed``.
        """
        n = int(n)
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        q0, v0 = self.keyframe_state(sim)
        rng = np.random.default_rng(seed)
        mask = np.ones(q0.shape[0])
        for a, b in quat_slices(sim.mj_model):
            mask[a:b] = 0.0
        dq = rng.normal(0.0, 1.0, (n, q0.shape[0])) * (self.qpos_noise * mask)
        dv = rng.normal(0.0, 1.0, (n, v0.shape[0])) * self.qvel_noise
        return q0[None, :] + dq, v0[None, :] + dv

    def nominal_controls(self, sim: Sim) -> np.ndarray:
        """Open-loop controls ``(horizon, nu)`` of the gradient report (zeros if nu == 0)."""
        nu = int(sim.mj_model.nu)
        if nu == 0 or self.ctrl_fn is None:
            return np.zeros((self.horizon, nu), dtype=np.float64)
        t = np.arange(self.horizon) * self.substeps * self.timestep
        u = np.asarray(self.ctrl_fn(t, nu), dtype=np.float64).reshape(self.horizon, nu)
        lo, hi = sim.mj_model.actuator_ctrlrange.T
        limited = sim.mj_model.actuator_ctrllimited.astype(bool)
        return np.where(limited, np.clip(u, lo, hi), u)


# ----------------------------------------------------------------------------------- the MJCFs

_FLOOR = '<geom name="floor" type="plane" size="5 5 0.1" condim="3" friction="0.8 0.005 0.0001"/>'

FALLING_MASS_XML = f"""
<mujoco model="falling_mass">
  <option timestep="{PHYSICS_DT}"/>
  <worldbody>
    {_FLOOR}
    <body name="mass" pos="0 0 0.5">
      <joint name="z" type="slide" axis="0 0 1" ref="0.5"/>
      <geom name="ball" type="sphere" size="0.1" mass="1" condim="3" friction="0.8 0.005 0.0001"/>
    </body>
  </worldbody>
  <keyframe>
    <key name="init" qpos="0.5" qvel="0"/>
  </keyframe>
</mujoco>
"""

# Bounce from a low contact dampratio (kept by Task.dampratio when a stiffness preset is applied).
# With the stiff time constant (2 dt) the contact spring is not resolved at 5 ms: dampratio 0.1
# gains energy (native MuJoCo: apex 6 m after a 0.45 m drop), < 0.5 gains energy for some initial
# phases; 0.5 is the lowest that never did over 200 perturbed initial states (stiff restitution
# 0.4-0.6 median, soft 0.2-0.25).
BOUNCING_BALL_XML = f"""
<mujoco model="bouncing_ball">
  <option timestep="{PHYSICS_DT}"/>
  <default><geom solref="0.01 0.5"/></default>
  <worldbody>
    {_FLOOR}
    <body name="ball" pos="0 0 0.4">
      <freejoint name="root"/>
      <geom name="ball" type="sphere" size="0.1" mass="1" condim="3" friction="0.8 0.005 0.0001"/>
    </body>
  </worldbody>
  <keyframe>
    <key name="init" qpos="0 0 0.4 1 0 0 0" qvel="1 0 -2 0 0 0"/>
  </keyframe>
</mujoco>
"""

BALL_WALL_XML = f"""
<mujoco model="ball_wall">
  <option timestep="{PHYSICS_DT}"/>
  <worldbody>
    {_FLOOR}
    <geom name="wall" type="box" pos="0.7 0 0.5" size="0.1 1 0.5" condim="3"
          friction="1.5 0.005 0.0001"/>
    <body name="ball" pos="0 0 0.8">
      <joint name="x" type="slide" axis="1 0 0" ref="0"/>
      <joint name="z" type="slide" axis="0 0 1" ref="0.8"/>
      <geom name="ball" type="sphere" size="0.1" mass="1" condim="3" friction="0.8 0.005 0.0001"/>
    </body>
  </worldbody>
  <keyframe>
    <key name="init" qpos="0 0.8" qvel="2.5 0"/>
  </keyframe>
</mujoco>
"""

# Torso capsule (2 kg) on rootx / rootz / rooty; thigh (1 kg, 0.3 m) at the hip, shin
# (0.5 kg, 0.3 m) at the knee, foot sphere (0.5 kg, r 0.05) at the shin's end. Hip and knee have
# springs (30 Nm/rad) holding the keyframe pose (hip 0.2 rad, knee -0.4 rad, foot under the
# hip), so the leg lands as a spring instead of folding. The keyframe puts the torso at 0.79 m
# (foot bottom 5 cm above the floor). Only robot-floor contacts (contype 1 / conaffinity 0 on
# the robot): no self-collisions.
# Tuned for MJX's single Newton iteration per step (bcg.sim default): with light links
# (armature 0.01, foot 0.2 kg) and friction 0.8 the one-iteration solve of the sticking foot
# overshoots the friction force, and MJX diverged from native MuJoCo by metres (NaN in one soft
# rollout). Armature 0.1, a 0.5 kg foot and friction 1.5 keep MJX within a few cm of native.
HOPPER_XML = f"""
<mujoco model="hopper">
  <compiler angle="degree"/>
  <option timestep="{PHYSICS_DT}"/>
  <default>
    <joint armature="0.1" damping="0.1" limited="false"/>
    <geom condim="3" friction="1.5 0.005 0.0001" contype="1" conaffinity="0"/>
    <motor ctrllimited="true" ctrlrange="-1 1"/>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" condim="3" contype="1" conaffinity="1"/>
    <body name="torso" pos="0 0 0.8">
      <joint name="rootx" type="slide" axis="1 0 0" ref="0" armature="0" damping="0"/>
      <joint name="rootz" type="slide" axis="0 0 1" ref="0.8" armature="0" damping="0"/>
      <joint name="rooty" type="hinge" axis="0 1 0" armature="0" damping="0"/>
      <geom name="torso" type="capsule" fromto="0 0 0.1 0 0 -0.1" size="0.05" mass="2"/>
      <body name="thigh" pos="0 0 -0.1">
        <joint name="hip" type="hinge" axis="0 -1 0" limited="true" range="-60 60"
                 stiffness="30" springref="11.4592"/>
        <geom name="thigh" type="capsule" fromto="0 0 0 0 0 -0.3" size="0.04" mass="1"/>
        <body name="shin" pos="0 0 -0.3">
          <joint name="knee" type="hinge" axis="0 -1 0" limited="true" range="-120 0"
                 stiffness="30" springref="-22.9183"/>
          <geom name="shin" type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="0.5"/>
          <geom name="foot" type="sphere" pos="0 0 -0.3" size="0.05" mass="0.5"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="hip" joint="hip" gear="10"/>
    <motor name="knee" joint="knee" gear="10"/>
  </actuator>
  <keyframe>
    <key name="init" qpos="0 0.79 0 0.2 -0.4" qvel="0 0 0 0 0"/>
  </keyframe>
</mujoco>
"""


def _hopper_controls(t: np.ndarray, nu: int) -> np.ndarray:
    """A gentle crouch-and-extend pattern: hip and knee in anti-phase at 2 Hz, amplitude 0.3."""
    s = 0.3 * np.sin(2.0 * np.pi * 2.0 * t)
    u = np.stack([s, -s], axis=-1)
    return u[:, :nu]


# Pogo stick (also the training env bcg.envs.pogo): body on a z slide, spring-loaded leg slide
# with a thrust motor, foot sphere (leg 0.3 m, foot radius 0.03 m).
POGO_XML = """
<mujoco model="pogo">
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" condim="1"/>
    <body name="body" pos="0 0 0.29">
      <joint name="z" type="slide" axis="0 0 1" ref="0.29"/>
      <geom name="body" type="box" size="0.08 0.08 0.04" mass="2" contype="0" conaffinity="0"/>
      <body name="leg">
        <joint name="leg" type="slide" axis="0 0 -1" stiffness="600" damping="2"/>
        <geom name="shaft" type="capsule" fromto="0 0 0 0 0 -0.27"
              size="0.015" mass="0.2" contype="0" conaffinity="0"/>
        <geom name="foot" type="sphere" pos="0 0 -0.3" size="0.03" mass="0.1"
              condim="1"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor name="thrust" joint="leg" gear="40" ctrlrange="-1 1"/></actuator>
  <keyframe><key name="init" qpos="0.29 -0.04" qvel="0 0"/></keyframe>
</mujoco>
"""


def _pogo_controls(t: np.ndarray, nu: int) -> np.ndarray:
    """Open-loop hopping: full thrust for 0.12 s, full retraction for 0.12 s (native MuJoCo,
    stiff contact: the body rises 13 cm above standing on the first hop)."""
    u = np.where(np.mod(t, 0.24) < 0.12, 1.0, -1.0)
    return np.broadcast_to(u[:, None], (len(t), nu)).copy()


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task(
            name="falling_mass",
            description="1 kg sphere on a vertical slide dropped from 0.5 m onto a floor",
            xml=FALLING_MASS_XML,
            horizon=50,
            qpos_noise=0.01,
            qvel_noise=0.02,
        ),
        Task(
            name="bouncing_ball",
            description="1 kg free sphere thrown (vx 1, vz -2 m/s) from 0.4 m; bouncy contact",
            xml=BOUNCING_BALL_XML,
            horizon=40,
            qpos_noise=0.01,
            qvel_noise=0.02,
            dampratio=0.5,
        ),
        Task(
            name="ball_wall",
            description="1 kg sphere on x/z slides thrown at 2.5 m/s at a wall face 0.6 m away",
            xml=BALL_WALL_XML,
            horizon=30,
            qpos_noise=0.01,
            qvel_noise=0.02,
        ),
        Task(
            name="hopper",
            description="planar one-legged hopper (4 kg, hip and knee motors) dropped 5 cm",
            xml=HOPPER_XML,
            horizon=50,
            qpos_noise=0.01,
            qvel_noise=0.02,
            ctrl_fn=_hopper_controls,
        ),
        Task(
            name="pogo",
            description="spring-leg pogo stick (2.3 kg, thrust motor) hopping open-loop",
            xml=POGO_XML,
            horizon=50,
            qpos_noise=0.01,
            qvel_noise=0.02,
            ctrl_fn=_pogo_controls,
        ),
    )
}


def list_tasks() -> list[str]:
    """Names of the built-in tasks."""
    return list(TASKS)


def get(name: str) -> Task:
    """The built-in task ``name`` (ValueError listing the valid names otherwise)."""
    try:
        return TASKS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(list_tasks())}") from None
