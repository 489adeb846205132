"""Backward-only armature: the forward step of the true model, the Jacobian of a heavier one.

A stiff PD servo on a light link, or a light link pressed into a stiff floor, gives the joint
space inertia ``M(q)`` small eigenvalues, and ``qacc = M^-1 (tau - c)`` then amplifies the
state's sensitivity at every step. Adding armature ``a`` (rotor inertia on the joint diagonal)
in the *backward pass only* regularises that amplification without changing the motion:

    forward:   x_{t+1} = F_M(x_t, u_t)
    backward:  lambda_t = (d F_{M + diag(a)} / d x_t)^T lambda_{t+1}     (same x_t, u_t)

so the returned gradient is that of a surrogate model with more rotor inertia, evaluated along
the true trajectory: biased where ``a`` matters, exact in the limit ``a -> 0``. The authors'
public simulator (``ClemensSchwarke/warp``, ``integrator_moreau.py``, ``apply_backward_armature``)
refactors the mass matrix with an extra per-dof armature before the adjoint solves, off by
default; here the whole step's VJP is taken on a model whose ``dof_armature`` carries the extra
term (:func:`surrogate_vjp`), which also linearises the contact solve of that model.

``a`` is added to the joint DOFs only, never to a free joint's six (the floating base's
inertia is the robot's own, not a rotor's). Only ``dof_armature`` changes, i.e. the mass
matrix: the constraint regularisation that MuJoCo's compiler derives from the armature
(``dof_invweight0``, ``body_invweight0``) stays the true model's.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.validation import check_number


def check(name: str, value) -> None:
    """``value`` must be None or a finite number >= 0 (kg m^2 on a hinge, kg on a slide)."""
    check_number(name, value, at_least=0, optional=True)


def joint_dof_mask(mj_model: mujoco.MjModel) -> np.ndarray:
    """(nv,) bool: the DOFs that are not a free joint's."""
    joint_type = np.asarray(mj_model.jnt_type)[np.asarray(mj_model.dof_jntid)]
    return joint_type != mujoco.mjtJoint.mjJNT_FREE


def with_added_armature(sim, extra: float):
    """``sim`` whose every step model (``sim.model_for``, domain randomisation included) has
    ``dof_armature + extra`` on the joint DOFs (:func:`joint_dof_mask`)."""
    add = joint_dof_mask(sim.mj_model) * float(extra)

    def heavier(m):
        return m.replace(dof_armature=m.dof_armature + jnp.asarray(add, m.dof_armature.dtype))

    if sim.model_at is None:  # numpy: a jnp array made under a trace would be a tracer
        base = np.asarray(sim.mjx_model.dof_armature)
        armature = base + add.astype(base.dtype)
        return dataclasses.replace(sim, mjx_model=sim.mjx_model.replace(dof_armature=armature))
    model_at = sim.model_at
    return dataclasses.replace(sim, model_at=lambda m, d: heavier(model_at(m, d)))


def surrogate_vjp(f, f_bwd):
    """``g(*args) = f(*args)`` whose VJP is ``f_bwd``'s at the same arguments:
    ``g``'s cotangent map is ``(d f_bwd / d args)^T``. ``f`` and ``f_bwd`` must return the same
    structure and must not close over traced values (pass them as arguments)."""

    @jax.custom_vjp
    def g(*args):
        return f(*args)

    def fwd(*args):
        return f(*args), args

    def bwd(args, ct):
        _, vjp = jax.vjp(f_bwd, *args)
        return vjp(ct)

    g.defvjp(fwd, bwd)
    return g


def step_for(make_step, sim, extra: float | None):
    """``make_step(sim)``; with ``extra`` not None, that step with the VJP of
    ``make_step(with_added_armature(sim, extra))`` (:func:`surrogate_vjp`). ``make_step(s)``
    returns the step function of the model ``s``."""
    step = make_step(sim)
    if extra is None:
        return step
    return surrogate_vjp(step, make_step(with_added_armature(sim, extra)))
