"""The Unitree G1 (29 DoF) for differentiable (MJX) and native MuJoCo simulation.

Source model. The body tree, inertias, joint ranges, armatures, passive damping / friction and
torque limits are MuJoCo Playground's ``g1_mjx_feetonly.xml`` (the MJX variant of MuJoCo
Menagerie's ``unitree_g1``, 33.34 kg, shipped inside the ``playground`` wheel on PyPI: no
download at run time). The ``mujoco-menagerie`` wheel (2026.10.x) holds only a registry and
downloads the model archives from the web on first use, which this project must not do; a
local Menagerie ``unitree_g1/g1_mjx.xml`` or ``g1.xml`` (same joint and body names) can be used
instead with ``mjcf=...`` or the ``BCG_G1_MJCF`` environment variable. Only the MJCF text is
read: every geom of the robot is removed (so no mesh file is needed) and replaced by

* **4 contact spheres per foot** at the sole corners of the Unitree / Menagerie G1 feet
  (ankle-roll frame: x in {-0.05, 0.12}, y in {+-0.025, +-0.03}, z = -0.03, radius 5 mm),
  the only geoms that collide, and only with the floor (spheres ``contype 0 / conaffinity 1``,
  floor ``contype 1 / conaffinity 0``; sphere-sphere and every other pair never collide),
* a floor plane (added, the robot file has none),
* non-colliding, massless visual capsules along the links (group 2) for rendering.

Actuators: 29 position servos (PD) on the joints, ``ctrlrange`` = joint range, torque limited
by the joints' ``actuatorfrcrange``. Gains follow BeyondMimic / mjlab's G1 motion-tracking
configuration (``mjlab.asset_zoo.robots.unitree_g1.g1_constants``): from each joint's reflected
rotor inertia (armature) with a 10 Hz natural frequency and damping ratio 2,
``kp = armature * w^2``, ``kd = 2 * 2 * armature * w``, ``w = 2 pi 10``, i.e. hip pitch / yaw and
waist yaw (7520-14 motor) kp 40.2 kd 2.56, hip roll and knee (7520-22) kp 99.1 kd 6.31,
shoulders / elbow / wrist roll (5020) kp 14.3 kd 0.91, ankles and waist roll / pitch (two 5020)
kp 28.5 kd 1.81, wrist pitch / yaw (4010) kp 16.8 kd 1.07. ``G1Config.kp_scale`` multiplies
every kp (and kd by its square root: the same damping ratio at a higher natural frequency);
Unitree's G1 example (``unitree_rl_gym``, ``deploy/deploy_mujoco/configs/g1.yaml``) servos hips
/ knees / ankles at kp 100 / 150 / 40, i.e. 1.0-2.5x these gains on the legs, more on the waist
and arms. ``G1Config.leg_kp_window = (a, b)`` gives the legs ``leg_kp_scale`` only in the
control steps ``[a, b)`` of the clip and ``kp_scale`` elsewhere (a gain schedule,
:func:`leg_servo_schedule`, :mod:`bcg.sim.servo_schedule`): the G1's ``LowCmd`` carries kp and
kd per motor in every message, so the robot can follow it.

Optionally (``action_memory``, default on) each servo's target passes through a first-order
``filterexact`` activation with a 1 ms time constant and ``actearly``: the applied target is
99.3% of the new one after the first 5 ms physics step, i.e. no meaningful lag, but ``data.act``
then holds the previous control step's targets, which the tracking reward needs for its
action-rate penalty (``act`` is part of the simulator state that every step estimator carries).

Timing: 200 Hz physics (``timestep`` 0.005), 50 Hz control (``substeps`` 4). Native solver:
Newton, 10 iterations (the paper's), pyramidal cones, Euler integration with implicit damping
disabled as in the source model; MJX uses :func:`bcg.sim.load`'s differentiable solver
(1 Newton iteration by default) **without warm start** (:func:`load_g1`'s ``warmstart``).

Why no warm start. One Newton iteration stays close to where it starts, and MuJoCo starts from
the previous physics step's acceleration (the warm start) whenever that has the lower cost. On
the G1 it is a poor guess: under random PD targets the light, stiffly servoed arm joints
(shoulders, elbows, wrists: armature 0.0036 kg m^2, kd + joint damping 2.9 Nm s/rad) change
their acceleration by ~1e3 rad/s^2 from one 5 ms step to the next. Error of the 1-iteration
acceleration of those joints against the converged one (native MuJoCo, random-action rollouts):
median 34, p99 1e4 rad/s^2 warm-started; 3.2 / 68 from the unconstrained acceleration. The
error feeds back through the servos: a joint speed grows ~1.25x per physics step to 1e3 rad/s
and NaN within ~20 steps. ``benchmarks/g1_divergence.py`` (MJX, float32, 64 envs, random actions
``tanh(N(0, 1))`` as the initial SHAC policy, resets): warm-started, 13 / 19200 (soft) and
2 / 19200 (stiff) env-steps diverge, 99.9th percentile of the largest joint speed 452 / 69 rad/s;
not warm-started, 0 / 64000 and 0 / 64000, 39 / 40 rad/s, as native MuJoCo at its 10 iterations
(38 / 39 rad/s, 0 / 19200). Native MuJoCo at 1 iteration: 12 / 1 of 19200 warm-started, 0 / 0
not; at 2 or more iterations 0 either way (float64: not a precision problem). Without the warm
start each physics step is a function of ``(qpos, qvel, act, ctrl)`` alone.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import os
from pathlib import Path

import jax
import mujoco
import numpy as np

from bcg.sim.model import ModelError, Sim, load

# Joint / actuator order (the Unitree G1 29-DoF order, also the qpos order after the free joint
# and the column order of the retargeted G1 CSVs).
JOINT_NAMES = (
    "left_hip_pitch_joint",
    "left_hip_roll_joint",
    "left_hip_yaw_joint",
    "left_knee_joint",
    "left_ankle_pitch_joint",
    "left_ankle_roll_joint",
    "right_hip_pitch_joint",
    "right_hip_roll_joint",
    "right_hip_yaw_joint",
    "right_knee_joint",
    "right_ankle_pitch_joint",
    "right_ankle_roll_joint",
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    "left_shoulder_pitch_joint",
    "left_shoulder_roll_joint",
    "left_shoulder_yaw_joint",
    "left_elbow_joint",
    "left_wrist_roll_joint",
    "left_wrist_pitch_joint",
    "left_wrist_yaw_joint",
    "right_shoulder_pitch_joint",
    "right_shoulder_roll_joint",
    "right_shoulder_yaw_joint",
    "right_elbow_joint",
    "right_wrist_roll_joint",
    "right_wrist_pitch_joint",
    "right_wrist_yaw_joint",
)
LEG_PARTS = ("hip", "knee", "ankle")  # name parts of the 12 leg joints of JOINT_NAMES
NUM_JOINTS = len(JOINT_NAMES)
ROOT_BODY = "pelvis"


def is_leg_joint(name: str) -> bool:
    """Whether a joint of :data:`JOINT_NAMES` is one of the 12 hip, knee and ankle joints."""
    return any(p in name for p in LEG_PARTS)


# Foot contact spheres in the ankle-roll body frame (Unitree g1_29dof.xml / Menagerie g1.xml).
FOOT_BODIES = ("left_ankle_roll_link", "right_ankle_roll_link")
FOOT_SPHERE_POS = (
    (-0.05, 0.025, -0.03),
    (-0.05, -0.025, -0.03),
    (0.12, 0.03, -0.03),
    (0.12, -0.03, -0.03),
)
FOOT_SPHERE_RADIUS = 0.005
FOOT_FRICTION = 0.8  # nominal; domain randomisation draws U(0.3, 1.2)

# Key points of the observation (docs/method.md, "Task": ankles, head, wrists), as sites.
KEY_SITES = ("key_left_ankle", "key_right_ankle", "key_head", "key_left_wrist", "key_right_wrist")
_KEY_SITE_PLACES = {
    "key_left_ankle": ("left_ankle_roll_link", (0.0, 0.0, 0.0)),
    "key_right_ankle": ("right_ankle_roll_link", (0.0, 0.0, 0.0)),
    # head centre: the head mesh sits on the torso link; G1 is 1.32 m tall, the torso link
    # origin is at 0.84 m in the home pose, so the head centre is about 0.4 m above it.
    "key_head": ("torso_link", (0.0, 0.0, 0.40)),
    "key_left_wrist": ("left_wrist_yaw_link", (0.0, 0.0, 0.0)),
    "key_right_wrist": ("right_wrist_yaw_link", (0.0, 0.0, 0.0)),
}

# Bodies whose position / rotation error the tracking reward and the transfer report use
# (BeyondMimic's 14 tracked G1 bodies).
TRACKED_BODIES = (
    "pelvis",
    "left_hip_roll_link",
    "left_knee_link",
    "left_ankle_roll_link",
    "right_hip_roll_link",
    "right_knee_link",
    "right_ankle_roll_link",
    "torso_link",
    "left_shoulder_roll_link",
    "left_elbow_link",
    "left_wrist_yaw_link",
    "right_shoulder_roll_link",
    "right_elbow_link",
    "right_wrist_yaw_link",
)

# PD gains from the reflected inertia (BeyondMimic / mjlab G1): 10 Hz, damping ratio 2.
NATURAL_FREQ = 2.0 * math.pi * 10.0
DAMPING_RATIO = 2.0
ACT_FILTER_TIMECONST = 0.001  # s (action memory, see module docstring)

# Default crouch (MuJoCo Playground's "knees_bent" G1 keyframe), per joint.
CROUCH_POSE = {
    "left_hip_pitch_joint": -0.312,
    "left_knee_joint": 0.669,
    "left_ankle_pitch_joint": -0.363,
    "right_hip_pitch_joint": -0.312,
    "right_knee_joint": 0.669,
    "right_ankle_pitch_joint": -0.363,
    "waist_pitch_joint": 0.073,
    "left_shoulder_pitch_joint": 0.2,
    "left_shoulder_roll_joint": 0.2,
    "left_elbow_joint": 0.6,
    "right_shoulder_pitch_joint": 0.2,
    "right_shoulder_roll_joint": -0.2,
    "right_elbow_joint": 0.6,
}

PHYSICS_DT = 0.005
SUBSTEPS = 4


def source_mjcf(mjcf: str | os.PathLike | None = None) -> Path:
    """Path of the G1 robot MJCF read by :func:`build_spec`.

    ``mjcf`` if given, else ``$BCG_G1_MJCF``, else Playground's ``g1_mjx_feetonly.xml`` from the
    installed ``playground`` package (located without importing it).
    """
    chosen = mjcf or os.environ.get("BCG_G1_MJCF")
    if chosen:
        p = Path(chosen)
        if not p.is_file():
            raise ModelError(f"G1 MJCF not found: {p}")
        return p
    spec = importlib.util.find_spec("mujoco_playground")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the G1 model comes from the 'playground' package (MuJoCo Playground): "
            "pip install playground==0.2.0, or set BCG_G1_MJCF to a Menagerie unitree_g1/g1_mjx.xml"
        )
    root = Path(list(spec.submodule_search_locations)[0])
    p = root / "_src" / "locomotion" / "g1" / "xmls" / "g1_mjx_feetonly.xml"
    if not p.is_file():
        raise ModelError(f"G1 MJCF missing from the playground package: {p}")
    return p


def pd_gains(armature: np.ndarray, kp_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``(kp, kd)`` per joint from the reflected inertia (BeyondMimic / mjlab rule):
    ``kp = s a w^2``, ``kd = 2 zeta a w sqrt(s)`` with ``s = kp_scale``, i.e. the natural
    frequency ``w`` times ``sqrt(s)`` at the same damping ratio ``zeta``."""
    a = np.asarray(armature, float)
    s = float(kp_scale)
    return s * a * NATURAL_FREQ**2, 2.0 * DAMPING_RATIO * a * NATURAL_FREQ * np.sqrt(s)


