"""G1 motion tracking (``g1_jump``, ``g1_squat_jump``, ``g1_hop``): a :class:`ContactEnv`.

Clip phase. The reference frame of a state is ``k = round(data.time / control_dt)`` (clamped to
the clip; after its end the reference holds the last frame): the MJX ``time`` field carries the
phase through every step estimator. Reference state initialisation (:meth:`initial_data`): a
frame ``k`` uniform over the clip, the state set to the reference ``qpos`` / ``qvel`` of that
frame (plus reset noise when the randomisation has ``reset_noise`` on), ``time = k control_dt``,
and the servo targets (``ctrl`` and ``act``) to the reference joints. ``start="first"`` starts
every episode at frame 0 instead (the whole clip; transfer evaluation plays it this way,
:meth:`G1Tracking.native_randomization`). ``start_focus=(a, b)``: a share ``start_focus_prob``
of the random starts is drawn uniform over frames ``[a, b)`` instead of the whole clip (to
practise a short, hard part such as a jump's push-off and flight more often).

Model randomisation in training. When the env's ``randomization`` has a model item on
(friction, masses, CoM, gains, armature, joint friction or offsets; e.g. ``--param
env.randomization=all,-latency,-push``), :meth:`initial_data` draws each environment's model
into ``data.userdata`` and every control step of that state, BCG branches included, runs on
that environment's model (:func:`bcg.envs.g1.randomization.userdata_model`).

State functions. Observation, reward, tracking errors, termination and eval metrics are functions
of the current state (``qpos``, ``qvel``, ``act``, ``time``) only: body, site and geom poses are
recomputed from ``qpos`` by ``mjx.kinematics`` (:meth:`G1Tracking.kinematics`) instead of read
from ``data.xpos`` / ``xmat``, which after ``mjx.step`` lag one physics step (5 ms) behind
``qpos`` and are zero in :meth:`G1Tracking.initial_data`. So the learners' ``observe(data)`` on
the data an estimator step returns equals what native MuJoCo kinematics or the robot give for
that state (tested), at the cost of one forward-kinematics pass per call.

Observation (docs/method.md, "Task"), all in the root (pelvis) frame unless said:

====================================================  =====
root height (world z)                                 1
root rotation, 6-D (first two columns of R, world)    6
root linear velocity, angular velocity                3 + 3
tracked-body rotations relative to the root, 6-D      13 x 6
joint positions, joint velocities                     29 + 29
key points (ankles, head, wrists) relative to root    5 x 3
clip phase k / (T - 1)                                1
reference at k+1, k+2, k+3, each: root height,        3 x 54
root rotation relative to the current root (6-D),
root position relative to the current root, joints,
key points relative to the reference root
====================================================  =====

(327 in all; joint positions and the phase are additions to the paper's list.)
With ``observe_command=True`` (ours, off by default) the observation also holds the command
the servos execute next, ``(ctrl - q) / s`` per joint (29 more, 356): ``data.ctrl`` is the
last command *sent* (with one step of action latency, :attr:`bcg.sim.Sim.hold_at`, the one
still in flight), so a delayed policy can tell which command its servos are executing;
native runs (:mod:`bcg.transfer.runs`) and the deploy runner supply the same.

Actions: ``a`` in (-1, 1)^29 (the learners' tanh policies) are joint-position targets.
``actions="absolute"`` (default): ``ctrl = clip(q_default + s * a, joint range)``,
``q_default`` the clip's first-frame joints and ``s`` per joint the largest deviation of the
clip from ``q_default`` plus ``action_margin`` (0.3 rad), so that every reference posture and
some margin is reachable and ``a = 0`` holds the starting crouch.
``actions="residual"``: ``ctrl = clip(q*_k + residual_scale * a, joint range)`` with ``q*_k``
the reference joints of the state's frame ``k`` (the PD target is a residual around the
reference pose of the current frame, as in DeepMimic-style imitation: ``a = 0`` replays the
clip through the servos); ``leg_residual_scale`` gives the hip, knee and ankle joints their own
range (more push-off torque from the same servos without widening the arms' and waist's).
``velocity_feedforward`` c (ours, 0 by default) adds ``c (kd / kp) qdot*_k`` to the target, per
joint with the env's own servo gains: at c = 1 the servo law ``kp (u - q) - kd qdot`` becomes
``kp (q* + s a - q) + kd (qdot* - qdot)``, the law of the G1's LowCmd with its velocity field
``dq`` set to the reference's (without it, the damping brakes every reference motion: the G1
servos' kd / kp is 64 ms, so a 10 rad/s knee extension is held back by about 0.6 rad). The
ratio is the nominal model's: under a gain schedule (kp x f, kd x sqrt f) or randomised gains
the feed-forward term scales with kp and the damping with kd, in MJX, in native transfer and in
the deploy runner alike.

Reward (``reward="tracking"``, the default: BeyondMimic-style exponentials), on the next state
against its reference frame:

    r = w_root_pos exp(-|p - p*|^2 / 0.3^2)  +  w_root_rot exp(-e_R(root)^2 / 0.4^2)
      + w_body_pos exp(-mean_b |(x_b - p) - (x*_b - p*)|^2 / 0.3^2)
      + w_body_rot exp(-mean_b e_R(b)^2 / 0.4^2)
      + w_joint exp(-mean_j (q_j - q*_j)^2 / 0.3^2)
      + w_lin_vel exp(-|v - v*|^2 / 1.0^2)  +  w_ang_vel exp(-|w - w*|^2 / 3.14^2)
      + w_feet exp(-(h - h*)^2 / 0.1^2)
      + w_flight [h* > 5 mm] min(h / h*, 1)  +  w_takeoff [v*_z > 0.3 m/s] min(v_z / v*_z, 1)
      + w_tuck [h* > 5 mm] (1 - min(|(z - h) - (z* - h*)| / 0.2 m, 1))
      + w_balance [h* <= 5 mm] exp(-|(xi - f) - (xi* - f*)|^2 / sigma_balance^2)
      + w_stance (1 - min(|d - d*| / 0.3 m, 1))
      - w_action_rate mean_j ((u_t - u_{t-1}) / s)^2

with ``e_R^2 = |R - R*|_F^2 / 2`` (about the squared rotation angle for small errors; smooth,
unlike the geodesic angle), body sums over the 14 tracked bodies, ``u`` the servo targets
(``data.act`` of the servo filter, see :mod:`bcg.envs.g1.model`; the term is 0 if the model has
no action memory). The weights ``w_*`` and the kernel widths (``sigma_*``: 0.3, 0.4, 0.3, 1.0,
3.14 and 0.1 above are their defaults) are the env's ``scales`` mapping
(:mod:`bcg.envs.g1.reward_scales`; :meth:`G1Tracking.with_scales`). Default weights: root 0.5 /
0.5, bodies 1 / 1, joints 1, velocities 0.5 / 0.5, action rate 0.8 (the paper's weight, on the
mean over joints). ``h``: the lowest foot-sphere bottom (``h*`` the reference's; equal at 0
while both stand, so the term weighs the flight phase), ``w_feet`` 0 by default (an addition to
BeyondMimic's terms). ``w_flight`` (0 by default, ours): only in the reference's airborne
frames, the share of the reference foot clearance the robot reaches with both feet, linear and
unclipped below (a foot pressed into the floor gives a small negative share) so that its
gradient 1 / h* reaches the lower foot while it is still down. ``w_takeoff`` (0 by default,
ours): only in the frames where the reference's root rises faster than 0.3 m/s (the push-off and
the start of the flight), the share of the reference's vertical root speed the robot reaches,
linear and unclipped below, so that its gradient 1 / v*_z asks the legs to push the body up
through the stance contact rather than to lift a foot. ``w_tuck`` (0 by default, ours): in the
airborne frames, how close the vertical distance from the lowest foot up to the root, ``z - h``,
is to the reference's (linear in the error up to 0.2 m): the legs' retraction that turns a
push-off into a flight. It is a function of the joints alone, so its gradient reaches the knees
whether or not a foot is still down.
``w_balance`` (0 by default, ours): in the frames where the reference stands (``h* <= 5 mm``),
the horizontal offset of the root's capture point ``xi = p_xy + v_xy sqrt(z / g)`` (the linear
inverted pendulum's, Pratt et al., 2006) from the centre ``f`` of the foot spheres, against the
reference's offset (``sigma_balance`` 0.1 m by default). Unlike the world-frame root term it
asks for balance over the feet where they actually are: after a landing a few centimetres off
the reference's spot, the root term pulls the body towards the reference's position, this term
over the feet.
``w_stance`` (0 by default, ours): in every frame, how close the stance ``d`` (the left foot's
sphere centre minus the right's, horizontal, in the root's heading frame) is to the
reference's, linear in the error up to 0.3 m so that its gradient does not vanish for a wide
error (a straddle).
Terminated when the root is below 0.3 m (the paper); with ``feet_error_limit`` (ours, None by
default) also when the lowest foot's height is that far from the reference's, ``|h - h*| >
limit`` (m): an early termination on tracking, as in DeepMimic / BeyondMimic, aimed at the
flight phase, where a robot that keeps its feet down would otherwise lose only a little reward
and fall less. A fall in transfer evaluations (:meth:`G1Tracking.fell`) stays the root height.

Reward ``reward="add"`` (the paper's; :mod:`bcg.envs.g1.add`): ``r = w_add r_ADD(D_phi(delta))
- w_action_rate mean_j ((u_t - u_{t-1}) / s)^2`` with delta the scaled difference of
:meth:`G1Tracking.add_features` of the next state and of its reference frame. The discriminator
parameters phi are the ``reward_params`` argument of :meth:`G1Tracking.reward`; the learner
owns and trains them (:attr:`G1Tracking.reward_model`, only SHAC does).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.envs.base import ContactEnv
from bcg.envs.g1 import add as g1add
from bcg.envs.g1 import clips as g1clips
from bcg.envs.g1 import model as g1m
from bcg.envs.g1 import randomization as g1r
from bcg.envs.g1.randomization import Randomization
from bcg.envs.g1.reward_scales import pop_scales, resolve_scales
from bcg.sim.model import Sim
from bcg.sim.step import make_data, quat_mul

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx

HORIZON = 3  # reference frames ahead in the observation
REWARDS = ("tracking", "add")
ACTIONS = ("absolute", "residual")
FLIGHT_CLEARANCE = 0.005  # m: a reference frame with both feet this high is a flight frame
TAKEOFF_SPEED = 0.3  # m/s: reference root vertical speed above which w_takeoff counts
TUCK_SCALE = 0.2  # m: root-to-foot height error at which w_tuck's share reaches 0
STANCE_SCALE = 0.3  # m: stance error at which w_stance's share reaches 0
GRAVITY = 9.81  # m/s^2: the capture point's pendulum, xi = p + v sqrt(z / g)


@dataclasses.dataclass(frozen=True, eq=False)
class Reference:
    """Per-frame reference quantities of a clip at the control rate (numpy, native FK)."""

    qpos: np.ndarray  # (T, 36)
    qvel: np.ndarray  # (T, 35)
    body_pos: np.ndarray  # (T, nb, 3) tracked bodies, world
    body_mat: np.ndarray  # (T, nb, 3, 3)
    key_pos: np.ndarray  # (T, 5, 3) key sites, world
    foot_height: np.ndarray  # (T,) lowest foot-sphere bottom
    feet_xy: np.ndarray  # (T, 2) mean horizontal position of the foot spheres
    stance: np.ndarray  # (T, 2) left minus right foot centre, horizontal, root heading frame

    @property
    def num_frames(self) -> int:
        return int(self.qpos.shape[0])


def compute_reference(m: mujoco.MjModel, clip: g1clips.Clip) -> Reference:
    d = mujoco.MjData(m)
    bodies = g1m.body_ids(m)
    sites = g1m.site_ids(m)
    feet = g1m.foot_geom_ids(m)
    T = clip.num_frames
    bp = np.empty((T, len(bodies), 3))
    bm = np.empty((T, len(bodies), 3, 3))
    kp = np.empty((T, len(sites), 3))
    fh = np.empty(T)
    fxy = np.empty((T, 2))
    st = np.empty((T, 2))
    half = len(feet) // 2  # left spheres first (g1m.foot_geom_ids)
    for i, q in enumerate(clip.qpos):
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        bp[i] = d.xpos[bodies]
        bm[i] = d.xmat[bodies].reshape(-1, 3, 3)
        kp[i] = d.site_xpos[sites]
        fh[i] = np.min(d.geom_xpos[feet, 2] - m.geom_size[feet, 0])
        fxy[i] = d.geom_xpos[feet, :2].mean(0)
        lr = d.geom_xpos[feet[:half], :2].mean(0) - d.geom_xpos[feet[half:], :2].mean(0)
        st[i] = _heading_frame(np.asarray(d.xmat[bodies[0]]).reshape(3, 3), lr, np)
    return Reference(clip.qpos.copy(), clip.qvel(), bp, bm, kp, fh, fxy, st)


def _heading_frame(R, v, xp=jnp):
    """Horizontal vector ``v`` (2,) in the heading frame of rotation ``R`` (its yaw removed)."""
    yaw = xp.arctan2(R[1, 0], R[0, 0])
    c, s = xp.cos(yaw), xp.sin(yaw)
    return xp.stack([c * v[0] + s * v[1], -s * v[0] + c * v[1]])


def _rot6(R):
    """6-D rotation features: the first two columns of R (..., 3, 3) -> (..., 6)."""
    return jnp.swapaxes(R[..., :, :2], -1, -2).reshape(R.shape[:-2] + (6,))


@dataclasses.dataclass(frozen=True, eq=False)
class G1Tracking(ContactEnv):
    clip: g1clips.Clip | None = None
    randomization: Randomization = dataclasses.field(default_factory=Randomization.none)
    min_height: float = 0.3
    action_margin: float = 0.3
    # the reward's weights w_* and kernel widths sigma_* (bcg.envs.g1.reward_scales): a partial
    # mapping is completed with the defaults
    scales: Mapping[str, float] = dataclasses.field(default_factory=dict)
    reward_type: str = "tracking"  # "tracking" | "add" (module docstring)
    actions: str = "absolute"  # "absolute" | "residual" (module docstring)
    residual_scale: float = 0.5  # rad, actions="residual"
    leg_residual_scale: float | None = None  # rad, the 12 leg joints' (None: residual_scale)
    start: str = "random"  # "random" | "first": the reset frame (module docstring)
    start_focus: tuple[int, int] | None = None  # start="random": frames [a, b) drawn more often
    start_focus_prob: float = 0.5  # share of resets drawn from start_focus
    observe_command: bool = False  # observe the last sent command (module docstring)
    feet_error_limit: float | None = None  # m: terminate when |h - h*| exceeds it (docstring)
    velocity_feedforward: float = 0.0  # c: residual targets + c (kd / kp) qdot* (docstring)
    discriminator: g1add.Discriminator = dataclasses.field(default_factory=g1add.Discriminator)

    def __post_init__(self):
        if self.clip is None:
            raise ValueError("G1Tracking needs a clip")
        if self.reward_type not in REWARDS:
            raise ValueError(
                f"unknown G1 reward {self.reward_type!r}; choose from {', '.join(REWARDS)}"
            )
        if self.actions not in ACTIONS:
            raise ValueError(
                f"unknown G1 action mode {self.actions!r}; choose from {', '.join(ACTIONS)}"
            )
        if self.start not in ("random", "first"):
            raise ValueError(f"start must be 'random' or 'first', got {self.start!r}")
        if self.start_focus is not None:
            focus = tuple(int(x) for x in self.start_focus)
            object.__setattr__(self, "start_focus", focus)  # a JSON list from --param
            if len(focus) != 2 or not 0 <= focus[0] < focus[1] <= self.clip.num_frames - 1:
                raise ValueError(
                    f"start_focus must be frames [a, b) with 0 <= a < b <= "
                    f"{self.clip.num_frames - 1} (the clip's last start frame), got {focus}"
                )
        if not 0.0 <= self.start_focus_prob <= 1.0:
            raise ValueError(f"start_focus_prob must be in [0, 1], got {self.start_focus_prob!r}")
        object.__setattr__(self, "scales", resolve_scales(self.scales))
        if not self.residual_scale > 0:
            raise ValueError(f"residual_scale must be > 0, got {self.residual_scale!r}")
        if self.feet_error_limit is not None and not self.feet_error_limit > 0:
            raise ValueError(f"feet_error_limit must be > 0, got {self.feet_error_limit!r}")
        if not (np.isfinite(self.velocity_feedforward) and self.velocity_feedforward >= 0):
            raise ValueError(
                f"velocity_feedforward must be a finite c >= 0, got {self.velocity_feedforward!r}"
            )
        if self.leg_residual_scale is not None and not self.leg_residual_scale > 0:
            raise ValueError(f"leg_residual_scale must be > 0, got {self.leg_residual_scale!r}")
        fps = 1.0 / self.sim.control_dt
        if abs(self.clip.fps - fps) > 1e-6:
            raise ValueError(f"clip at {self.clip.fps} fps, the control rate is {fps} Hz")

    def with_scales(self, **named: float) -> G1Tracking:
        """This env with the reward scales ``named`` changed (``env.with_scales(w_flight=40)``),
        the others kept."""
        return dataclasses.replace(self, scales={**self.scales, **named})

    # ------------------------------------------------------------------ reference data

    @functools.cached_property
    def reference(self) -> Reference:
        return compute_reference(self.sim.mj_model, self.clip)

    @property
    def _ref(self) -> dict:
        """The reference tables as JAX arrays, converted at each use from the numpy
        :attr:`reference` (a cached JAX array first built inside a jit trace would be a leaked
        tracer; under jit the conversion is a compile-time constant)."""
        r = self.reference
        return {
            "qpos": jnp.asarray(r.qpos),
            "qvel": jnp.asarray(r.qvel),
            "body_pos": jnp.asarray(r.body_pos),
            "body_mat": jnp.asarray(r.body_mat),
            "key_pos": jnp.asarray(r.key_pos),
            "feet_xy": jnp.asarray(r.feet_xy),
            "stance": jnp.asarray(r.stance),
        }

    @property
    def num_frames(self) -> int:
        return self.clip.num_frames

    @property
    def tracked_bodies(self) -> tuple[str, ...]:
        return g1m.TRACKED_BODIES

    @functools.cached_property
    def tracked_body_ids(self) -> np.ndarray:
        return g1m.body_ids(self.sim.mj_model)

    @functools.cached_property
    def key_site_ids(self) -> np.ndarray:
        return g1m.site_ids(self.sim.mj_model)

    @functools.cached_property
    def foot_geom_ids(self) -> np.ndarray:
        return g1m.foot_geom_ids(self.sim.mj_model)

    @property
    def reference_body_pos(self) -> np.ndarray:
        """(T, 14, 3) world positions of :attr:`tracked_bodies` per clip frame."""
        return self.reference.body_pos

    @property
    def reference_qpos(self) -> np.ndarray:
        return self.reference.qpos

    def frame_of(self, time):
        """Reference frame index of a state time (works on numpy and JAX scalars)."""
        k = jnp.round(jnp.asarray(time) / self.sim.control_dt).astype(jnp.int32)
        return jnp.clip(k, 0, self.num_frames - 1)

    # ------------------------------------------------------------------ actions

    @functools.cached_property
    def _action_map(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        m = self.sim.mj_model
        q0 = self.clip.joints[0]
        span = np.max(np.abs(self.clip.joints - q0), axis=0) + self.action_margin
        lo, hi = m.actuator_ctrlrange.T
        return q0, span, lo, hi

    @property
    def action_scales(self) -> np.ndarray:
        """Per joint: ``span`` (absolute actions) or the residual's range, ``residual_scale``
        with ``leg_residual_scale`` on the hip, knee and ankle joints when it is set."""
        if self.actions == "absolute":
            return self._action_map[1]
        scales = np.full(self.sim.nu, self.residual_scale)
        if self.leg_residual_scale is not None:
            m = self.sim.mj_model
            names = [m.joint(int(j)).name for j in m.actuator_trnid[:, 0]]
            scales[[g1m.is_leg_joint(n) for n in names]] = self.leg_residual_scale
        return scales

    def action_to_ctrl(self, action, data=None):
        q0, _, lo, hi = (jnp.asarray(x) for x in self._action_map)
        a = jnp.clip(action, -1.0, 1.0)
        scales = jnp.asarray(self.action_scales, a.dtype)
        if self.actions == "absolute":
            return jnp.clip(q0 + scales * a, lo, hi)
        if data is None:
            raise ValueError("residual actions need the state (action_to_ctrl(action, data))")
        k = self.frame_of(data.time)
        target = self._ref["qpos"][k, 7:]
        if self.velocity_feedforward:  # (Python branch: off, the traced program is unchanged)
            lag = jnp.asarray(self.servo_lag, a.dtype)
            target = target + self.velocity_feedforward * lag * self._ref["qvel"][k, 6:]
        return jnp.clip(target + scales * a, lo, hi)

    @property
    def servo_lag(self) -> np.ndarray:
        """Per actuator, ``kd / kp`` (s) of the env's own model: a position servo's
        ``kp (u - q) - kd qdot`` equals ``kp (q* - q) + kd (qdot* - qdot)`` at
        ``u = q* + (kd / kp) qdot*``."""
        m = self.sim.mj_model
        return -m.actuator_biasprm[:, 2] / m.actuator_gainprm[:, 0]

    # ------------------------------------------------------------------ reset

    def _reset(self, key):
        m = self.sim.mj_model
        T = self.num_frames
        kf, kr, kj, kp = jax.random.split(key, 4)
        k = jax.random.randint(kf, (), 0, T - 1) if self.start == "random" else jnp.array(0)
        if self.start == "random" and self.start_focus is not None:
            k_focus, k_pick = jax.random.split(jax.random.fold_in(kf, 1))
            focus = jax.random.randint(k_focus, (), *self.start_focus)
            k = jnp.where(jax.random.uniform(k_pick) < self.start_focus_prob, focus, k)
        ref = self._ref
        q = ref["qpos"][k]
        v = ref["qvel"][k]
        cfg = self.randomization
        if cfg.reset_noise is not None:
            rot_n, joint_n = cfg.reset_noise
            u = jax.random.uniform(kp, (3,), minval=-1.0, maxval=1.0)
            xy, up = cfg.reset_root_xy, cfg.reset_root_up
            dp = jnp.stack([xy * u[0], xy * u[1], up * (0.5 + 0.5 * u[2])])
            rv = jax.random.uniform(kr, (3,), minval=-rot_n, maxval=rot_n)
            angle = jnp.linalg.norm(rv)
            axis = rv / jnp.maximum(angle, 1e-9)
            dq = jnp.concatenate([jnp.cos(angle / 2)[None], jnp.sin(angle / 2) * axis])
            quat = quat_mul(q[3:7], dq)
            lo, hi = (jnp.asarray(x) for x in m.jnt_range[1:].T)
            joints = q[7:] + jax.random.uniform(kj, (29,), minval=-joint_n, maxval=joint_n)
            q = jnp.concatenate(
                [q[:3] + dp, quat / jnp.linalg.norm(quat), jnp.clip(joints, lo, hi)]
            )
        return k, q, v

    def reset_state(self, key):
        _, q, v = self._reset(key)
        return q, v

    def initial_data(self, key):
        k, q, v = self._reset(key)
        d = make_data(self.sim)
        targets = jnp.clip(
            self._ref["qpos"][k, 7:], *(jnp.asarray(x) for x in self._action_map[2:])
        )
        upd = dict(
            qpos=q.astype(d.qpos.dtype),
            qvel=v.astype(d.qvel.dtype),
            time=(k * self.sim.control_dt).astype(d.time.dtype),
            ctrl=targets.astype(d.ctrl.dtype),
        )
        if self.sim.mj_model.na:
            upd["act"] = targets.astype(d.act.dtype)
        if self.sim.model_at is not None and self.sim.mj_model.nuserdata:
            # per-environment model: [flag, uniform draws] (randomization.userdata_model)
            n = self.sim.mj_model.nuserdata - 1
            draws = jax.random.uniform(jax.random.fold_in(key, 7), (n,), d.userdata.dtype)
            upd["userdata"] = jnp.concatenate([jnp.ones((1,), d.userdata.dtype), draws])
        return d.replace(**upd)

    # ------------------------------------------------------------------ observation

    def kinematics(self, data):
        """``data`` with body / site / geom poses of its *current* ``qpos`` (``mjx.kinematics``).

        After ``mjx.step`` (and native ``mj_step``) the derived fields ``xpos``, ``xmat``, ...
        are those of the last physics step's *start* (one 5 ms physics step behind ``qpos``),
        and ``initial_data`` / ``make_data`` leave them zero. Observation, reward, tracking
        errors and eval metrics therefore recompute them here from ``qpos``, so they are
        functions of the state ``(qpos, qvel, act, time)`` alone, whichever step (any
        estimator, ``plain_step``, native MuJoCo, the deploy runner) produced it, as on the
        real robot. ``qpos`` / ``qvel`` themselves are read from the caller's data.
        """
        return mjx.kinematics(self.sim.mjx_model, data)

    def _root(self, kin):
        rid = self.tracked_body_ids[0]
        return kin.xpos[rid], kin.xmat[rid].reshape(3, 3)

    def observe(self, data):
        """The 327 observation features (module docstring) of the current state; body poses
        from :meth:`kinematics` (not the possibly stale ``data.xpos`` / ``xmat``); with
        :attr:`observe_command` 29 more, ``(data.ctrl - q) / s``."""
        ref = self._ref
        kin = self.kinematics(data)
        p, R = self._root(kin)
        ids = self.tracked_body_ids
        Rb = kin.xmat[ids[1:]].reshape(-1, 3, 3)
        rel_rot = jnp.einsum("ji,bjk->bik", R, Rb)
        keys = (kin.site_xpos[self.key_site_ids] - p) @ R
        k = self.frame_of(data.time)
        T = self.num_frames
        feats = [
            p[2:3],
            _rot6(R),
            R.T @ data.qvel[0:3],
            data.qvel[3:6],
            _rot6(rel_rot).reshape(-1),
            data.qpos[7:],
            data.qvel[6:],
            keys.reshape(-1),
            (k / (T - 1)).astype(p.dtype)[None],
        ]
        for h in range(1, HORIZON + 1):
            j = jnp.clip(k + h, 0, T - 1)
            pr = ref["body_pos"][j, 0]
            Rr = ref["body_mat"][j, 0]
            feats += [
                pr[2:3],
                _rot6(R.T @ Rr),
                R.T @ (pr - p),
                ref["qpos"][j, 7:],
                ((ref["key_pos"][j] - pr) @ Rr).reshape(-1),
            ]
        if self.observe_command:
            span = jnp.asarray(self._action_map[1])
            feats.append((data.ctrl - data.qpos[7:]) / span)
        return jnp.concatenate([f.astype(p.dtype) for f in feats])

    # ------------------------------------------------------------------ reward

    def tracking_errors(self, data) -> dict:
        """Squared tracking errors of a state against its reference frame (body poses from
        :meth:`kinematics` of the current ``qpos``)."""
        ref = self._ref
        k = self.frame_of(data.time)
        ids = self.tracked_body_ids
        kin = self.kinematics(data)
        xb = kin.xpos[ids]
        Rb = kin.xmat[ids].reshape(-1, 3, 3)
        xr, Rr = ref["body_pos"][k], ref["body_mat"][k]
        rot_err = 0.5 * jnp.sum((Rb - Rr) ** 2, axis=(-1, -2))
        rel = (xb - xb[0]) - (xr - xr[0])
        low, href = self._foot_low(kin), jnp.asarray(self.reference.foot_height)[k]
        out = {
            "root_pos": jnp.sum((xb[0] - xr[0]) ** 2),
            "root_rot": rot_err[0],
            "body_pos": jnp.mean(jnp.sum(rel**2, -1)),
            "body_rot": jnp.mean(rot_err),
            "joint": jnp.mean((data.qpos[7:] - ref["qpos"][k, 7:]) ** 2),
            "lin_vel": jnp.sum((data.qvel[0:3] - ref["qvel"][k, 0:3]) ** 2),
            "ang_vel": jnp.sum((data.qvel[3:6] - ref["qvel"][k, 3:6]) ** 2),
            "body_pos_error": jnp.mean(jnp.linalg.norm(xb - xr, axis=-1)),
            "feet": (low - href) ** 2,
        }
        if self.scales[
            "w_flight"
        ]:  # (Python branch: without the term the traced program is unchanged)
            share = jnp.minimum(low / jnp.maximum(href, 1e-3), 1.0)
            out["flight"] = jnp.where(href > FLIGHT_CLEARANCE, share, 0.0)
        if self.scales["w_tuck"]:
            gap = (data.qpos[2] - low) - (ref["qpos"][k, 2] - href)
            share = 1.0 - jnp.minimum(jnp.abs(gap) / TUCK_SCALE, 1.0)
            out["tuck"] = jnp.where(href > FLIGHT_CLEARANCE, share, 0.0)
        if self.scales["w_takeoff"]:
            vref = ref["qvel"][k, 2]
            share = jnp.minimum(data.qvel[2] / jnp.maximum(vref, 1e-3), 1.0)
            out["takeoff"] = jnp.where(vref > TAKEOFF_SPEED, share, 0.0)
        if self.scales["w_balance"]:
            feet = self.foot_geom_ids
            d = self._capture_point(xb[0], data.qvel) - kin.geom_xpos[feet, :2].mean(0)
            d_ref = self._capture_point(xr[0], ref["qvel"][k]) - ref["feet_xy"][k]
            err = jnp.sum((d - d_ref) ** 2)
            out["balance"] = jnp.where(href > FLIGHT_CLEARANCE, 0.0, err)
            out["balance_on"] = (href <= FLIGHT_CLEARANCE).astype(err.dtype)
        if self.scales["w_stance"]:
            feet = self.foot_geom_ids
            half = len(feet) // 2
            lr = kin.geom_xpos[feet[:half], :2].mean(0) - kin.geom_xpos[feet[half:], :2].mean(0)
            diff = _heading_frame(Rb[0], lr) - ref["stance"][k]
            dist = jnp.sqrt(jnp.sum(diff**2) + 1e-12)  # (smooth at 0)
            out["stance"] = 1.0 - jnp.minimum(dist / STANCE_SCALE, 1.0)
        return out

    @staticmethod
    def _capture_point(p, qvel):
        """Horizontal capture point of the root as a linear inverted pendulum,
        ``xi = p_xy + v_xy sqrt(z / g)`` (Pratt et al., 2006), ``z`` clamped at 0.3 m."""
        return p[:2] + qvel[0:2] * jnp.sqrt(jnp.maximum(p[2], 0.3) / GRAVITY)

    def _foot_low(self, kin):
        """The lowest foot-sphere bottom (m) of forward kinematics ``kin``."""
        feet = self.foot_geom_ids
        size = jnp.asarray(self.sim.mj_model.geom_size[feet, 0])
        return jnp.min(kin.geom_xpos[feet, 2] - size)

    # ------------------------------------------------------------------ ADD reward

    def add_features(self, data):
        """``(f(x), f(ref_k), s)``: the ADD features of the state, of its reference frame and
        their scales (root position, body positions relative to the root, body rotations as
        6-D, joints, root linear / angular velocity; all world frame except the free joint's
        angular velocity), flat (n,)."""
        ref = self._ref
        k = self.frame_of(data.time)
        ids = self.tracked_body_ids
        kin = self.kinematics(data)
        xb, Rb = kin.xpos[ids], kin.xmat[ids].reshape(-1, 3, 3)
        xr, Rr = ref["body_pos"][k], ref["body_mat"][k]
        nb = len(ids)

        def feats(x, R, q, v):
            return jnp.concatenate(
                [x[0], (x[1:] - x[0]).reshape(-1), _rot6(R).reshape(-1), q[7:], v[0:3], v[3:6]]
            )

        f = feats(xb, Rb, data.qpos, data.qvel)
        f_ref = feats(xr, Rr, ref["qpos"][k], ref["qvel"][k]).astype(f.dtype)
        scale = np.concatenate(
            [
                np.full(3 + 3 * (nb - 1), self.scales["sigma_pos"]),
                np.full(6 * nb, self.scales["sigma_rot"]),
                np.full(self.sim.mj_model.nu, self.scales["sigma_joint"]),
                np.full(3, self.scales["sigma_lin_vel"]),
                np.full(3, self.scales["sigma_ang_vel"]),
            ]
        )
        return f, f_ref, jnp.asarray(scale, f.dtype)

    def reward_model_input(self, data):
        """The ADD differential vector delta of a state (the discriminator's input)."""
        return g1add.differential(*self.add_features(data))

    @property
    def reward_model(self) -> g1add.Discriminator | None:
        """The learned part of the reward (None for ``reward="tracking"``): the ADD
        discriminator with its input size; a learner that finds one here must carry
        ``reward_model.init(key)`` in its state, pass ``reward_model.params(state)`` as
        ``reward_params`` and call ``reward_model.update``."""
        if self.reward_type != "add":
            return None
        n = 3 + 3 * (len(self.tracked_body_ids) - 1) + 6 * len(self.tracked_body_ids)
        return dataclasses.replace(self.discriminator, n_features=n + self.sim.mj_model.nu + 6)

    @property
    def evaluation_env(self) -> G1Tracking:
        """This env with the fixed tracking reward (for evaluation without the learner)."""
        if self.reward_type == "tracking":
            return self
        return dataclasses.replace(self, reward_type="tracking")

    def _action_rate(self, data, next_data):
        span = jnp.asarray(self._action_map[1])
        return jnp.mean(((next_data.act - data.act) / span) ** 2)

    def reward(self, data, action, next_data, reward_params=None):
        """Reward of ``data --action--> next_data`` (module docstring); ``reward_params``: the
        discriminator parameters phi for ``reward="add"`` (required there, unused otherwise)."""
        if self.reward_type == "add":
            if reward_params is None:
                raise ValueError(
                    "G1Tracking(reward='add') needs the discriminator parameters "
                    "(reward_params), which only a learner that trains the discriminator "
                    "passes (SHAC); PPO, BPTT and plain_step need reward='tracking'"
                )
            r = self.scales["w_add"] * self.reward_model.reward(
                reward_params, self.reward_model_input(next_data)
            )
            if self.sim.mj_model.na:
                r = r - self.scales["w_action_rate"] * self._action_rate(data, next_data)
            return r
        e = self.tracking_errors(next_data)
        r = (
            self.scales["w_root_pos"] * jnp.exp(-e["root_pos"] / self.scales["sigma_pos"] ** 2)
            + self.scales["w_root_rot"] * jnp.exp(-e["root_rot"] / self.scales["sigma_rot"] ** 2)
            + self.scales["w_body_pos"] * jnp.exp(-e["body_pos"] / self.scales["sigma_pos"] ** 2)
            + self.scales["w_body_rot"] * jnp.exp(-e["body_rot"] / self.scales["sigma_rot"] ** 2)
            + self.scales["w_joint"] * jnp.exp(-e["joint"] / self.scales["sigma_joint"] ** 2)
            + self.scales["w_lin_vel"] * jnp.exp(-e["lin_vel"] / self.scales["sigma_lin_vel"] ** 2)
            + self.scales["w_ang_vel"] * jnp.exp(-e["ang_vel"] / self.scales["sigma_ang_vel"] ** 2)
            + self.scales["w_feet"] * jnp.exp(-e["feet"] / self.scales["sigma_feet"] ** 2)
        )
        if self.scales["w_flight"]:
            r = r + self.scales["w_flight"] * e["flight"]
        if self.scales["w_takeoff"]:
            r = r + self.scales["w_takeoff"] * e["takeoff"]
        if self.scales["w_tuck"]:
            r = r + self.scales["w_tuck"] * e["tuck"]
        if self.scales["w_balance"]:
            r = r + self.scales["w_balance"] * e["balance_on"] * jnp.exp(
                -e["balance"] / self.scales["sigma_balance"] ** 2
            )
        if self.scales["w_stance"]:
            r = r + self.scales["w_stance"] * e["stance"]
        if self.sim.mj_model.na:
            r = r - self.scales["w_action_rate"] * self._action_rate(data, next_data)
        return r

    @property
    def max_reward(self) -> float:
        if self.reward_type == "add":
            cap = g1add.REWARD_CAP if self.discriminator.loss == "logistic" else 1.0
            return self.scales["w_add"] * cap
        return (
            self.scales["w_root_pos"]
            + self.scales["w_root_rot"]
            + self.scales["w_body_pos"]
            + self.scales["w_body_rot"]
            + self.scales["w_joint"]
            + self.scales["w_lin_vel"]
            + self.scales["w_ang_vel"]
            + self.scales["w_feet"]
            + self.scales["w_flight"]
            + self.scales["w_takeoff"]
            + self.scales["w_tuck"]
            + self.scales["w_balance"]
            + self.scales["w_stance"]
        )

    def terminated(self, data):
        down = self.fell(data)
        if self.feet_error_limit is None:
            return down
        low = self._foot_low(self.kinematics(data))
        href = jnp.asarray(self.reference.foot_height)[self.frame_of(data.time)]
        return down | (jnp.abs(low - href) > self.feet_error_limit)

    def fell(self, data):
        # the pelvis body origin is the free joint's position: qpos[2] is the root height
        return data.qpos[2] < self.min_height

    def tracking_error(self, data):
        """Mean per-body position error (m) of a state against its reference frame."""
        return self.tracking_errors(data)["body_pos_error"]

    def native_randomization(self, spec):
        """The G1 randomisation table (:mod:`bcg.envs.g1.randomization`) for transfer runs,
        items from ``spec`` (:meth:`Randomization.parse`; None: all); each run plays the
        whole clip from frame 0 (``start="first"``, with the table's reset noise)."""
        from bcg.envs.g1.randomization import NativeRandomization

        cfg = Randomization.parse(spec or "all")
        return NativeRandomization(cfg, dataclasses.replace(self, randomization=cfg, start="first"))

    def eval_metrics(self, data):
        e = self.tracking_errors(data)
        low = self._foot_low(self.kinematics(data))
        return {
            "root_height": data.qpos[2],
            "body_pos_error": e["body_pos_error"],
            "foot_penetration": jnp.maximum(-low, 0.0),
            "airborne": (low > 0.005).astype(low.dtype),
        }


def g1_tracking(
    clip="jump",
    stiffness="stiff",
    *,
    randomization: Randomization | str | None = None,
    config: g1m.G1Config | dict | None = None,
    solver_iterations: int = 1,
    reward: str = "tracking",
    discriminator: g1add.Discriminator | dict | None = None,
    **kw,
) -> G1Tracking:
    """A G1 tracking environment on a built-in clip name, a CSV path or a :class:`Clip`.

    ``reward``: ``"tracking"`` (default) or ``"add"`` (:mod:`bcg.envs.g1.add`, SHAC only);
    ``discriminator``: the ADD network settings (a :class:`Discriminator` or a dict of its
    fields); ``config``: the model options (a :class:`G1Config` or a dict of its fields, e.g.
    ``--param 'env.config={"kp_scale": 2.5}'``); the reward's scales by name (``w_flight=40``)
    or as a ``scales`` mapping (:mod:`bcg.envs.g1.reward_scales`), checked before the model
    is built."""
    if reward not in REWARDS:
        raise ValueError(f"unknown G1 reward {reward!r}; choose from {', '.join(REWARDS)}")
    kw["scales"] = resolve_scales(kw.pop("scales", None), **pop_scales(kw))
    if isinstance(discriminator, dict):
        bad = set(discriminator) - {f.name for f in dataclasses.fields(g1add.Discriminator)}
        if bad:
            raise ValueError(f"the ADD discriminator has no setting(s) {sorted(bad)}")
        discriminator = g1add.Discriminator(**discriminator)
    if discriminator is not None:
        kw["discriminator"] = discriminator
    if isinstance(config, dict):
        bad = set(config) - {f.name for f in dataclasses.fields(g1m.G1Config)}
        if bad:
            raise ValueError(f"the G1 model has no setting(s) {sorted(bad)} (G1Config)")
        config = g1m.G1Config(**config)
    if isinstance(randomization, str) or randomization is None:
        randomization = Randomization.parse(randomization)
    sim: Sim = g1r.load_randomized_g1(
        stiffness, config=config, solver_iterations=solver_iterations, randomization=randomization
    )
    fps = 1.0 / sim.control_dt
    if isinstance(clip, g1clips.Clip):
        c = clip if abs(clip.fps - fps) < 1e-9 else g1clips.resample(clip, fps)
    else:
        c = g1clips.get_clip(clip, fps=fps)
    kw.setdefault("episode_length", c.num_frames)
    return G1Tracking(sim=sim, clip=c, randomization=randomization, reward_type=reward, **kw)


def g1_jump(stiffness="stiff", **kw) -> G1Tracking:
    """Unitree G1 tracking the built-in countermovement vertical jump clip (:func:`g1_tracking`)."""
    return g1_tracking("jump", stiffness, **kw)


def g1_squat_jump(stiffness="stiff", **kw) -> G1Tracking:
    """Unitree G1 tracking the built-in squat jump from a held squat clip (:func:`g1_tracking`)."""
    return g1_tracking("squat_jump", stiffness, **kw)


def g1_hop(stiffness="stiff", **kw) -> G1Tracking:
    """Unitree G1 tracking the built-in hop clip (:func:`g1_tracking`)."""
    return g1_tracking("hop", stiffness, **kw)
