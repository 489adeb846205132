"""Position-servo gains scaled per control step (a gain schedule).

A MuJoCo ``position`` actuator with stiffness ``kp`` and damping ``kv`` has
``gainprm[0] = kp`` and ``biasprm[0:3] = [kp * offset, -kp, -kv]`` (the offset term is 0 unless
a randomisation shifts the servo's zero, :mod:`bcg.envs.g1.randomization`). A schedule gives,
for the control step that starts at a state's ``time``, per-actuator factors ``(f_kp, f_kd)``;
the step runs with

    gainprm[0] * f_kp,   biasprm[0:2] * f_kp,   biasprm[2] * f_kd.

Robots whose motor commands carry the gains (the Unitree G1's ``LowCmd`` holds ``kp`` and ``kd``
per motor in every message) can follow such a schedule, e.g. stiffer legs for a jump's push-off
only. MJX applies it in :meth:`bcg.sim.Sim.model_for`; native runs
(:func:`bcg.transfer.runs.run_native`) and the deploy runner apply the same factors.
"""

from __future__ import annotations

import jax
import numpy as np


def scaled_servo_params(gainprm, biasprm, kp_factor, kd_factor) -> tuple:
    """``(gainprm, biasprm)`` with the position-servo gains scaled as in the module docstring;
    numpy in, numpy out (the arrays are not changed in place), JAX in, JAX out."""
    xp = np if isinstance(gainprm, np.ndarray) else jax.numpy
    f_kp = xp.asarray(kp_factor, gainprm.dtype)[:, None]
    f_kd = xp.asarray(kd_factor, biasprm.dtype)[:, None]
    gcol = xp.arange(gainprm.shape[1])[None, :]
    bcol = xp.arange(biasprm.shape[1])[None, :]
    gain = gainprm * xp.where(gcol == 0, f_kp, 1.0)
    bias = biasprm * xp.where(bcol < 2, f_kp, xp.where(bcol == 2, f_kd, 1.0))
    return gain, bias


def apply_native(m, base: tuple[np.ndarray, np.ndarray], kp_factor, kd_factor) -> None:
    """Set a native ``MjModel``'s servo gains to ``base = (gainprm, biasprm)`` (the run's own,
    e.g. after randomisation) scaled by the factors."""
    m.actuator_gainprm[:], m.actuator_biasprm[:] = scaled_servo_params(*base, kp_factor, kd_factor)
