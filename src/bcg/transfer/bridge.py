"""Native MuJoCo <-> MJX: the env's JAX functions (observation, reward, fall, tracking error,
action to ctrl) evaluated on native ``MjData``, and native data at the state of an
``mjx.Data``.

Every ``mjx.Data`` field that MuJoCo's ``MjData`` has is copied from the native state, so
``observe`` sees what it sees in training: the state after ``mj_step``, whose derived fields
(xpos, ...) are those of the last physics step's start, exactly as after ``mjx.step``.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.sim import mjx_compat
from bcg.transfer.measures import fall_criterion, tracking_fn

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx


def warm_cached_properties(env) -> None:
    """Evaluate the env's ``functools.cached_property`` attributes eagerly, so that a first
    access inside a jit trace cannot cache (and later leak) a tracer."""
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
