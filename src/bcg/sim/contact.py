"""Contact stiffness settings and contact quantities read from MJX data.

Stiffness. MuJoCo's soft contact is a damped spring in constraint space whose time constant is
``solref[0]`` (dampratio ``solref[1]``): the reference acceleration is
``a_ref = -b v - k r`` with ``b = 2 / (d_max tc)`` and ``k = d(r) / (d_max^2 tc^2 zeta^2)``.
The smaller ``tc``, the stiffer (and more realistic, less penetrating) the contact.

* ``soft``  : ``tc = 0.02 s`` (MuJoCo's default), comparable to the paper's kappa = 50 /m.
* ``stiff`` : ``tc = 2 * physics dt`` (MuJoCo's stability limit), comparable to kappa = 300 /m.
* ``gated`` (``gated:WIDTH``): ``stiff``'s time constant with an impedance ``d(r)`` that ramps
  from 1e-4 at first touch to 0.95 at ``r = WIDTH`` (default 5 mm; :func:`gated_solimp`).

Continuity. MuJoCo's default impedance starts at ``d = 0.9``: at first touch the contact already
applies 90% of its damping force ``b v``, so the state after an impact jumps when the impact
moves from one physics step to the next (measured, ``tests/sim/test_contact.py``: 1.46 m/s jump of a
ball's rebound velocity under any refinement of its drop height). First-order estimators (analytic,
bcg) cannot see such jumps and are biased. The paper's sigmoid-gated impulse is continuous; so is
``gated``: the same jump vanishes under refinement (< 1e-3 m/s at a 1e-12 m grid).

The paper's sigmoid-smoothed impulse ``s(d) = 1 / (1 + exp(-kappa d))`` switches over a
penetration length of about ``1 / kappa`` (2 cm at kappa 50, 3.3 mm at kappa 300). MuJoCo's
impact penetration plays that role here: :func:`equivalent_kappa` returns ``1 / r_max`` where
``r_max`` is the largest penetration of a sphere hitting a plane at 1 m/s (native MuJoCo).
Measured (``python -m bcg.sim.contact``): dt 5 ms: soft tc 0.02 -> 7.4 mm (kappa ~135),
stiff tc 0.01 -> 4.3 mm (kappa ~235); dt 2 ms, tc 0.004 -> 1.0 mm (kappa ~960).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.sim import mjx_compat

SOFT_TIMECONST = 0.02
GATE_WIDTH = 0.005


@dataclasses.dataclass(frozen=True)
class ContactStiffness:
    """Contact solref applied to every geom (and explicit contact pair).

    ``timeconst`` <= 0 or None means "keep the model's solref".
    """

    timeconst: float | None
    dampratio: float = 1.0
    label: str = "custom"
    solimp: tuple[float, float, float, float, float] | None = None

    def apply(self, m: mujoco.MjModel) -> None:
        if self.timeconst is None:
            return
        m.geom_solref[:, 0] = self.timeconst
        m.geom_solref[:, 1] = self.dampratio
        if m.npair:
            m.pair_solref[:, 0] = self.timeconst
            m.pair_solref[:, 1] = self.dampratio
        if self.solimp is not None:
            m.geom_solimp[:] = np.asarray(self.solimp)
            if m.npair:
                m.pair_solimp[:] = np.asarray(self.solimp)


def gated_solimp(width: float) -> tuple[float, float, float, float, float]:
    """MuJoCo ``solimp`` whose impedance ramps from ~0 at first touch to 0.95 at ``width`` m.

    ``d(r)`` follows MuJoCo's two-piece power sigmoid (midpoint 0.5, power 2) from
    ``d_min = 1e-4`` (MuJoCo's floor) to ``d_max = 0.95``. Since the constraint solves
    ``a_1 + d (b v + k r) = (1 - d) a_0``, ``d -> 0`` means no force: the contact switches on
    continuously, like the paper's sigmoid-gated impulse, instead of jumping to ``d = 0.9`` of its
    damping force at first touch (MuJoCo's default ``solimp``).
    """
    return (1e-4, 0.95, float(width), 0.5, 2.0)


def resolve_stiffness(spec, physics_dt: float, dampratio: float = 1.0) -> ContactStiffness:
    """Turn ``"soft" | "stiff" | "model" | float | ContactStiffness`` into a ContactStiffness.

    ``dampratio`` is the solref damping ratio applied with a named or numeric stiffness (1.0 is
    critical damping; lower values make contacts bounce). A :class:`ContactStiffness` keeps its
    own dampratio.
    """
    if isinstance(spec, ContactStiffness):
        return spec
    if not (np.isfinite(dampratio) and dampratio > 0):
        raise ValueError(f"contact dampratio must be > 0, got {dampratio!r}")
    zeta = float(dampratio)
    if isinstance(spec, str):
        key = spec.lower()
        if key == "soft":
            return ContactStiffness(SOFT_TIMECONST, zeta, "soft")
        if key == "stiff":
            return ContactStiffness(2.0 * physics_dt, zeta, "stiff")
        if key == "model":
            return ContactStiffness(None, 1.0, "model")
        if key == "gated" or key.startswith("gated:"):
            width = GATE_WIDTH
            if ":" in key:
                try:
                    width = float(key.split(":", 1)[1])
                except ValueError:
                    width = float("nan")
            if not (np.isfinite(width) and width > 0):
                raise ValueError(f"gated contact width must be > 0 metres, got {spec!r}")
            return ContactStiffness(2.0 * physics_dt, zeta, spec.lower(), gated_solimp(width))
        raise ValueError(
            f"unknown contact stiffness {spec!r}: use 'soft', 'stiff', 'gated', 'gated:WIDTH', "
            "'model' or a solref time constant in seconds"
        )
    try:
        tc = float(spec)
    except (TypeError, ValueError):
        raise ValueError(f"contact stiffness must be a name or a number, got {spec!r}") from None
    if not np.isfinite(tc) or tc <= 0:
        raise ValueError(f"contact time constant must be > 0 seconds, got {spec!r}")
    if tc < 2.0 * physics_dt - 1e-12:
        raise ValueError(
            f"contact time constant {tc} s is below 2 x physics timestep ({2 * physics_dt} s); "
            "MuJoCo would clamp it. Use a smaller timestep for stiffer contact."
        )
    return ContactStiffness(tc, zeta, f"tc={tc:g}")


def impact_penetration(
    timeconst: float, physics_dt: float = 0.005, speed: float = 1.0, radius: float = 0.1
) -> float:
    """Largest penetration (m) of a 1 kg sphere hitting a plane at ``speed`` m/s, native MuJoCo."""
    xml = f"""
    <mujoco><option timestep="{physics_dt}"/>
      <worldbody><geom type="plane" size="5 5 .1" solref="{timeconst} 1"/>
        <body pos="0 0 {radius + 1e-3}"><freejoint/>
          <geom type="sphere" size="{radius}" mass="1" solref="{timeconst} 1"/></body>
      </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qvel[2] = -speed
    worst = 0.0
    for _ in range(int(0.5 / physics_dt)):
        mujoco.mj_step(m, d)
        worst = max(worst, radius - float(d.qpos[2]))
    return worst


def equivalent_kappa(timeconst: float, physics_dt: float = 0.005) -> float:
    """Paper-equivalent kappa (1/m): 1 / (largest penetration of a 1 m/s impact)."""
    return 1.0 / max(impact_penetration(timeconst, physics_dt), 1e-9)


# ----------------------------------------------------------------------------- MJX contact data


def contact_normal_forces(m, d) -> jax.Array:
    """Normal force (N, >= 0) of every contact slot of an MJX ``Data`` (0 for inactive slots).

    Pyramidal cones: f_n = sum of the 2 (condim - 1) pyramid edge forces (condim 1: the single
    row). Elliptic cones: the first row.
    """
    c = mjx_compat.contacts(d)
    addr = np.asarray(c.efc_address)
    dims = np.asarray(c.dim)
    ncon = addr.shape[0]
    if ncon == 0:
        return jnp.zeros((0,))
    efc = mjx_compat.efc_force(d)
    pyramidal = int(m.opt.cone) == int(mujoco.mjtCone.mjCONE_PYRAMIDAL)
    forces = []
    for i in range(ncon):
        a = int(addr[i])
        if a < 0:
            forces.append(jnp.zeros(()))
            continue
        dim = int(dims[i])
        n_rows = (1 if dim == 1 else 2 * (dim - 1)) if pyramidal else 1
        forces.append(jnp.sum(efc[a : a + n_rows]))
    return jnp.maximum(jnp.stack(forces), 0.0)


def contact_jacobians(m, d) -> jax.Array:
    """Relative translational Jacobians (ncon, 3, nv) of every contact point.

    J_c = J_p(body2, p_c) - J_p(body1, p_c): the velocity of geom2's body relative to geom1's
    body at the contact point. It is nonzero only on the dofs of the kinematic chains in contact
    (zero for the world body).
    """
    c = mjx_compat.contacts(d)
    ncon = mjx_compat.num_contact_slots(d)
    if ncon == 0:
        return jnp.zeros((0, 3, m.nv))
    body = jnp.asarray(m.geom_bodyid)[c.geom]  # (ncon, 2)

    def one(p, b):
        j1 = mjx_compat.point_jacobian(m, d, p, b[0])
        j2 = mjx_compat.point_jacobian(m, d, p, b[1])
        return (j2 - j1).T  # (3, nv)

    return jax.vmap(one)(c.pos, body)


if __name__ == "__main__":
    for dt, tc in [(0.005, 0.02), (0.005, 0.01), (0.002, 0.02), (0.002, 0.004)]:
        pen = impact_penetration(tc, dt)
        print(f"dt={dt} tc={tc}: 1 m/s impact penetration {1e3 * pen:.2f} mm, kappa ~{1 / pen:.0f}")
