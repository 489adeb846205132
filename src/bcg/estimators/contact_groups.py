"""Contact groups and limb paths of an MJCF model, for per-limb bundling (legged BCG).

The authors' implementation of BCG (the paper's public code; docs/method.md) bundles per foot: the
contacts of one foot form a group that triggers on its total normal force, and only the joints
of that foot's leg are perturbed, never the floating base. This module finds the same structure
in any MJCF from its kinematic tree, without names:

* Group. Every body that owns a collision geom is a candidate group; at run time the contacts
  of a body (the contact's geom on that body, the other side anything) form its group, and the
  group's normal force is the sum over them (:mod:`bcg.estimators.trigger`).
* Limb path. For body b, the joints on the path b -> parent(b) -> ... up to the root body (the
  ancestor that is a child of the world). The root's own joints are included only when they
  are actuated; a free joint is never included. So a floating-base robot's leg stops below the
  pelvis (G1: the 6 leg joints), a planar hopper's stops below its unactuated root slides and
  hinge (hip, knee), and a fixed-base arm, whose first joint is actuated, reaches the world.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np


@dataclasses.dataclass(frozen=True)
class LimbPaths:
    """Static contact-group structure of a model (numpy, computed once per model).

    Attributes:
      geom_group: (ngeom,) body id of each geom's group, -1 for geoms of the world body.
      dof_mask: (nbody, nv) bool, row b: the dofs of body b's limb path (all False for the
        world and for bodies without a path, e.g. a free-floating body).
      floating: (nv,) bool, the dofs of free joints and of unactuated root joints.
    """

    geom_group: np.ndarray
    dof_mask: np.ndarray
    floating: np.ndarray

    @property
    def nbody(self) -> int:
        return int(self.dof_mask.shape[0])


def _actuated_joints(m: mujoco.MjModel) -> set[int]:
    joint_trn = (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT))
    return {
        int(m.actuator_trnid[i, 0]) for i in range(m.nu) if int(m.actuator_trntype[i]) in joint_trn
    }


def _joint_dofs(m: mujoco.MjModel, j: int) -> range:
    n = {0: 6, 1: 3, 2: 1, 3: 1}[int(m.jnt_type[j])]  # free, ball, slide, hinge
    return range(int(m.jnt_dofadr[j]), int(m.jnt_dofadr[j]) + n)


def limb_paths(m: mujoco.MjModel) -> LimbPaths:
    """The :class:`LimbPaths` of ``m`` (see the module docstring for the rule)."""
    actuated = _actuated_joints(m)
    free = int(mujoco.mjtJoint.mjJNT_FREE)
    floating = np.zeros(m.nv, bool)
    own = []  # per body: (limb dofs of its own joints)
    for b in range(m.nbody):
        mask = np.zeros(m.nv, bool)
        is_root = b != 0 and int(m.body_parentid[b]) == 0
        for j in range(int(m.body_jntadr[b]), int(m.body_jntadr[b]) + int(m.body_jntnum[b])):
            base = int(m.jnt_type[j]) == free or (is_root and j not in actuated)
            dofs = list(_joint_dofs(m, j))
            if base:
                floating[dofs] = True
            else:
                mask[dofs] = True
        own.append(mask)
    dof_mask = np.zeros((m.nbody, m.nv), bool)
    for b in range(1, m.nbody):
        a = b
        while a != 0:
            dof_mask[b] |= own[a]
            a = int(m.body_parentid[a])
    geom_group = np.where(m.geom_bodyid == 0, -1, m.geom_bodyid).astype(np.int32)
    return LimbPaths(geom_group, dof_mask, floating)
