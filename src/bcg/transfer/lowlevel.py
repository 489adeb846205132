"""Low-level robot interface: unitree_sdk2 ``unitree_hg`` LowCmd / LowState as dataclasses, and
the mapping between a policy's action / observation and motor commands / states.

Messages. :class:`LowCmd`, :class:`MotorCmd`, :class:`LowState`, :class:`MotorState` and
:class:`IMUState` mirror unitree_sdk2's IDL types ``unitree_hg.msg.dds_.LowCmd_``,
``MotorCmd_``, ``LowState_``, ``MotorState_`` and ``IMUState_`` (G1 / H1-2: 35 motor slots)
field for field, so a deploy loop written against them runs unchanged on the real SDK types
(:func:`to_sdk` / :func:`from_sdk` copy between the two):

    LowCmd_:   mode_pr, mode_machine, motor_cmd[35], reserve[4], crc
    MotorCmd_: mode, q, dq, tau, kp, kd, reserve
    LowState_: version[2], mode_pr, mode_machine, tick, imu_state, motor_state[35],
               wireless_remote[40], reserve[4], crc
    MotorState_: mode, q, dq, ddq, tau_est, temperature[2], vol, sensor[2], motorstate, reserve[4]
    IMUState_: quaternion[4] (w, x, y, z), gyroscope[3] (rad/s, body frame),
               accelerometer[3] (m/s^2, body frame), rpy[3], temperature

The motor driver applies, at its own rate, ``tau = kp (q - q_meas) + kd (dq - dq_meas) + tau``
(the command's ``tau`` is a feed-forward torque).

Actions. :class:`MotorMap` turns MuJoCo ``ctrl`` of the training model into motor commands,
per actuator kind (read from the model, see :func:`actuator_table`):

* ``position`` actuator (MuJoCo's PD servo, force ``kp (ctrl - g q) - kv g qdot``, gear g):
  ``q = ctrl / g, dq = 0, kp = kp g^2, kd = kv g^2, tau = 0`` (the same joint torque);
* ``motor`` actuator (force ``gain ctrl``): ``kp = kd = 0, tau = g gain ctrl``.

A first-order filter on the control (``dyntype`` filter / filterexact, e.g. the G1's 1 ms
servo filter that keeps the previous target in ``data.act``) is ignored: the motor driver takes
the new target at once (``filter_tc`` in the table says how long MuJoCo's filter lags).

``motor_joints`` gives the robot's motor order as joint names (default: the actuators' joints in
actuator order); a G1 env should provide unitree's 29-motor order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field

import mujoco
import numpy as np

NUM_MOTORS = 35  # motor slots of unitree_hg messages (G1: the first 29 are used)


# ----------------------------------------------------------------------------- messages


@dataclasses.dataclass
class MotorCmd:
    mode: int = 0  # 1: enable (servo), 0: disable
    q: float = 0.0
    dq: float = 0.0
    tau: float = 0.0
    kp: float = 0.0
    kd: float = 0.0
    reserve: int = 0


@dataclasses.dataclass
class LowCmd:
    mode_pr: int = 0  # 0: PR (pitch/roll ankle) mode, 1: AB
    mode_machine: int = 0
    motor_cmd: list[MotorCmd] = field(default_factory=lambda: [MotorCmd() for _ in range(35)])
    reserve: list[int] = field(default_factory=lambda: [0] * 4)
    crc: int = 0


@dataclasses.dataclass
class MotorState:
    mode: int = 0
    q: float = 0.0
    dq: float = 0.0
    ddq: float = 0.0
    tau_est: float = 0.0
    temperature: list[int] = field(default_factory=lambda: [0, 0])
    vol: float = 0.0
    sensor: list[int] = field(default_factory=lambda: [0, 0])
    motorstate: int = 0
    reserve: list[int] = field(default_factory=lambda: [0] * 4)


@dataclasses.dataclass
class IMUState:
    quaternion: list[float] = field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])  # w x y z
    gyroscope: list[float] = field(default_factory=lambda: [0.0] * 3)
    accelerometer: list[float] = field(default_factory=lambda: [0.0] * 3)
    rpy: list[float] = field(default_factory=lambda: [0.0] * 3)
    temperature: int = 0


@dataclasses.dataclass
class LowState:
    version: list[int] = field(default_factory=lambda: [0, 0])
    mode_pr: int = 0
    mode_machine: int = 0
    tick: int = 0
    imu_state: IMUState = field(default_factory=IMUState)
    motor_state: list[MotorState] = field(default_factory=lambda: [MotorState() for _ in range(35)])
    wireless_remote: list[int] = field(default_factory=lambda: [0] * 40)
    reserve: list[int] = field(default_factory=lambda: [0] * 4)
    crc: int = 0


def _copy_into(dst, src):
    """Copy the fields of a mirrored message ``src`` into ``dst`` (dataclass or SDK type)."""
    for f in dataclasses.fields(src) if dataclasses.is_dataclass(src) else []:
        v = getattr(src, f.name)
        if dataclasses.is_dataclass(v):
            _copy_into(getattr(dst, f.name), v)
        elif isinstance(v, list) and v and dataclasses.is_dataclass(v[0]):
            tgt = getattr(dst, f.name)
            for i, x in enumerate(v):
                _copy_into(tgt[i], x)
        elif isinstance(v, list):
            tgt = getattr(dst, f.name)
            for i, x in enumerate(v):
                tgt[i] = x
        else:
            setattr(dst, f.name, v)
    return dst


def to_sdk(msg, sdk_msg):
    """Copy a :class:`LowCmd` (or any mirrored message) into an unitree_sdk2py message."""
    return _copy_into(sdk_msg, msg)


def from_sdk(sdk_msg, cls=LowState):
    """A mirrored dataclass (default :class:`LowState`) from an unitree_sdk2py message."""

    def conv(c, s):
        kw = {}
        for f in dataclasses.fields(c):
            v = getattr(s, f.name)
            default = getattr(c(), f.name)
            if dataclasses.is_dataclass(default):
                kw[f.name] = conv(type(default), v)
            elif isinstance(default, list) and default and dataclasses.is_dataclass(default[0]):
                kw[f.name] = [conv(type(default[0]), x) for x in v]
            elif isinstance(default, list):
                kw[f.name] = [x for x in v]
            else:
                kw[f.name] = v
        return c(**kw)

    return conv(cls, sdk_msg)


# ----------------------------------------------------------------------------- actuators


def actuator_table(m: mujoco.MjModel) -> list[dict]:
    """One dict per actuator: name, joint, kind ('position' | 'motor'), gear, gain, filter_tc
    (0: no control filter), kp, kv, ctrlrange, forcerange (actuator force) and
    joint_forcerange (the joint's actuatorfrcrange, a joint-torque limit), each None when
    unlimited. ValueError for kinds that are neither."""
    out = []
    for i in range(m.nu):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, i) or f"actuator{i}"
        if int(m.actuator_trntype[i]) != int(mujoco.mjtTrn.mjTRN_JOINT):
            raise ValueError(f"actuator {name}: only joint transmissions are supported")
        j = int(m.actuator_trnid[i, 0])
        joint = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}"
        gear = float(m.actuator_gear[i, 0])
        gain, bias = m.actuator_gainprm[i], m.actuator_biasprm[i]
        fixed = int(m.actuator_gaintype[i]) == int(mujoco.mjtGain.mjGAIN_FIXED)
        btype = int(m.actuator_biastype[i])
        dyn = int(m.actuator_dyntype[i])
        filters = (int(mujoco.mjtDyn.mjDYN_FILTER), int(mujoco.mjtDyn.mjDYN_FILTEREXACT))
        if dyn not in (int(mujoco.mjtDyn.mjDYN_NONE), *filters) or not fixed:
            raise ValueError(
                f"actuator {name}: only fixed-gain actuators without dynamics or with a "
                "first-order filter on the control"
            )
        filter_tc = float(m.actuator_dynprm[i, 0]) if dyn in filters else 0.0
        if btype == int(mujoco.mjtBias.mjBIAS_NONE):
            kind, kp, kv = "motor", 0.0, 0.0
        elif (
            btype == int(mujoco.mjtBias.mjBIAS_AFFINE)
            and bias[0] == 0.0
            and np.isclose(bias[1], -gain[0])
        ):
            kind, kp, kv = "position", float(gain[0]), float(-bias[2])
        else:
            raise ValueError(f"actuator {name}: neither a motor nor a position (PD) actuator")
        out.append(
            {
                "name": name,
                "joint": joint,
                "kind": kind,
                "gear": gear,
                "gain": float(gain[0]),
                "filter_tc": filter_tc,
                "kp": kp,
                "kv": kv,
                "ctrlrange": [float(x) for x in m.actuator_ctrlrange[i]]
                if m.actuator_ctrllimited[i]
                else None,
                "forcerange": [float(x) for x in m.actuator_forcerange[i]]
                if m.actuator_forcelimited[i]
                else None,
                "joint_forcerange": [float(x) for x in m.jnt_actfrcrange[j]]
                if m.jnt_actfrclimited[j]
                else None,
            }
        )
    return out


@dataclasses.dataclass
class MotorMap:
    """Maps MuJoCo ``ctrl`` (training actuator order) to a :class:`LowCmd` and back to joints.

    Attributes:
      actuators: :func:`actuator_table` of the training model.
      motor_joints: joint name of every motor slot in the robot's order (default: the
        actuators' joints in actuator order). Slots past ``len(motor_joints)`` stay disabled.
    """

    actuators: list[dict]
    motor_joints: list[str] | None = None

    def __post_init__(self):
        joints = [a["joint"] for a in self.actuators]
        if self.motor_joints is None:
            self.motor_joints = list(joints)
        missing = set(joints) - set(self.motor_joints)
        if missing:
            raise ValueError(f"motor_joints lacks actuated joints {sorted(missing)}")
        if len(self.motor_joints) > NUM_MOTORS:
            raise ValueError(f"at most {NUM_MOTORS} motors, got {len(self.motor_joints)}")
        # slot of each actuator
        self.slot = np.array([self.motor_joints.index(j) for j in joints], int)

    @classmethod
    def from_model(cls, m: mujoco.MjModel, motor_joints=None) -> MotorMap:
        return cls(actuator_table(m), None if motor_joints is None else list(motor_joints))

    @property
    def num_motors(self) -> int:
        return len(self.motor_joints)

    def command(self, ctrl, cmd: LowCmd | None = None, gains=None) -> LowCmd:
        """The :class:`LowCmd` producing the joint torques MuJoCo's actuators would for ``ctrl``
        (clipped to the control range like MuJoCo). ``gains``: optional per-actuator factors
        ``(kp factor, kd factor)`` on the position servos' gains (a gain schedule,
        :mod:`bcg.sim.servo_schedule`)."""
        cmd = cmd or LowCmd()
        ctrl = np.asarray(ctrl, np.float64).reshape(-1)
        f_kp, f_kd = (np.ones(len(self.actuators)),) * 2 if gains is None else gains
        for i, a in enumerate(self.actuators):
            u = float(ctrl[i])
            if a["ctrlrange"] is not None:
                u = float(np.clip(u, *a["ctrlrange"]))
            c = cmd.motor_cmd[int(self.slot[i])]
            g = a["gear"]
            c.mode = 1
            if a["kind"] == "position":
                c.q, c.dq, c.tau = u / g, 0.0, 0.0
                c.kp, c.kd = a["kp"] * g * g * f_kp[i], a["kv"] * g * g * f_kd[i]
            else:
                c.q, c.dq, c.kp, c.kd = 0.0, 0.0, 0.0, 0.0
                c.tau = g * a["gain"] * u
        return cmd

    def torque_limits(self) -> np.ndarray:
        """(num_motors, 2) joint-torque limits of the slots (inf when unlimited)."""
        lim = np.tile([-np.inf, np.inf], (self.num_motors, 1))
        for i, a in enumerate(self.actuators):
            g, k = abs(a["gear"]), self.slot[i]
            if a["forcerange"] is not None:
                lim[k] = np.asarray(a["forcerange"]) * g
            elif a["kind"] == "motor" and a["ctrlrange"] is not None:
                lim[k] = np.sort(np.asarray(a["ctrlrange"]) * a["gear"] * a["gain"])
            if a.get("joint_forcerange") is not None:  # MuJoCo's joint actuatorfrcrange
                jr = np.asarray(a["joint_forcerange"])
                lim[k] = [max(lim[k, 0], jr[0]), min(lim[k, 1], jr[1])]
        return lim


def pd_torque(cmd: LowCmd, q, dq, num: int) -> np.ndarray:
    """Joint torques of the first ``num`` motor slots: kp (q* - q) + kd (dq* - dq) + tau
    (disabled slots: 0)."""
    out = np.zeros(num)
    for i in range(num):
        c = cmd.motor_cmd[i]
        if c.mode:
            out[i] = c.kp * (c.q - q[i]) + c.kd * (c.dq - dq[i]) + c.tau
    return out