def _body_children(body):
    out = []
    child = body.first_body()
    while child is not None:
        out.append(child)
        child = body.next_body(child)
    return out


def build_spec(
    mjcf: str | os.PathLike | None = None,
    *,
    foot_radius: float = FOOT_SPHERE_RADIUS,
    friction: float = FOOT_FRICTION,
    action_memory: bool = True,
    visuals: bool = True,
    kp_scale: float = 1.0,
    timestep: float = PHYSICS_DT,
    native_iterations: int = 10,
    leg_kp_scale: float | None = None,
) -> mujoco.MjSpec:
    """The edited G1 :class:`mujoco.MjSpec` (see module docstring)."""
    path = source_mjcf(mjcf)
    spec = mujoco.MjSpec.from_file(str(path))
    names = {j.name for j in spec.joints}
    missing = [n for n in JOINT_NAMES if n not in names]
    if missing:
        raise ModelError(f"{path}: not a G1 29-DoF model (missing joints {missing[:3]}...)")

    # strip every robot geom (meshes included), pairs, excludes, sensors, actuators, keys
    for g in list(spec.geoms):
        spec.delete(g)
    for coll in (spec.meshes, spec.pairs, spec.excludes, spec.sensors, spec.actuators, spec.keys):
        for el in list(coll):
            spec.delete(el)
    for t in list(spec.textures):
        spec.delete(t)
    for mat in list(spec.materials):
        spec.delete(mat)

    spec.option.timestep = float(timestep)
    spec.option.iterations = int(native_iterations)
    spec.option.ls_iterations = 20
    spec.option.solver = mujoco.mjtSolver.mjSOL_NEWTON
    spec.option.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL

    spec.add_material(name="robot", rgba=[0.7, 0.7, 0.72, 1.0])
    spec.add_material(name="sole", rgba=[0.15, 0.15, 0.15, 1.0])
    spec.add_texture(
        name="grid",
        type=mujoco.mjtTexture.mjTEXTURE_2D,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        rgb1=[0.25, 0.3, 0.35],
        rgb2=[0.35, 0.4, 0.45],
        width=256,
        height=256,
    )
    floor_mat = spec.add_material(name="floor", texrepeat=[8, 8], texuniform=True)
    floor_mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "grid"

    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0.0, 0.0, 0.05],
        contype=1,
        conaffinity=0,
        condim=3,
        friction=[friction, 0.005, 0.0001],
        material="floor",
    )

    # foot spheres
    for fb in FOOT_BODIES:
        body = spec.body(fb)
        side = fb.split("_")[0]
        for i, pos in enumerate(FOOT_SPHERE_POS):
            body.add_geom(
                name=f"{side}_foot_{i}",
                type=mujoco.mjtGeom.mjGEOM_SPHERE,
                size=[foot_radius, 0, 0],
                pos=list(pos),
                contype=0,
                conaffinity=1,
                condim=3,
                priority=1,
                friction=[friction, 0.005, 0.0001],
                material="sole",
                group=3,
            )

    # key-point sites
    for name, (bname, pos) in _KEY_SITE_PLACES.items():
        spec.body(bname).add_site(name=name, pos=list(pos), size=[0.02, 0, 0], group=4)

    if visuals:
        _add_visuals(spec)

    # position servos with BeyondMimic gains (kp x kp_scale, kd x sqrt(kp_scale); the legs'
    # hip, knee and ankle joints x leg_kp_scale instead when it is given)
    for jname in JOINT_NAMES:
        j = spec.joint(jname)
        leg = leg_kp_scale is not None and is_leg_joint(jname)
        kp, kd = pd_gains(np.array([j.armature]), leg_kp_scale if leg else kp_scale)
        act = spec.add_actuator(name=jname, target=jname, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=float(kp[0]), kv=float(kd[0]))
        act.ctrllimited = 1
        act.ctrlrange = list(j.range)
        if action_memory:
            act.dyntype = mujoco.mjtDyn.mjDYN_FILTEREXACT
            act.dynprm = [ACT_FILTER_TIMECONST] + [0.0] * (len(act.dynprm) - 1)
            act.actearly = True
    return spec


