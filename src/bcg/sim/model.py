"""Loading an MJCF into a differentiable MJX simulator with a chosen contact stiffness.

A :class:`Sim` holds the native ``mujoco.MjModel`` (used for evaluation and finite-difference
references), the ``mjx.Model`` used for differentiable rollouts, and the control-step layout
(``substeps`` physics steps per control step).

Contact stiffness (see :mod:`bcg.sim.contact` for the mapping to the paper's kappa) is set by
overriding every geom's ``solref`` time constant.

Constraint solver and autodiff: MJX solves contact with a ``lax.while_loop`` unless
``opt.iterations == 1``; reverse-mode autodiff cannot go through a while loop. Every MJX step of
bcg runs :func:`bcg.sim.solver.scan_solve`, the same solver as a **fixed-length scan** of
``solver_iterations`` iterations (default 1: one warm-started Newton iteration with a
``ls_iterations``-step line search). One iteration is exact for frictionless impacts and resting
contact and is the cheapest; frictional sliding needs more (``benchmarks/solver_error.py``
measures the trajectory error against native MuJoCo at full iterations: a box sliding at
1.5 m/s is 85-100 mm off after 1 s at 1 iteration, 0-1.4 mm at 4). The solver is warm-started
from the previous step's accelerations unless the MJCF disables it or ``warmstart=False`` (the
G1 needs it off at 1 iteration: :mod:`bcg.envs.g1.model`). The native model keeps the MJCF's
own solver settings.

MJX's Euler integrator re-solves ``(M + h D) qacc = qfrc_smooth + qfrc_constraint`` for implicit
damping; with an unconverged solver this differs from the solver's ``qacc`` even without damping.
Models without joint damping therefore get ``mjDSBL_EULERDAMP`` in the MJX model (identical to
native MuJoCo, which skips that solve when there is no damping).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import jax
import mujoco
import numpy as np

from bcg.sim.contact import ContactStiffness, resolve_stiffness
from bcg.sim.servo_schedule import scaled_servo_params
from bcg.sim.solver import MAX_SCAN_ITERATIONS
from bcg.validation import check_int, check_number

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx


class ModelError(ValueError):
    """An MJCF could not be loaded or is not usable for differentiable simulation."""


@dataclasses.dataclass(frozen=True, eq=False)
class Sim:
    """A model ready for differentiable (MJX) and native (MuJoCo) simulation.

    Attributes:
      mj_model: native model, the MJCF's solver settings, stiffness applied.
      mjx_model: MJX model, ``opt.iterations = solver_iterations`` (1 by default).
      substeps: physics steps per control step.
      stiffness: the contact stiffness applied.
      name: a label (file name or task name).
      model_at: optional per-state model, ``model_at(mjx_model, data) -> mjx.Model``: the
        model every control step of ``data`` runs with (:meth:`model_for`). A task whose
        environments each carry their own parameters in the state (per-environment domain
        randomisation, drawn into ``data.userdata`` at reset) sets it; since it reads the
        state, every copy of a state (a BCG branch, a reset) keeps its environment's model.
      hold_at: optional ``hold_at(data) -> bool``: the state applies its previous control
        (``data.ctrl``) for this control step and keeps the new one for the next, i.e. one
        control step of action latency (per environment when read from ``data.userdata``).
      push_at: optional ``push_at(data) -> (nv,)``: a velocity change added to ``qvel`` before
        the control step's physics (a push; per environment and step when read from the
        state, so every BCG branch of a state gets the same push).
      servo_scale_at: optional ``servo_scale_at(time) -> (kp factor (nu,), kd factor (nu,))``:
        a gain schedule of the position servos for the control step that starts at ``time``
        (:mod:`bcg.sim.servo_schedule`), applied on top of ``model_at``'s model; native runs
        and the deploy runner apply it too.
    """

    mj_model: mujoco.MjModel
    mjx_model: mjx.Model
    substeps: int
    stiffness: ContactStiffness
    name: str = "model"
    model_at: Callable | None = None
    hold_at: Callable | None = None
    push_at: Callable | None = None
    servo_scale_at: Callable | None = None

    def model_for(self, data) -> mjx.Model:
        """The MJX model that steps ``data``: ``model_at(mjx_model, data)``, or ``mjx_model``,
        with the servo gains of ``servo_scale_at(data.time)`` when a schedule is set."""
        m = self.mjx_model if self.model_at is None else self.model_at(self.mjx_model, data)
        if self.servo_scale_at is None:
            return m
        f_kp, f_kd = self.servo_scale_at(jax.lax.stop_gradient(data.time))
        gain, bias = scaled_servo_params(m.actuator_gainprm, m.actuator_biasprm, f_kp, f_kd)
        return m.replace(actuator_gainprm=gain, actuator_biasprm=bias)

    @property
    def physics_dt(self) -> float:
        return float(self.mj_model.opt.timestep)

    @property
    def control_dt(self) -> float:
        return self.physics_dt * self.substeps

    @property
    def nq(self) -> int:
        return int(self.mj_model.nq)

    @property
    def nv(self) -> int:
        return int(self.mj_model.nv)

    @property
    def nu(self) -> int:
        return int(self.mj_model.nu)

    def native_with_mjx_solver(self) -> mujoco.MjModel:
        """A copy of the native model with the MJX model's solver settings (iterations, line
        search iterations, disable flags): native MuJoCo stepping what MJX steps."""
        m = _copy_model(self.mj_model)
        o = self.mjx_model.opt
        m.opt.iterations = int(o.iterations)
        m.opt.ls_iterations = int(o.ls_iterations)
        m.opt.disableflags = int(o.disableflags)
        return m

    def total_weight(self) -> float:
        """Total weight m g of all bodies in newtons."""
        g = float(np.linalg.norm(self.mj_model.opt.gravity))
        return float(np.sum(self.mj_model.body_mass)) * g

    def supported_weight(self) -> float:
        """Weight in newtons that contacts can have to carry: m g summed over the bodies whose
        path to the world has a free joint or a slide joint with a component along gravity
        (a legged robot: all of it; arms on a fixed base: only the objects they handle). The
        total weight when no body is free to fall."""
        return supported_weight(self.mj_model)


def supported_weight(m: mujoco.MjModel) -> float:
    """:meth:`Sim.supported_weight` of an ``MjModel`` (joint axes taken at ``qpos0``)."""
    gravity = np.asarray(m.opt.gravity, float)
    g = float(np.linalg.norm(gravity))
    if g == 0:
        return 0.0
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    falls = np.zeros(m.nbody, bool)
    for b in range(1, m.nbody):  # a parent's index is below its children's
        falls[b] = falls[m.body_parentid[b]]
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
            if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
                falls[b] = True
            elif m.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE:
                falls[b] |= abs(float(d.xaxis[j] @ gravity)) > 1e-9 * g
    mass = float(np.sum(m.body_mass[falls]))
    return (mass if mass > 0 else float(np.sum(m.body_mass))) * g


def _read_mjcf(mjcf: str | os.PathLike) -> mujoco.MjModel:
    text = str(mjcf)
    is_xml = text.lstrip().startswith("<")
    try:
        if is_xml:
            return mujoco.MjModel.from_xml_string(text)
        path = Path(mjcf)
        if not path.exists():
            raise ModelError(f"MJCF file not found: {path}")
        if not path.is_file():
            raise ModelError(f"MJCF path is not a file: {path}")
        return mujoco.MjModel.from_xml_path(str(path))
    except ModelError:
        raise
    except Exception as e:  # mujoco raises ValueError with the parser message
        where = "MJCF string" if is_xml else f"MJCF file {mjcf}"
        raise ModelError(f"could not parse {where}: {e}") from None


def load(
    mjcf: str | os.PathLike | mujoco.MjModel,
    *,
    stiffness: str | ContactStiffness | float = "stiff",
    substeps: int = 4,
    timestep: float | None = None,
    solver_iterations: int | str = 1,
    ls_iterations: int | None = None,
    name: str | None = None,
    dampratio: float = 1.0,
    warmstart: bool | None = None,
) -> Sim:
    """Load an MJCF (path, XML string or MjModel) for differentiable simulation.

    Args:
      mjcf: path to an ``.xml`` file, an XML string, or an ``mujoco.MjModel``.
      stiffness: ``"soft"`` (MuJoCo's default contact), ``"stiff"`` (time constant 2 physics
        steps), ``"gated"`` / ``"gated:WIDTH"`` (time constant 2 physics steps and an impedance
        that ramps from ~0 over WIDTH metres of penetration, default 5 mm: stiff but continuous,
        like the paper's sigmoid-gated contact), ``"model"`` (keep the MJCF's solref), a number
        (solref time constant in seconds) or a :class:`ContactStiffness`.
      substeps: physics steps per control step (>= 1).
      timestep: physics timestep override in seconds (default: the MJCF's).
      solver_iterations: constraint-solver iterations of the MJX model, 1 to
        ``MAX_SCAN_ITERATIONS`` (a fixed-length differentiable scan, see module docstring), or
        ``"model"`` to keep the MJCF's (an error if above the maximum).
      ls_iterations: line-search iterations of the MJX model (default: the MJCF's, at most 8).
      name: label for reports.
      dampratio: solref damping ratio applied with a named or numeric ``stiffness`` (1.0:
        critical damping, the default; < 1 lets contacts bounce). Ignored for ``"model"`` and
        for a :class:`ContactStiffness`, which carries its own.
      warmstart: warm-start the MJX constraint solver from the previous physics step's
        accelerations (True) or not (False); None keeps the MJCF's setting. The native model
        keeps the MJCF's setting either way.
    """
    substeps = check_int("substeps", substeps, 1)
    check_number("timestep", timestep, above=0, optional=True, hint="seconds")

    if isinstance(mjcf, mujoco.MjModel):
        m = mjcf
        label = name or "model"
    else:
        m = _read_mjcf(mjcf)
        text = str(mjcf)
        label = name or ("mjcf" if text.lstrip().startswith("<") else Path(text).stem)
    m = _copy_model(m)
    if timestep is not None:
        m.opt.timestep = float(timestep)

    stiff = resolve_stiffness(stiffness, m.opt.timestep, dampratio)
    stiff.apply(m)

    mx_src = _copy_model(m)
    its = int(m.opt.iterations) if solver_iterations == "model" else solver_iterations
    its = check_int("solver_iterations", its, 1)
    if its > MAX_SCAN_ITERATIONS:
        raise ModelError(
            f"{label}: opt.iterations = {its}: MJX would solve contact with lax.while_loop, which "
            "reverse-mode autodiff cannot differentiate, and a fixed-length scan of that many "
            f"iterations is too slow. Use solver_iterations between 1 and {MAX_SCAN_ITERATIONS}."
        )
    mx_src.opt.iterations = int(its)
    mx_src.opt.ls_iterations = int(ls_iterations or min(int(m.opt.ls_iterations), 8))
    if not np.any(m.dof_damping):
        mx_src.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    if warmstart is not None:
        flag = int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)
        if warmstart:
            mx_src.opt.disableflags &= ~flag
        else:
            mx_src.opt.disableflags |= flag
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mx = mjx.put_model(mx_src)
    except NotImplementedError as e:
        raise ModelError(f"{label}: MJX does not support a feature of this model: {e}") from None
    except Exception as e:
        raise ModelError(f"{label}: could not build the MJX model: {e}") from None
    return Sim(mj_model=m, mjx_model=mx, substeps=int(substeps), stiffness=stiff, name=label)


def _copy_model(m: mujoco.MjModel) -> mujoco.MjModel:
    import copy

    return copy.copy(m)


def check_differentiable(sim: Sim) -> None:
    """Raise a clear error if reverse-mode autodiff cannot pass through ``sim``'s solver."""
    it = int(sim.mjx_model.opt.iterations)
    if it > MAX_SCAN_ITERATIONS:
        raise ModelError(
            f"{sim.name}: opt.iterations = {it}: MJX would solve contact with lax.while_loop, "
            "which reverse-mode autodiff cannot differentiate, and a fixed-length scan of that "
            "many iterations is too slow. Load it with bcg.sim.load(..., solver_iterations=1) "
            f"(the default, up to {MAX_SCAN_ITERATIONS})."
        )
