"""What a transfer run measures at each control step, in native MuJoCo and in MJX.

* fall: the env's :meth:`ContactEnv.fell` (``root height < env.fall_height``, else
  ``env.terminated(data)``; the report says which);
* tracking error (metres), when the env has a reference motion: ``env.tracking_error(data)`` on
  forward kinematics of the current state;
* foot penetration: the deepest foot-ground penetration max(0, -dist) of a control step and
  whether a foot touches the ground at negative distance; foot geoms from
  ``env.foot_geom_ids``, else geoms whose name contains "foot", else every non-world geom;
* flight: the foot clearance, the smallest foot-ground distance of a control step (m; <= 0
  when a foot touches), from which :func:`flight` takes the highest clearance and the longest
  run of consecutive control steps with every foot off the ground (clearance > 0).
"""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.envs.base import ContactEnv
from bcg.sim import mjx_compat
from bcg.sim.native_health import mujoco_blew_up
from bcg.sim.step import make_data
from bcg.transfer.config import MAX_ROOT_SPEED

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx


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


def foot_geoms(env, m: mujoco.MjModel) -> tuple[np.ndarray, str]:
    """``(geom ids, description)`` of the feet whose penetration is measured."""
    if env.foot_geom_ids is not None:
        ids = np.asarray(env.foot_geom_ids, int)
        return ids, f"foot geoms: env.foot_geom_ids ({len(ids)})"
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i) or "" for i in range(m.ngeom)]
    ids = np.array([i for i, n in enumerate(names) if "foot" in n.lower()], int)
    if len(ids):
        return ids, f"foot geoms: named *foot* ({', '.join(names[i] for i in ids)})"
    ids = np.array([i for i in range(m.ngeom) if m.geom_bodyid[i] != 0], int)
    return ids, "foot geoms: none declared, every robot geom counts (env has no foot_geom_ids)"


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


def foot_clearance_native(m, d, feet: np.ndarray, distmax: float = 1.0) -> float:
    """The smallest signed distance (m) between a foot geom and a world geom
    (``mj_geomDistance``, capped at ``distmax``)."""
    ground = np.nonzero(m.geom_bodyid == 0)[0]
    fromto = np.zeros(6)
    dists = [
        mujoco.mj_geomDistance(m, d, int(f), int(g), distmax, fromto) for f in feet for g in ground
    ]
    return min(dists, default=distmax)


def flight(clearance, dt: float) -> tuple[float, float]:
    """``(highest clearance (m), longest flight (s))`` of a run's per-control-step foot
    clearances: the flight is the longest run of consecutive steps with clearance > 0."""
    c = np.asarray(clearance, float)
    best = run = 0
    for up in c > 0:
        run = run + 1 if up else 0
        best = max(best, run)
    return (float(c.max()) if c.size else math.nan), best * dt


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


def foot_clearance_mjx(dx, slots: np.ndarray):
    """:func:`foot_clearance_native` on one ``mjx.Data``: the smallest distance of the foot
    contact ``slots`` (MJX computes it for every slot, also beyond the contact margin)."""
    if len(slots) == 0:
        return jnp.full((), jnp.inf)
    return jnp.min(mjx_compat.contacts(dx).dist[slots])


def native_unstable(
    d: mujoco.MjData, root_dof: int | None = None, max_root_speed: float | None = MAX_ROOT_SPEED
) -> bool:
    """True when native MuJoCo's state blew up: a non-finite qpos / qvel, one of MuJoCo's
    instability warnings (bad qacc / qpos / qvel), after which ``mj_step`` has already *reset*
    the data to the model's initial state (and a run would otherwise go on from there), or,
    with ``root_dof`` (the free joint's first dof address), a root linear speed above
    ``max_root_speed`` (m/s; None: no bound). The last catches blow-ups MuJoCo does not flag:
    a stiff contact that ejects the robot at tens to thousands of m/s while every value stays
    below MuJoCo's 1e10 bound."""
    if mujoco_blew_up(d):
        return True
    if root_dof is None or max_root_speed is None:
        return False
    return float(np.linalg.norm(d.qvel[root_dof : root_dof + 3])) > max_root_speed