def _add_visuals(spec: mujoco.MjSpec) -> None:
    """Massless, non-colliding capsules from every body to its children, a torso box, a head
    sphere and foot boxes (group 2), so that renders show the robot without its meshes."""
    common = dict(contype=0, conaffinity=0, group=2, density=0.0, material="robot")
    stack = list(_body_children(spec.worldbody))
    while stack:
        body = stack.pop()
        for child in _body_children(body):
            p = np.asarray(child.pos, float)
            if np.linalg.norm(p) > 0.02:
                body.add_geom(
                    type=mujoco.mjtGeom.mjGEOM_CAPSULE,
                    fromto=[0, 0, 0, *p.tolist()],
                    size=[0.025, 0, 0],
                    **common,
                )
            stack.append(child)
    torso = spec.body("torso_link")
    torso.add_geom(
        type=mujoco.mjtGeom.mjGEOM_BOX, pos=[0, 0, 0.2], size=[0.07, 0.1, 0.13], **common
    )
    torso.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, pos=[0, 0, 0.4], size=[0.07, 0, 0], **common)
    spec.body("pelvis").add_geom(
        type=mujoco.mjtGeom.mjGEOM_BOX, pos=[0, 0, -0.06], size=[0.05, 0.09, 0.05], **common
    )
    for fb in FOOT_BODIES:
        spec.body(fb).add_geom(
            type=mujoco.mjtGeom.mjGEOM_BOX,
            pos=[0.035, 0, -0.022],
            size=[0.09, 0.035, 0.01],
            **common,
        )
    for side in ("left", "right"):
        spec.body(f"{side}_wrist_yaw_link").add_geom(
            type=mujoco.mjtGeom.mjGEOM_SPHERE, pos=[0.07, 0, 0], size=[0.03, 0, 0], **common
        )


