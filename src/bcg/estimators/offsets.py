"""Branch offsets of a bundle: random Cartesian perturbations of the contacting limbs mapped to
joint space through a damped pseudo-inverse (Aditya et al., 2026, and the authors' code).

For a Cartesian translational Jacobian J (r x nv) and branch noise dp_i ~ N(0, sigma_p^2 I_r),
dv_i ~ N(0, sigma_v^2 I_r) (i = 1..B; with ``antithetic`` the second half is the negated first,
the middle draw unpaired for odd B),

    dq_i  = clip(M dp_i, +-max_dq),     dqd_i = clip(M dv_i, +-max_dqd),
    M     = J^T (J J^T + lambda I)^-1                                  (nv x r).

Two choices of J:

* :func:`limb_offsets` (default, the authors' code): per hot contact group g (a body's
  contacts, :mod:`bcg.estimators.trigger`), J_g is the translational Jacobian of the group
  centre (mean position of the group's contact slots) on the group's body, restricted to the
  dofs of the body's limb path (:func:`bcg.estimators.contact_groups.limb_paths`: up to, not
  including, the floating base). Groups are independent: M = [M_g1 ... M_gG] (nv x 3G), zero
  blocks for groups that are not hot. A group whose body has no limb path (a free object, a
  body on unactuated slides) uses its whole chain, floating dofs included: there is nothing
  else to perturb.
* :func:`chain_offsets` (the paper's text): the stacked relative Jacobians of every hot contact
  (3 ncon x nv) w.r.t. all dofs, so the floating base moves too.

With ``normal_scale`` s < 1 the position noise is dp_i <- S dp_i, S = diag_g(I - (1 - s) n_g n_g^T)
(:func:`normal_scaling`), n_g the contact normal of group g (:func:`group_normals`) or of each
contact (chain): the component of the offset that pushes a foot into (or lifts it off) the
surface it is pressed against is scaled by s, the tangential ones are kept.

All outputs are constants for autodiff (``stop_gradient``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bcg.estimators.contact_groups import limb_paths
from bcg.estimators.trigger import group_bodies, group_membership
from bcg.sim import mjx_compat
from bcg.sim.contact import contact_jacobians
from bcg.sim.model import Sim


class Offsets(NamedTuple):
    """Joint offsets (B, nv), their Cartesian noise (B, r) and the map M (nv, r)."""

    dq: jax.Array
    dqd: jax.Array
    dp: jax.Array
    dv: jax.Array
    M: jax.Array


def branch_noise(key, num_branches, dim, sigma_p, sigma_v, antithetic, dtype):
    """(dp, dv), each (B, dim) Gaussian; antithetic: n = ceil(B / 2) draws d_1..d_n, then
    -d_1..-d_(B - n) (B even: every draw paired and the mean exactly zero; B odd: d_n unpaired)."""
    n = (num_branches + 1) // 2 if antithetic else num_branches
    kp, kv = jax.random.split(key)
    dp = sigma_p * jax.random.normal(kp, (n, dim), dtype)
    dv = sigma_v * jax.random.normal(kv, (n, dim), dtype)
    if antithetic:
        dp = jnp.concatenate([dp, -dp])[:num_branches]
        dv = jnp.concatenate([dv, -dv])[:num_branches]
    return dp, dv


def _clip(x, bound):
    return x if bound is None else jnp.clip(x, -bound, bound)


def normal_scaling(normals, scale):
    """(3k, 3k) block-diagonal map S = diag_j(I - (1 - scale) n_j n_j^T) for k unit normals
    ``normals`` (k, 3): it scales the component of a Cartesian offset along n_j by ``scale``
    and keeps the tangential ones."""
    n = normals / jnp.maximum(jnp.linalg.norm(normals, axis=-1, keepdims=True), 1e-12)
    blocks = jnp.eye(3, dtype=n.dtype) - (1.0 - scale) * n[:, :, None] * n[:, None, :]
    k = n.shape[0]
    eye = jnp.eye(k, dtype=n.dtype)
    return (eye[:, None, :, None] * blocks[:, :, None, :]).reshape(3 * k, 3 * k)


def _from_map(
    Mt, key, *, num_branches, sigma_p, sigma_v, antithetic, max_dq, max_dqd, dp_map=None, **_
):
    """Offsets for the map M = ``Mt.T`` (nv, r): noise (positions through the symmetric
    ``dp_map`` when given), joint offsets, clamps, stop_gradient."""
    dp, dv = branch_noise(key, num_branches, Mt.shape[0], sigma_p, sigma_v, antithetic, Mt.dtype)
    if dp_map is not None:
        dp = dp @ dp_map
    sg = jax.lax.stop_gradient
    dq, dqd = _clip(dp @ Mt, max_dq), _clip(dv @ Mt, max_dqd)
    return Offsets(sg(dq), sg(dqd), sg(dp), sg(dv), sg(Mt.T))


def chain_offsets(sim: Sim, data, contacts, key, **kw) -> Offsets:
    """Offsets of the whole chains of the contacts in ``contacts`` (ncon,) bool, r = 3 ncon.
    Keywords: ``num_branches, sigma_p, sigma_v, damping, antithetic, max_dq, max_dqd``."""
    m = sim.mjx_model
    J = contact_jacobians(m, data) * contacts[:, None, None].astype(data.qpos.dtype)
    J = J.reshape(-1, m.nv)
    A = J @ J.T + kw["damping"] * jnp.eye(J.shape[0], dtype=J.dtype)
    scale = kw.get("normal_scale", 1.0)
    if scale != 1.0:
        kw = {**kw, "dp_map": normal_scaling(mjx_compat.contacts(data).frame[:, 0], scale)}
    return _from_map(jnp.linalg.solve(A, J), key, **kw)  # (J J^T + lambda I)^-1 J = M^T


def limb_columns(mj_model) -> np.ndarray:
    """(G, nv) bool: the dofs each contact group may perturb (limb path, or the whole chain
    when the body has no limb path)."""
    paths = limb_paths(mj_model)
    cols = paths.dof_mask[group_bodies(mj_model)]
    empty = ~np.any(cols, axis=1)
    cols[empty] = True  # the Jacobian itself zeroes the dofs outside the body's chain
    return cols


def group_jacobians(sim: Sim, data) -> jax.Array:
    """(G, 3, nv) translational Jacobians of the group centres on the group bodies, restricted
    to :func:`limb_columns`."""
    m = sim.mjx_model
    bodies = group_bodies(sim.mj_model)
    if bodies.size == 0:
        return jnp.zeros((0, 3, m.nv), data.qpos.dtype)
    member = group_membership(sim, data)  # (G, ncon)
    count = jnp.sum(member, axis=1, keepdims=True)
    pos = mjx_compat.contacts(data).pos
    # a group without contact slots (it never touches anything) is centred on its body
    centre = jnp.where(count > 0, member @ pos / jnp.maximum(count, 1.0), data.xpos[bodies])
    jac = jax.vmap(lambda p, b: mjx_compat.point_jacobian(m, data, p, b).T)(
        centre, jnp.asarray(bodies)
    )
    return jac * jnp.asarray(limb_columns(sim.mj_model), jac.dtype)[:, None, :]


def group_normals(sim: Sim, data) -> jax.Array:
    """(G, 3) contact normal of each group: that of its deepest contact slot (the normal's
    sign is irrelevant to :func:`normal_scaling`); a group without slots gets z."""
    member = group_membership(sim, data) > 0  # (G, ncon)
    con = mjx_compat.contacts(data)
    if member.shape[1] == 0:
        return jnp.tile(jnp.asarray([0.0, 0.0, 1.0], data.qpos.dtype), (member.shape[0], 1))
    dist = jnp.where(member, con.dist[None], jnp.inf)
    deepest = jnp.argmin(dist, axis=1)
    n = con.frame[deepest, 0]
    z = jnp.asarray([0.0, 0.0, 1.0], n.dtype)
    return jnp.where(jnp.any(member, axis=1, keepdims=True), n, z)


def limb_offsets(sim: Sim, data, groups, key, **kw) -> Offsets:
    """Offsets of the limbs of the groups in ``groups`` (G,) bool, r = 3 G (same keywords as
    :func:`chain_offsets`)."""
    J = group_jacobians(sim, data) * groups[:, None, None].astype(data.qpos.dtype)
    G, _, nv = J.shape
    A = J @ jnp.swapaxes(J, 1, 2) + kw["damping"] * jnp.eye(3, dtype=J.dtype)  # (G, 3, 3)
    Mt = jnp.linalg.solve(A, J).reshape(3 * G, nv)  # blocks (J_g J_g^T + lambda I)^-1 J_g
    scale = kw.get("normal_scale", 1.0)
    if scale != 1.0 and G:
        kw = {**kw, "dp_map": normal_scaling(group_normals(sim, data), scale)}
    return _from_map(Mt, key, **kw)
