"""The control step, state averaging and joint-space perturbation on MJX data.

The simulator state is an ``mjx.Data``; only ``qpos, qvel, act, qacc_warmstart`` (and ``time``)
carry information between steps, every other field is recomputed by ``mjx.step``.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import mujoco

from bcg.sim import mjx_compat
from bcg.sim.contact import contact_normal_forces
from bcg.sim.model import Sim
from bcg.sim.solver import differentiable_solver

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx

STATE_FIELDS = ("qpos", "qvel", "act", "qacc_warmstart")


def make_data(sim: Sim, qpos=None, qvel=None) -> mjx.Data:
    """Initial MJX data at the model's reference pose (or the given qpos / qvel)."""
    d = mjx.make_data(sim.mjx_model)
    if qpos is not None:
        d = d.replace(qpos=jnp.asarray(qpos, d.qpos.dtype))
    if qvel is not None:
        d = d.replace(qvel=jnp.asarray(qvel, d.qvel.dtype))
    return d


@functools.partial(jax.jit, static_argnames="swapped")
def _physics_step(m, d: mjx.Data, swapped: tuple) -> tuple[mjx.Data, jax.Array]:
    """One MJX physics step and its contact slots' normal forces (ncon,).

    Jitted on its own so that JAX traces (and differentiates) the step once per model, data
    layout and swapped-in solver (``swapped``, :func:`bcg.sim.mjx_compat.swapped_functions`,
    only a cache key): every later use in a program of the process, such as the branches of a
    bundle or another estimator's rollout, reuses the traced step, and XLA inlines it.
    """
    d = mjx_compat.same_dtypes(mjx.step(m, d), d)  # a scan carry keeps its types
    return d, contact_normal_forces(m, d)


def control_step(
    sim: Sim, d: mjx.Data, ctrl, *, per_substep: bool = False
) -> tuple[mjx.Data, jax.Array]:
    """``sim.substeps`` physics steps with ``ctrl`` held (with ``sim.model_for(d)``; a state
    for which ``sim.hold_at`` is true applies its previous ``d.ctrl`` instead and keeps ``ctrl``
    in the returned data for the next step; ``sim.push_at(d)`` is added to ``qvel`` first).

    Returns the new data and the normal forces of the contact slots: per slot, the largest
    over the substeps (ncon,), or with ``per_substep`` every substep's (substeps, ncon) (the
    signals of BCG's trigger, :mod:`bcg.estimators.trigger`).
    """
    m = sim.model_for(d)
    new = None
    if sim.nu:
        new = jnp.asarray(ctrl, d.ctrl.dtype).reshape(d.ctrl.shape)
        applied = new if sim.hold_at is None else jnp.where(sim.hold_at(d), d.ctrl, new)
        d = d.replace(ctrl=applied)
    if sim.push_at is not None:
        d = d.replace(qvel=d.qvel + jnp.asarray(sim.push_at(d), d.qvel.dtype))

    def body(dd, _):
        return _physics_step(m, dd, swapped=mjx_compat.swapped_functions())

    ncon = mjx_compat.num_contact_slots(d)
    with differentiable_solver():
        d, forces = jax.lax.scan(body, d, None, sim.substeps)
    if new is not None and sim.hold_at is not None:
        d = d.replace(ctrl=new)  # applied next step by a holding state
    forces = forces.reshape(sim.substeps, ncon).astype(d.qpos.dtype)
    return d, (forces if per_substep else jnp.max(forces, axis=0, initial=0.0))


def quat_slices(mj_model: mujoco.MjModel) -> list[tuple[int, int]]:
    """qpos index ranges [a, b) of the quaternion blocks of free and ball joints."""
    out = []
    for j in range(mj_model.njnt):
        t = mj_model.jnt_type[j]
        a = int(mj_model.jnt_qposadr[j])
        if t == mujoco.mjtJoint.mjJNT_FREE:
            out.append((a + 3, a + 7))
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            out.append((a, a + 4))
    return out


def normalize_quaternions(sim: Sim, qpos: jax.Array) -> jax.Array:
    """Re-normalise the quaternion blocks (free and ball joints) of ``qpos`` (last axis)."""
    for a, b in quat_slices(sim.mj_model):
        q = qpos[..., a:b]
        qpos = qpos.at[..., a:b].set(q / jnp.linalg.norm(q, axis=-1, keepdims=True))
    return qpos


