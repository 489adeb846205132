"""The default scalar rollout objective of the gradient report.

Target body: the first body that owns a free joint, else the first body that owns a slide
joint. Its "height" h is the z coordinate of its joint position (free: qpos[adr + 2]; slides:
sum_j axis_z(j) qpos[adr_j], the body's z up to a constant) and its vertical velocity v_z is the
matching combination of qvel. The objective at the final state is

    J(x_T) = h_T + w * v_z,T          (w = VELOCITY_WEIGHT seconds, so J is in metres)

Parameters theta: the target body's initial joint velocities (its dofs of qvel) and, when the
model has actuators, the open-loop control sequence u_0..u_{T-1} (T x nu).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

VELOCITY_WEIGHT = 0.1


@dataclasses.dataclass(frozen=True)
class ObjectiveSpec:
    """Static indices defining J(x_T) = c_q . qpos_T + c_v . qvel_T and the velocity params."""

    body: int
    body_name: str
    c_qpos: np.ndarray  # (nq,)
    c_qvel: np.ndarray  # (nv,)
    vel_dofs: np.ndarray  # dof indices of the initial-velocity parameters

    def value(self, qpos, qvel):
        """J = c_q . qpos + c_v . qvel (works for numpy and jax arrays, last axis)."""
        return qpos @ self.c_qpos + qvel @ self.c_qvel


def default_objective(m: mujoco.MjModel) -> ObjectiveSpec:
    """Find the target body and build the objective (raises ValueError if there is none)."""
    free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    slide = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE]
    c_q = np.zeros(m.nq)
    c_v = np.zeros(m.nv)
    if free:
        j = free[0]
        body = int(m.jnt_bodyid[j])
        c_q[m.jnt_qposadr[j] + 2] = 1.0
        c_v[m.jnt_dofadr[j] + 2] = VELOCITY_WEIGHT
        dofs = np.arange(m.jnt_dofadr[j], m.jnt_dofadr[j] + 6)
    elif slide:
        body = int(m.jnt_bodyid[slide[0]])
        joints = [j for j in slide if m.jnt_bodyid[j] == body]
        for j in joints:
            c_q[m.jnt_qposadr[j]] = m.jnt_axis[j][2]
            c_v[m.jnt_dofadr[j]] = VELOCITY_WEIGHT * m.jnt_axis[j][2]
        dofs = np.array([m.jnt_dofadr[j] for j in joints])
        if not np.any(c_q):
            # no vertical slide: use the first slide coordinate itself
            c_q[m.jnt_qposadr[joints[0]]] = 1.0
            c_v[m.jnt_dofadr[joints[0]]] = VELOCITY_WEIGHT
    else:
        raise ValueError(
            "the default objective needs a body with a free or slide joint; this model has none "
            "(pass a custom objective)"
        )
    name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, body) or f"body{body}"
    return ObjectiveSpec(body, name, c_q, c_v, dofs.astype(int))
