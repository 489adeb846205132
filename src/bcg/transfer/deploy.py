"""Deploy runner: drive a policy at the control rate (50 Hz) through the unitree_sdk2
LowCmd / LowState interface (:mod:`bcg.transfer.lowlevel`).

Each control period:

    state, base = transport.read()              # LowState (+ base state, when known)
    d = observation.state(state, base, t)       # training-model state (StateObservation)
    obs = observation.bridge.observe(d)         # the env's observation of that state
    action = policy(obs)                        # ONNX (onnxruntime) or JAX, deterministic
    ctrl = ctrl_fn(action, d)                   # the env's action in state d -> MuJoCo ctrl
    transport.write(motor_map.command(ctrl))    # LowCmd: PD targets / gains / feed-forward
    transport.wait()                            # one control period

The state ``d`` carries in its ``ctrl`` the last command sent (before the first, the command of
a zero action at the first state, as a training reset sets it; :attr:`DeployRunner.last_ctrl`),
as in MJX training and native transfer runs, so an env that observes it
(``G1Tracking(observe_command=True)``) sees the same here.

Transports:

* :class:`MujocoTransport`: native MuJoCo standing in for the robot, like unitree_mujoco's
  bridge: every physics step it applies the last LowCmd's PD law
  ``tau = kp (q* - q) + kd (dq* - dq) + tau_ff`` (clipped to the actuator's torque limits) as
  joint torques (the model's own actuators are disabled), and publishes a LowState with motor
  q / dq / tau_est from the joint state and the IMU of ``imu_body`` (default: the root body):
  orientation (w, x, y, z) and body-frame angular velocity from the current state's forward
  kinematics, and accelerometer from an ``accelerometer`` sensor on that body's site if the
  model has one, else the gravity reaction of a resting IMU (R^T (0, 0, 9.81)). It also returns
  the ground-truth qpos / qvel of the unactuated joints as the base state (what a state
  estimator would give on the robot; unitree_mujoco publishes the same as its high state).
* :class:`UnitreeSdkTransport`: the real robot through unitree_sdk2py (``rt/lowcmd`` /
  ``rt/lowstate``, CRC, 50 Hz wall-clock pacing); imported only when used, with a clear error
  when unitree_sdk2py is not installed (it is not on the package index). No base state: a
  policy whose observation needs the root position or velocity needs an estimator.

The runner's loop with :class:`MujocoTransport` reproduces running the policy directly in
native MuJoCo with the model's actuators (tested on the hopper's motors and on a PD-actuated
floating-base model).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Protocol

import mujoco
import numpy as np

from bcg.transfer import measures
from bcg.transfer.config import MAX_ROOT_SPEED
from bcg.transfer.lowlevel import (
    IMUState,
    LowCmd,
    LowState,
    MotorMap,
    from_sdk,
    pd_torque,
    to_sdk,
)


@dataclasses.dataclass
class BaseState:
    """qpos / qvel entries of the unactuated joints (model order), e.g. the floating base."""

    qpos: np.ndarray
    qvel: np.ndarray


class Transport(Protocol):
    control_dt: float

    def read(self) -> tuple[LowState, BaseState | None]: ...

    def write(self, cmd: LowCmd) -> None: ...

    def wait(self) -> None: ...

    def close(self) -> None: ...


def _joint_ids(m: mujoco.MjModel, names) -> list[int]:
    out = []
    for n in names:
        j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)
        if j < 0:
            raise ValueError(f"no joint {n!r} in the model")
        out.append(j)
    return out


def base_joint_layout(m: mujoco.MjModel, motor_joints) -> tuple[np.ndarray, np.ndarray]:
    """(qpos indices, dof indices) of every joint that is not a motor joint (model order)."""
    motor = set(_joint_ids(m, motor_joints))
    qi, vi = [], []
    for j in range(m.njnt):
        if j in motor:
            continue
        t = int(m.jnt_type[j])
        nq = {0: 7, 1: 4}.get(t, 1)
        nv = {0: 6, 1: 3}.get(t, 1)
        qi += range(int(m.jnt_qposadr[j]), int(m.jnt_qposadr[j]) + nq)
        vi += range(int(m.jnt_dofadr[j]), int(m.jnt_dofadr[j]) + nv)
    return np.array(qi, int), np.array(vi, int)


class MujocoTransport:
    """Native MuJoCo as the robot (see module docstring)."""

    def __init__(
        self,
        m: mujoco.MjModel,
        motor_map: MotorMap,
        *,
        substeps: int,
        data: mujoco.MjData | None = None,
        imu_body: str | int | None = None,
        max_root_speed: float | None = MAX_ROOT_SPEED,
    ):
        import copy

        from bcg.transfer.model import free_root

        self.m = copy.copy(m)
        self.m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
        self.d = data if data is not None else mujoco.MjData(self.m)
        self.map = motor_map
        self.substeps = int(substeps)
        self.control_dt = self.substeps * float(m.opt.timestep)
        jids = _joint_ids(m, motor_map.motor_joints)
        self.qadr = np.array([m.jnt_qposadr[j] for j in jids], int)
        self.dadr = np.array([m.jnt_dofadr[j] for j in jids], int)
        self.limits = motor_map.torque_limits()
        self.base_q, self.base_v = base_joint_layout(m, motor_map.motor_joints)
        if imu_body is None:
            self.imu_body = 1 if m.nbody > 1 else 0
        elif isinstance(imu_body, str):
            self.imu_body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, imu_body)
        else:
            self.imu_body = int(imu_body)
        self._acc_adr = self._accelerometer(m)
        self._scratch = mujoco.MjData(self.m)
        self.cmd = LowCmd()
        self.tau = np.zeros(motor_map.num_motors)
        self.tick = 0
        root = free_root(m)
        self._root_dof = None if root is None else root[1]
        self.max_root_speed = max_root_speed

    def _accelerometer(self, m):
        for s in range(m.nsensor):
            if int(m.sensor_type[s]) == int(mujoco.mjtSensor.mjSENS_ACCELEROMETER):
                site = int(m.sensor_objid[s])
                if int(m.site_bodyid[site]) == self.imu_body:
                    return int(m.sensor_adr[s])
        return None

    def write(self, cmd: LowCmd) -> None:
        self.cmd = cmd

    def wait(self) -> None:
        n = self.map.num_motors
        for _ in range(self.substeps):
            q, dq = self.d.qpos[self.qadr], self.d.qvel[self.dadr]
            tau = np.clip(pd_torque(self.cmd, q, dq, n), self.limits[:, 0], self.limits[:, 1])
            self.d.qfrc_applied[:] = 0.0
            self.d.qfrc_applied[self.dadr] = tau
            self.tau = tau
            mujoco.mj_step(self.m, self.d)
            self.tick += 1
            if measures.native_unstable(self.d, self._root_dof, self.max_root_speed):
                fast = (
                    ""
                    if self.max_root_speed is None
                    else (f", or the root moved faster than {self.max_root_speed:g} m/s")
                )
                raise RuntimeError(
                    f"the simulated robot blew up at physics step {self.tick} (MuJoCo warned of "
                    f"a bad qacc / qpos / qvel and reset its state{fast}); the run cannot go on"
                )

    def imu(self) -> IMUState:
        s, d = self._scratch, self.d
        s.qpos[:], s.qvel[:] = d.qpos, d.qvel
        mujoco.mj_kinematics(self.m, s)
        mujoco.mj_comPos(self.m, s)
        mujoco.mj_comVel(self.m, s)
        b = self.imu_body
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(self.m, s, mujoco.mjtObj.mjOBJ_BODY, b, vel, 1)
        R = s.xmat[b].reshape(3, 3)
        if self._acc_adr is not None:
            acc = np.array(d.sensordata[self._acc_adr : self._acc_adr + 3])
        else:
            acc = R.T @ -np.asarray(self.m.opt.gravity)
        quat = np.array(s.xquat[b])
        rpy = np.zeros(3)
        w, x, y, z = quat
        rpy[0] = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
        rpy[1] = np.arcsin(np.clip(2 * (w * y - z * x), -1, 1))
        rpy[2] = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        return IMUState(
            quaternion=list(quat), gyroscope=list(vel[:3]), accelerometer=list(acc), rpy=list(rpy)
        )

    def read(self) -> tuple[LowState, BaseState]:
        st = LowState(tick=self.tick)
        for i in range(self.map.num_motors):
            ms = st.motor_state[i]
            ms.mode = 1
            ms.q = float(self.d.qpos[self.qadr[i]])
            ms.dq = float(self.d.qvel[self.dadr[i]])
            ms.tau_est = float(self.tau[i])
        st.imu_state = self.imu()
        base = BaseState(self.d.qpos[self.base_q].copy(), self.d.qvel[self.base_v].copy())
        return st, base

    def close(self) -> None:
        pass


class UnitreeSdkTransport:
    """The real robot through unitree_sdk2py (G1 / H1-2 ``unitree_hg`` messages)."""

    def __init__(self, network_interface: str, control_dt: float = 0.02, domain_id: int = 0):
        try:
            from unitree_sdk2py.core.channel import (
                ChannelFactoryInitialize,
                ChannelPublisher,
                ChannelSubscriber,
            )
            from unitree_sdk2py.idl.default import unitree_hg_msg_dds__LowCmd_
            from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_
            from unitree_sdk2py.utils.crc import CRC
        except ImportError as e:
            raise ImportError(
                "UnitreeSdkTransport needs unitree_sdk2py (Unitree's unitree_sdk2_python, not on "
                "the package index: install it from its repository with its cyclonedds "
                f"dependency); import failed: {e}"
            ) from None
        ChannelFactoryInitialize(domain_id, network_interface)
        self._new_cmd = unitree_hg_msg_dds__LowCmd_
        self._crc = CRC()
        self._pub = ChannelPublisher("rt/lowcmd", LowCmd_)
        self._pub.Init()
        self._state = None
        self._sub = ChannelSubscriber("rt/lowstate", LowState_)
        self._sub.Init(self._on_state, 10)
        self.control_dt = float(control_dt)
        self._next = time.perf_counter() + self.control_dt

    def _on_state(self, msg):
        self._state = msg

    def read(self) -> tuple[LowState, None]:
        t0 = time.perf_counter()
        while self._state is None:
            if time.perf_counter() - t0 > 5.0:
                raise TimeoutError("no rt/lowstate message within 5 s")
            time.sleep(0.001)
        return from_sdk(self._state, LowState), None

    def write(self, cmd: LowCmd) -> None:
        msg = self._new_cmd()
        cmd.mode_machine = int(self._state.mode_machine) if self._state else cmd.mode_machine
        to_sdk(cmd, msg)
        msg.crc = self._crc.Crc(msg)
        self._pub.Write(msg)

    def wait(self) -> None:
        now = time.perf_counter()
        if self._next > now:
            time.sleep(self._next - now)
        self._next = max(self._next + self.control_dt, time.perf_counter())

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------- observation


class StateObservation:
    """LowState (+ base state) -> the env's observation, through the env's JAX ``observe``.

    Rebuilds qpos / qvel of the training model: motor joints from ``motor_state[i].q / dq``
    (slot order of ``motor_map``), unactuated joints from the base state; for a free-joint root
    the orientation and angular velocity are then taken from the IMU (quaternion w, x, y, z and
    body-frame gyroscope), the position and linear velocity from the base state. The env's
    observation is evaluated on that state after forward kinematics (the robot gives the
    current state; training observes the state after ``mjx.step``, whose derived fields lag one
    physics step: identical for observations of qpos / qvel only).
    """

    def __init__(self, env, m: mujoco.MjModel, motor_map: MotorMap, imu_is_root: bool = True):
        from bcg.transfer.bridge import NativeBridge
        from bcg.transfer.model import free_root

        self.m, self.map = m, motor_map
        self.bridge = NativeBridge(env, m)
        self.d = mujoco.MjData(m)
        jids = _joint_ids(m, motor_map.motor_joints)
        self.qadr = np.array([m.jnt_qposadr[j] for j in jids], int)
        self.dadr = np.array([m.jnt_dofadr[j] for j in jids], int)
        self.base_q, self.base_v = base_joint_layout(m, motor_map.motor_joints)
        self.root = free_root(m) if imu_is_root else None
        self.control_dt = float(env.sim.control_dt)

    def state(self, st: LowState, base: BaseState | None, t: float = 0.0) -> mujoco.MjData:
        d = self.d
        n = self.map.num_motors
        d.qpos[self.qadr] = [st.motor_state[i].q for i in range(n)]
        d.qvel[self.dadr] = [st.motor_state[i].dq for i in range(n)]
        if len(self.base_q):
            if base is None:
                raise ValueError(
                    "this observation needs the unactuated joints (base position / velocity): "
                    "the transport gives no base state; provide a state estimator"
                )
            d.qpos[self.base_q] = base.qpos
            d.qvel[self.base_v] = base.qvel
        if self.root is not None:
            qa, va = self.root
            d.qpos[qa + 3 : qa + 7] = st.imu_state.quaternion
            d.qvel[va + 3 : va + 6] = st.imu_state.gyroscope
        d.time = t
        mujoco.mj_kinematics(self.m, d)
        mujoco.mj_comPos(self.m, d)
        return d

    def __call__(self, st: LowState, base: BaseState | None, t: float = 0.0) -> np.ndarray:
        return self.bridge.observe(self.state(st, base, t))


# ----------------------------------------------------------------------------- runner


@dataclasses.dataclass
class DeployRunner:
    """The 50 Hz loop (module docstring). ``policy(obs (n,)) -> action (A,)`` (numpy);
    ``observation``: the robot state -> training-model state and observation
    (:class:`StateObservation`); ``ctrl_fn(action, d) -> ctrl`` with ``d`` that state's
    ``MjData`` (default in :func:`make_runner`: the env's action_to_ctrl). ``run`` may be
    called again to continue: ``t0`` (the next period's time) and ``last_ctrl`` carry over."""

    policy: Callable
    observation: StateObservation
    motor_map: MotorMap
    ctrl_fn: Callable
    transport: Transport
    t0: float = 0.0  # the time (s) of the next control period
    last_ctrl: np.ndarray | None = None  # the last command sent (the state's ctrl)
    servo_scale_at: Callable | None = None  # time -> (kp, kd factors): a gain schedule

    def run(self, steps: int, log: bool = True) -> dict:
        out = {"obs": [], "action": [], "q": [], "dq": [], "time": []}
        dt = float(self.transport.control_dt)
        for _ in range(int(steps)):
            t = self.t0
            self.t0 = t + dt
            st, base = self.transport.read()
            d = self.observation.state(st, base, t)
            if self.last_ctrl is None:  # before any command: a zero action's, as a reset sets
                nu = self.observation.bridge.env.action_size
                self.last_ctrl = np.asarray(self.ctrl_fn(np.zeros(nu, np.float32), d))
            d.ctrl[:] = self.last_ctrl
            obs = np.asarray(self.observation.bridge.observe(d), np.float32)
            action = np.asarray(self.policy(obs)).reshape(-1)
            self.last_ctrl = np.asarray(self.ctrl_fn(action, d))
            gains = None if self.servo_scale_at is None else self.servo_scale_at(t)
            self.transport.write(self.motor_map.command(self.last_ctrl, gains=gains))
            self.transport.wait()
            if log:
                n = self.motor_map.num_motors
                out["obs"].append(obs)
                out["action"].append(action)
                out["q"].append([st.motor_state[i].q for i in range(n)])
                out["dq"].append([st.motor_state[i].dq for i in range(n)])
                out["time"].append(t)
        return {k: np.asarray(v) for k, v in out.items()}


def jax_policy(policy) -> Callable:
    """numpy obs (n,) -> action (A,) from a :class:`bcg.transfer.policy.LoadedPolicy`."""
    import jax

    f = jax.jit(policy.fn)
    return lambda obs: np.asarray(f(np.asarray(obs, np.float32)[None]))[0]


def make_runner(env, policy: Callable, transport: Transport, motor_joints=None, m=None):
    """A :class:`DeployRunner` for ``env``'s observation and actuators.

    ``policy``: numpy obs -> action (:func:`jax_policy` or an
    :class:`bcg.transfer.export.OnnxPolicy`). ``motor_joints``: the robot's motor order (default
    ``env.motor_joint_names`` if the env has it, else the actuators' joints). ``m``: the model
    whose joints the observation is rebuilt in (default the training model).
    """

    m = m if m is not None else env.sim.mj_model
    if motor_joints is None:
        motor_joints = env.motor_joint_names
    mm = MotorMap.from_model(env.sim.mj_model, motor_joints)
    obs = StateObservation(env, m, mm)
    return DeployRunner(
        policy=policy,
        observation=obs,
        motor_map=mm,
        ctrl_fn=lambda a, d: obs.bridge.ctrl(np.asarray(a, np.float32), d),
        transport=transport,
        servo_scale_at=env.sim.servo_scale_at,
    )


def simulated_robot(
    env, task: str | None = None, seed: int = 0, task_factory: str | None = None
) -> MujocoTransport:
    """Native MuJoCo standing in for the robot: the transfer model of ``env``
    (:func:`bcg.transfer.model.native_model`, ``task`` its name or import path,
    ``task_factory`` run.json's) at the env's initial state of ``seed``, motors in the order
    of ``env.motor_joint_names``."""
    import jax

    from bcg.transfer.bridge import data_from_mjx
    from bcg.transfer.model import native_model

    m, _ = native_model(env, task, task_factory=task_factory)
    d = data_from_mjx(m, env.initial_data(jax.random.PRNGKey(seed)))
    mm = MotorMap.from_model(env.sim.mj_model, env.motor_joint_names)
    return MujocoTransport(m, mm, substeps=env.sim.substeps, data=d)
