"""The native-MuJoCo model a policy is transferred to: the env's model with MuJoCo's default
contact and the full constraint solver.

* contact: the env's MJCF loaded with stiffness ``"model"`` (its own solref; MuJoCo's default
  time constant 0.02 s when the MJCF sets none), or ``env.native_model()``;
* solver: ``opt.iterations`` / ``ls_iterations`` raised to MuJoCo's defaults (100 / 50,
  :class:`bcg.transfer.config.TransferConfig`) unless the MJCF asks for more.
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np

from bcg.transfer.config import TransferConfig


def native_model(
    env, task: str | None = None, cfg: TransferConfig | None = None, task_factory=None
):
    """``(mj_model, notes)``: the env's model with MuJoCo's default contact and full solver.

    ``env.native_model()`` if the env has it. Otherwise a copy of the *training* model (so that
    every option the run was built with is kept) whose contact parameters (geom and pair
    solref / solimp) are those of the task's MJCF loaded with stiffness ``"model"``; if that
    model's geoms do not match the training model's, the ``"model"`` build itself is used.
    ``task``: a registered name or an import path ``module:factory``; ``task_factory``: the
    import path that rebuilds a name registered in another process (run.json's).
    """
    cfg = cfg or TransferConfig()
    notes = []
    own = env.native_model()
    if own is not None:
        m = copy.copy(own)
        notes.append("model: env.native_model()")
    else:
        from bcg.envs import POLICY_ENVS, make_env

        m = copy.copy(env.sim.mj_model)
        known = task is not None and (task in POLICY_ENVS or ":" in task or task_factory)
        if known:
            ref = make_env(task, task_factory=task_factory, stiffness="model").sim.mj_model
            if ref.ngeom == m.ngeom and ref.npair == m.npair:
                m.geom_solref[:], m.geom_solimp[:] = ref.geom_solref, ref.geom_solimp
                if m.npair:
                    m.pair_solref[:], m.pair_solimp[:] = ref.pair_solref, ref.pair_solimp
                notes.append(f"model: the training model with {task}'s own MJCF contact")
            else:
                m = copy.copy(ref)
                notes.append(f"model: {task} rebuilt with its own MJCF contact (stiffness 'model')")
        else:
            notes.append("model: the training model (task unknown: contact NOT reset)")
    m.opt.iterations = max(int(m.opt.iterations), int(cfg.solver_iterations))
    m.opt.ls_iterations = max(int(m.opt.ls_iterations), int(cfg.ls_iterations))
    tc = np.unique(np.round(m.geom_solref[:, 0], 6))
    notes.append(
        f"native solver: {m.opt.iterations} iterations, {m.opt.ls_iterations} line search; "
        f"contact solref time constant(s) {', '.join(f'{x:g}' for x in tc)} s"
    )
    return m, notes


def free_root(m: mujoco.MjModel):
    """(qpos address, dof address) of the first free joint, or None."""
    for j in range(m.njnt):
        if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE):
            return int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
    return None