@functools.lru_cache(maxsize=8)
def _compiled(
    mjcf, foot_radius, friction, action_memory, visuals, kp_scale, nuserdata=0, leg_kp_scale=None
) -> mujoco.MjModel:
    spec = build_spec(
        mjcf,
        foot_radius=foot_radius,
        friction=friction,
        action_memory=action_memory,
        visuals=visuals,
        kp_scale=kp_scale,
        leg_kp_scale=leg_kp_scale,
    )
    m = spec.compile()
    q = crouch_qpos(m)
    joints = crouch_joint_pose()
    spec.add_key(
        name="crouch", qpos=q.tolist(), ctrl=joints.tolist(), act=joints.tolist() if m.na else []
    )
    spec.nuserdata = int(nuserdata)
    return spec.compile()


def mj_model(
    mjcf: str | os.PathLike | None = None,
    *,
    foot_radius: float = FOOT_SPHERE_RADIUS,
    friction: float = FOOT_FRICTION,
    action_memory: bool = True,
    visuals: bool = True,
    kp_scale: float = 1.0,
    nuserdata: int = 0,
    leg_kp_scale: float | None = None,
) -> mujoco.MjModel:
    """A fresh native G1 model (a copy; keyframe 0 is the default crouch standing on the floor).
    ``nuserdata``: size of ``data.userdata`` (per-environment randomisation draws)."""
    import copy

    if not kp_scale > 0:
        raise ValueError(f"kp_scale must be > 0, got {kp_scale!r}")
    if leg_kp_scale is not None and not leg_kp_scale > 0:
        raise ValueError(f"leg_kp_scale must be > 0, got {leg_kp_scale!r}")
    src = str(source_mjcf(mjcf))
    return copy.copy(
        _compiled(
            src,
            float(foot_radius),
            float(friction),
            action_memory,
            visuals,
            float(kp_scale),
            int(nuserdata),
            None if leg_kp_scale is None else float(leg_kp_scale),
        )
    )