def chordal_quaternion_mean(q: jax.Array) -> jax.Array:
    """Hemisphere-aligned chordal mean of unit quaternions ``q`` (B, 4) (w, x, y, z):

        q_bar = sum_i s_i q_i / |sum_i s_i q_i|,   s_i = sign(<q_i, q_0>) (+1 where 0),

    the rotation closest to the samples in the chordal (Frobenius) sense when they lie within
    90 degrees of each other. ``q`` and ``-q`` are the same rotation; aligning every sample with
    the first keeps a pair of antipodal representatives from cancelling. The signs are
    piecewise constant, so the gradient is that of the normalised mean of the aligned samples.
    """
    s = jnp.sign(jnp.sum(q * q[:1], axis=-1, keepdims=True))
    m = jnp.mean(jnp.where(s == 0, 1.0, s) * q, axis=0)
    return m / jnp.linalg.norm(m)


def mean_data(sim: Sim, batch: mjx.Data) -> mjx.Data:
    """Mean over the leading (branch) axis of the state fields: arithmetic,
    ``x_bar = (1/B) sum_i x_i``, except the quaternion blocks of qpos (free and ball joints),
    which take :func:`chordal_quaternion_mean`. Other fields are taken from branch 0."""
    first = jax.tree_util.tree_map(lambda x: x[0], batch)
    upd = {f: jnp.mean(getattr(batch, f), axis=0) for f in STATE_FIELDS}
    qpos = upd["qpos"]
    for a, b in quat_slices(sim.mj_model):
        qpos = qpos.at[a:b].set(chordal_quaternion_mean(batch.qpos[:, a:b]))
    upd["qpos"] = qpos
    return first.replace(**upd)


def integrate_qpos(sim: Sim, qpos: jax.Array, dq: jax.Array) -> jax.Array:
    """``qpos (+) dq``: MuJoCo's mj_integratePos with unit time (quaternions exponentiated)."""
    return mjx_compat.integrate_qpos(sim.mjx_model, qpos, dq)


def quat_mul(u, v):
    """Hamilton product u v of (w, x, y, z) quaternions."""
    return jnp.stack(
        [
            u[0] * v[0] - u[1] * v[1] - u[2] * v[2] - u[3] * v[3],
            u[0] * v[1] + u[1] * v[0] + u[2] * v[3] - u[3] * v[2],
            u[0] * v[2] - u[1] * v[3] + u[2] * v[0] + u[3] * v[1],
            u[0] * v[3] + u[1] * v[2] - u[2] * v[1] + u[3] * v[0],
        ]
    )


def differentiate_qpos(sim: Sim, qpos0: jax.Array, qpos1: jax.Array) -> jax.Array:
    """Tangent difference ``qpos1 (-) qpos0`` (nv,), first order: for quaternions
    ``2 vec(conj(q0) q1)``, so that ``integrate_qpos(q0, differentiate_qpos(q0, q1)) ~ q1``."""
    m = sim.mj_model
    out = []
    for j in range(m.njnt):
        t, a = m.jnt_type[j], int(m.jnt_qposadr[j])
        if t == mujoco.mjtJoint.mjJNT_FREE:
            out.append(qpos1[a : a + 3] - qpos0[a : a + 3])
            q0, q1 = qpos0[a + 3 : a + 7], qpos1[a + 3 : a + 7]
            out.append(2.0 * quat_mul(q0 * jnp.array([1.0, -1, -1, -1]), q1)[1:])
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            q0, q1 = qpos0[a : a + 4], qpos1[a : a + 4]
            out.append(2.0 * quat_mul(q0 * jnp.array([1.0, -1, -1, -1]), q1)[1:])
        else:
            out.append(qpos1[a : a + 1] - qpos0[a : a + 1])
    return jnp.concatenate(out) if out else jnp.zeros((0,), qpos0.dtype)


def integrate_qpos_linear(sim: Sim, qpos: jax.Array, dq: jax.Array) -> jax.Array:
    """``qpos (+) dq`` to first order, quaternions ``normalize(q (1, dq/2))``: unlike
    :func:`integrate_qpos` its derivative is exact at ``dq = 0`` (MJX's quaternion update drops
    angular increments below 1e-8, and their derivative with them)."""
    m = sim.mj_model
    for j in range(m.njnt):
        # int(): ``np.int32 in (mjtJoint...)`` is False (the enum's == rejects numpy ints)
        t, a, v = int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        if t in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL):
            if t == mujoco.mjtJoint.mjJNT_FREE:
                qpos = qpos.at[a : a + 3].add(dq[v : v + 3])
                a, v = a + 3, v + 3
            q = qpos[a : a + 4]
            w = jnp.concatenate([jnp.ones((1,), q.dtype), 0.5 * dq[v : v + 3]])
            qn = quat_mul(q, w)
            qpos = qpos.at[a : a + 4].set(qn / jnp.linalg.norm(qn))
        else:
            qpos = qpos.at[a].add(dq[v])
    return qpos
