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
    from mujoco.mjx._src import solver as _solver
    from mujoco.mjx._src import support as _support
    from mujoco.mjx._src.types import DisableBit, SolverType  # noqa: F401 (re-exported)

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


# ----------------------------------------------------------------------------- the solver

solver_internals = _solver  # Context, _linesearch, _update_constraint, ... (bcg.sim.solver)
_ORIGINAL_SOLVE = _solver.solve
_swap_lock = threading.RLock()
_swap_depth = 0


@contextlib.contextmanager
def solver_replaced(solve):
    """Within the block, MJX's ``step`` (traced in this thread) calls ``solve(m, d)`` instead of
    its own constraint solver. MJX has no solver argument, so this swaps the module attribute;
    it is guarded: one thread at a time (a re-entrant lock), nested blocks must use the same
    ``solve``, a swap by someone else is an error, and MJX's solver is restored on exit."""
    global _swap_depth
    with _swap_lock:
        current = _solver.solve
        if _swap_depth == 0 and current is not _ORIGINAL_SOLVE:
            raise RuntimeError(
                f"mjx's solver.solve was replaced outside bcg ({current!r}); refusing to swap"
            )
        if _swap_depth > 0 and current is not solve:
            raise RuntimeError("nested solver_replaced blocks with different solvers")
        _solver.solve = solve
        _swap_depth += 1
        try:
            yield
        finally:
            _swap_depth -= 1
            if _swap_depth == 0:
                _solver.solve = _ORIGINAL_SOLVE


def active_solve():
    """The solver function MJX's step calls right now (tests)."""
    return _solver.solve


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