def joint_qpos_indices(m: mujoco.MjModel) -> np.ndarray:
    """qpos addresses of :data:`JOINT_NAMES` (7..35 for this model)."""
    return np.array([m.jnt_qposadr[m.joint(n).id] for n in JOINT_NAMES])


def joint_dof_indices(m: mujoco.MjModel) -> np.ndarray:
    return np.array([m.jnt_dofadr[m.joint(n).id] for n in JOINT_NAMES])


def foot_geom_ids(m: mujoco.MjModel) -> np.ndarray:
    """The 8 foot contact sphere geom ids (left 0-3, right 0-3)."""
    return np.array([m.geom(f"{s}_foot_{i}").id for s in ("left", "right") for i in range(4)])


def body_ids(m: mujoco.MjModel, names=TRACKED_BODIES) -> np.ndarray:
    return np.array([m.body(n).id for n in names])


def site_ids(m: mujoco.MjModel, names=KEY_SITES) -> np.ndarray:
    return np.array([m.site(n).id for n in names])


def crouch_joint_pose() -> np.ndarray:
    """The default crouch as a (29,) joint vector in :data:`JOINT_NAMES` order."""
    return np.array([CROUCH_POSE.get(n, 0.0) for n in JOINT_NAMES])


def lowest_sphere_z(m: mujoco.MjModel, d: mujoco.MjData) -> float:
    """Height of the lowest point of any foot sphere (after kinematics)."""
    ids = foot_geom_ids(m)
    return float(np.min(d.geom_xpos[ids, 2] - m.geom_size[ids, 0]))


