"""Every use of MJX internals (``mujoco.mjx._src``, ``Data._impl``) in bcg, in one place.

MJX's public API has no contact-slot view, no constraint forces, no point Jacobian and no way
to choose the constraint solver's loop, all of which BCG needs. The accessors below reach into
MJX's private modules; each is tested (``tests/sim/test_mjx_compat.py``) so that an MJX upgrade
that moves one fails there, by name, rather than deep inside a gradient. :data:`SUPPORTED`
is the range of ``mujoco-mjx`` versions they were written and tested against;
:func:`check_version` warns outside it.

Contact slots. MJX allocates a fixed number of contact slots per model (every geom pair that can
collide, times its contact points); a slot's geom pair, its ``efc_address`` (first constraint
row, -1 when the pair is excluded) and ``dim`` are static, while ``pos``, ``dist`` and
``solref`` change with the state.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from importlib import metadata

import jax
import numpy as np

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco.mjx._src import forward as _forward
    from mujoco.mjx._src import scan as _scan
    from mujoco.mjx._src import smooth as _smooth
    from mujoco.mjx._src import solver as _solver
    from mujoco.mjx._src import support as _support
    from mujoco.mjx._src.types import ConeType, DisableBit, SolverType  # noqa: F401 (re-exported)

SUPPORTED = ((3, 17), (3, 17))  # [lowest, highest] mujoco-mjx (major, minor) tested


def mjx_version() -> tuple[int, ...]:
    """The installed ``mujoco-mjx`` version as a tuple of ints (major, minor, patch)."""
    text = metadata.version("mujoco-mjx")
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


def check_version(version: tuple[int, ...] | None = None) -> bool:
    """True if ``version`` (default: the installed one) is in :data:`SUPPORTED`; else a
    ``RuntimeWarning`` naming the range, and False."""
    v = tuple(version or mjx_version())[:2]
    lo, hi = SUPPORTED
    if lo <= v <= hi:
        return True
    warnings.warn(
        f"mujoco-mjx {'.'.join(map(str, v))} is outside the range bcg's MJX accessors were "
        f"tested with ({lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}); run tests/sim/test_mjx_compat.py",
        RuntimeWarning,
        stacklevel=2,
    )
    return False


# ----------------------------------------------------------------------------- contact slots


def contacts(d):
    """The contact-slot struct of an ``mjx.Data`` (fields ``geom``, ``pos``, ``dist``,
    ``solref``, ``efc_address``, ``dim``, ...; leading axes of ``d`` kept)."""
    return d._impl.contact


def num_contact_slots(d) -> int:
    """Static number of contact slots of ``d`` (last axis of the slot fields)."""
    return int(np.asarray(d._impl.contact.efc_address).shape[-1])


def efc_force(d) -> jax.Array:
    """Constraint-row forces of ``d`` (``efc`` rows, as MuJoCo's ``efc_force``)."""
    return d._impl.efc_force


EFC_FORCE_PATH = "_impl.efc_force"  # for Data.tree_replace


# ----------------------------------------------------------------------------- kinematics


def point_jacobian(m, d, point, body) -> jax.Array:
    """Translational Jacobian (nv, 3) of the world point ``point`` moving with ``body`` (as
    MuJoCo's ``mj_jac``, transposed)."""
    return _support.jac(m, d, point, body)[0]


def integrate_qpos(m, qpos, dq) -> jax.Array:
    """``qpos (+) dq`` with unit time: MuJoCo's ``mj_integratePos`` (quaternions exponentiated)."""

    def fn(jnt_typ, q, v):
        return _forward._integrate_pos(jnt_typ, q, v, 1.0)

    return _scan.flat(m, fn, "jqv", "q", m.jnt_type, qpos, dq)


# ----------------------------------------------------------------------------- dynamics


def is_sparse(m) -> bool:
    """Whether MJX stores this model's mass matrix sparse (large models) or dense."""
    return bool(_support.is_sparse(m))


def mass_matrix(d) -> jax.Array:
    """The joint-space inertia as MJX stores it in ``d`` (dense (nv, nv) unless sparse)."""
    return d._impl.M


def full_mass_matrix(m, d) -> jax.Array:
    """The dense (nv, nv) joint-space inertia of ``d``."""
    return _support.full_m(m, d)


def mul_m(m, d, x) -> jax.Array:
    """``M x`` with the mass matrix of ``d`` (MJX's ``support.mul_m``)."""
    return _support.mul_m(m, d, x)


def constraint_rows(d) -> tuple[jax.Array, jax.Array]:
    """The constraint Jacobian ``efc_J`` (nefc, nv) and the regularised inverse constraint
    mass diagonal ``efc_D`` (nefc,) of ``d``."""
    return d._impl.efc_J, d._impl.efc_D


# ----------------------------------------------------------------------------- the solver

solver_internals = _solver  # Context, _linesearch, _update_constraint, ... (bcg.sim.solver)
_ORIGINAL_SOLVE = _solver.solve
# the MJX functions a swap may replace, by keyword: (module, attribute)
_SWAPPABLE = {
    "solve_m": (_smooth, "solve_m"),  # dense / sparse M^{-1} x with the stored factor
    "update_gradient": (_solver, "_update_gradient"),  # the solver's gradient and M^{-1} grad
}
_ORIGINALS = {k: getattr(mod, attr) for k, (mod, attr) in _SWAPPABLE.items()}
_swap_lock = threading.RLock()
_swap_depth = 0
_swap_active: dict = {}


@contextlib.contextmanager
def solver_replaced(solve, **internals):
    """Within the block, MJX's ``step`` (traced in this thread) calls ``solve(m, d)`` instead of
    its own constraint solver, and each of ``internals`` (``solve_m``: MJX's
    ``smooth.solve_m(m, d, x)``; ``update_gradient``: the solver's ``_update_gradient(m, d,
    ctx)``) instead of MJX's. MJX has no argument for these, so this swaps module attributes;
    it is guarded: one thread at a time (a re-entrant lock), nested blocks must swap in the same
    functions, a swap by someone else is an error, and MJX's functions are restored on exit."""
    global _swap_depth, _swap_active
    unknown = set(internals) - set(_SWAPPABLE)
    if unknown:
        raise ValueError(f"cannot swap MJX internals {sorted(unknown)}: known {sorted(_SWAPPABLE)}")
    wanted = {"solve": solve, **internals}
    with _swap_lock:
        if _swap_depth == 0:
            current = {"solve": _solver.solve}
            current.update({k: getattr(mod, a) for k, (mod, a) in _SWAPPABLE.items()})
            originals = {"solve": _ORIGINAL_SOLVE, **_ORIGINALS}
            moved = [k for k in current if current[k] is not originals[k]]
            if moved:
                raise RuntimeError(
                    f"mjx's {', '.join(moved)} was replaced outside bcg "
                    f"({current[moved[0]]!r}); refusing to swap"
                )
        elif wanted != _swap_active:
            raise RuntimeError("nested solver_replaced blocks with different solvers")
        _solver.solve = solve
        for k, f in internals.items():
            mod, attr = _SWAPPABLE[k]
            setattr(mod, attr, f)
        _swap_active = wanted
        _swap_depth += 1
        try:
            yield
        finally:
            _swap_depth -= 1
            if _swap_depth == 0:
                _solver.solve = _ORIGINAL_SOLVE
                for k, (mod, attr) in _SWAPPABLE.items():
                    setattr(mod, attr, _ORIGINALS[k])
                _swap_active = {}


def active_solve():
    """The solver function MJX's step calls right now (tests)."""
    return _solver.solve


def swapped_functions() -> tuple:
    """The functions swapped in now, as a hashable key ``((name, function), ...)``; empty
    outside :func:`solver_replaced` (a cache key for programs that trace MJX's step)."""
    return tuple(sorted(_swap_active.items(), key=lambda kv: kv[0]))


def active_internal(name: str):
    """The function MJX calls right now for one of the swappable internals (tests)."""
    mod, attr = _SWAPPABLE[name]
    return getattr(mod, attr)


def original_internal(name: str):
    """MJX's own function for one of the swappable internals."""
    return _ORIGINALS[name]


def public_fields(d) -> list[str]:
    """Names of the public dataclass fields of an ``mjx.Data`` (not its private ``_impl``)."""
    import dataclasses

    return [f.name for f in dataclasses.fields(d) if not f.name.startswith("_")]


def same_dtypes(new, old):
    """``new`` (an ``mjx.Data``) with every array cast to the dtype of the same field of
    ``old``. Under float64, MJX 3.17's ``make_data`` gives the tendon-wrap fields of the
    private struct (``ten_wrapadr``, ``ten_wrapnum``, ``wrap_obj``) int32 and ``step`` returns
    them int64; a ``lax.scan`` over steps refuses the change of carry type."""

    def cast(a, b):
        dtype = getattr(b, "dtype", None)
        if dtype is None or getattr(a, "dtype", dtype) == dtype:
            return a
        return a.astype(dtype)

    return jax.tree_util.tree_map(cast, new, old)
