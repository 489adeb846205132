"""Differentiable stiff-contact simulation on MJX."""

from bcg.sim import mjx_compat
from bcg.sim.contact import (
    ContactStiffness,
    contact_jacobians,
    contact_normal_forces,
    equivalent_kappa,
    impact_penetration,
    resolve_stiffness,
)
from bcg.sim.model import ModelError, Sim, check_differentiable, load
from bcg.sim.step import (
    control_step,
    differentiate_qpos,
    integrate_qpos,
    make_data,
    mean_data,
    normalize_quaternions,
)

mjx_compat.check_version()  # a warning if MJX is outside the range our accessors were tested on

__all__ = [
    "ContactStiffness",
    "ModelError",
    "Sim",
    "check_differentiable",
    "contact_jacobians",
    "contact_normal_forces",
    "control_step",
    "differentiate_qpos",
    "equivalent_kappa",
    "impact_penetration",
    "integrate_qpos",
    "load",
    "make_data",
    "mean_data",
    "normalize_quaternions",
    "resolve_stiffness",
]