def stand_height(m: mujoco.MjModel, joints: np.ndarray, quat=(1.0, 0.0, 0.0, 0.0)) -> float:
    """Root height at which the lowest foot sphere just touches the floor (z = 0)."""
    d = mujoco.MjData(m)
    q = np.zeros(m.nq)
    q[3:7] = quat
    q[joint_qpos_indices(m)] = joints
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    return -lowest_sphere_z(m, d)


def crouch_qpos(m: mujoco.MjModel) -> np.ndarray:
    """Full qpos (nq,) of the default crouch standing with the lowest sphere at z = 0."""
    q = np.zeros(m.nq)
    q[3] = 1.0
    joints = crouch_joint_pose()
    q[joint_qpos_indices(m)] = joints
    q[2] = stand_height(m, joints)
    return q


def balance_ctrl(
    m: mujoco.MjModel,
    d: mujoco.MjData,
    targets: np.ndarray,
    gain: float = 20.0,
    damping: float = 3.0,
) -> np.ndarray:
    """Joint targets (nu,) for standing: ``targets`` with both ankle-pitch targets shifted by
    ``gain * e + damping * de/dt`` (rad per m, rad per m/s), ``e`` the forward offset of the
    centre of mass from the centre of the foot spheres.

    Fixed-target PD cannot hold the G1 upright at these gains: the ankles (2 x 28.5 Nm/rad)
    are much softer than the inverted-pendulum stiffness m g h (33 kg x 9.81 x 0.67 m = 217
    Nm/rad), so the robot tips over forward in about 1 s (measured, native MuJoCo). This CoM
    feedback on the ankles is the minimal standing controller used to check the model (and
    as a baseline, e.g. for a deploy runner's stand phase); the tracking policy must learn
    its own balance.
    """
    ids = foot_geom_ids(m)
    mujoco.mj_subtreeVel(m, d)
    root = m.body(ROOT_BODY).id
    e = float(d.subtree_com[root, 0] - np.mean(d.geom_xpos[ids, 0]))
    v = float(d.subtree_linvel[root, 0])
    out = np.array(targets, float).copy()
    for n in ("left_ankle_pitch_joint", "right_ankle_pitch_joint"):
        out[JOINT_NAMES.index(n)] += gain * e + damping * v
    return out


@dataclasses.dataclass(frozen=True)
class G1Config:
    """Options of :func:`load_g1` besides the contact stiffness."""

    mjcf: str | None = None
    foot_radius: float = FOOT_SPHERE_RADIUS
    friction: float = FOOT_FRICTION
    action_memory: bool = True
    visuals: bool = True
    kp_scale: float = 1.0  # servo stiffness x this, damping x its square root (pd_gains)
    leg_kp_scale: float | None = None  # the same for the 12 leg joints (None: kp_scale)
    # clip frames [a, b) (control steps from time 0) in which the legs have leg_kp_scale; the
    # others have kp_scale (a gain schedule, leg_servo_schedule); None: leg_kp_scale throughout
    leg_kp_window: tuple[int, int] | None = None

    def __post_init__(self):
        if self.leg_kp_window is not None:
            w = tuple(int(x) for x in self.leg_kp_window)
            object.__setattr__(self, "leg_kp_window", w)  # a JSON list from --param
            if len(w) != 2 or not 0 <= w[0] < w[1]:
                raise ValueError(f"leg_kp_window must be frames [a, b) with 0 <= a < b, got {w}")
            if self.leg_kp_scale is None:
                raise ValueError("leg_kp_window needs leg_kp_scale (the legs' gain inside it)")


def leg_servo_schedule(m: mujoco.MjModel, window: tuple[int, int], ratio: float, control_dt):
    """A :attr:`bcg.sim.Sim.servo_scale_at`: inside control steps ``[a, b)`` (``k =
    round(time / control_dt)``) the 12 leg servos' kp x ``ratio`` and kd x sqrt(ratio) (the
    :func:`pd_gains` of a ``ratio`` times stiffer servo at the same damping ratio), elsewhere
    the model's own gains. Works on numpy and JAX times."""
    legs = np.array([is_leg_joint(m.joint(int(j)).name) for j in m.actuator_trnid[:, 0]])
    a, b = window

    def servo_scale_at(time):
        xp = jax.numpy if isinstance(time, jax.Array) else np
        k = xp.round(xp.asarray(time) / control_dt)
        on = (k >= a) & (k < b)
        f = xp.where(on & xp.asarray(legs), ratio, 1.0)
        return f, xp.sqrt(f)

    return servo_scale_at


def model_options(config: G1Config) -> dict:
    """The keyword arguments of :func:`mj_model` that ``config`` sets."""
    c = config
    return dict(
        foot_radius=c.foot_radius,
        friction=c.friction,
        action_memory=c.action_memory,
        visuals=c.visuals,
        kp_scale=c.kp_scale,
        # with a window the legs are built at kp_scale and stiffened inside it per step
        leg_kp_scale=c.leg_kp_scale if c.leg_kp_window is None else None,
    )


def load_g1(
    stiffness="stiff",
    *,
    substeps: int = SUBSTEPS,
    solver_iterations: int = 1,
    warmstart: bool = False,
    config: G1Config | None = None,
    nuserdata: int = 0,
    **kw,
) -> Sim:
    """The G1 as a :class:`bcg.sim.Sim` (200 Hz physics, 50 Hz control, MJX-validated).

    ``warmstart``: warm-start the MJX constraint solver (default off: with few solver
    iterations the warm start makes the G1 diverge, see the module docstring); the native
    model keeps MuJoCo's warm start (10 iterations converge either way). ``nuserdata``: room
    for per-environment draws in ``data.userdata``
    (:func:`bcg.envs.g1.randomization.load_randomized_g1` fills and uses it)."""
    c = config or G1Config()
    m = mj_model(c.mjcf, **model_options(c), nuserdata=nuserdata)
    sim = load(
        m,
        stiffness=stiffness,
        substeps=substeps,
        solver_iterations=solver_iterations,
        warmstart=warmstart,
        name="g1",
        **kw,
    )
    if c.leg_kp_window is not None:
        ratio = c.leg_kp_scale / c.kp_scale
        at = leg_servo_schedule(sim.mj_model, c.leg_kp_window, ratio, sim.control_dt)
        sim = dataclasses.replace(sim, servo_scale_at=at)
    return sim
