"""Whether native MuJoCo's data blew up.

MuJoCo does not stop on a blow-up: when a qpos, qvel or qacc entry is non-finite or beyond
``mjMAXVAL`` (1e10), ``mj_step`` warns (``mjWARN_BADQPOS`` / ``BADQVEL`` / ``BADQACC``), *resets*
the data to the model's initial state and goes on from there. A rollout that ignores this
measures the reset state's motion as if it were the original's.
"""

from __future__ import annotations

import mujoco
import numpy as np

_UNSTABLE = (
    mujoco.mjtWarning.mjWARN_BADQACC,
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
)


def mujoco_blew_up(d: mujoco.MjData) -> bool:
    """True when ``d`` holds a non-finite qpos / qvel or MuJoCo has warned of a bad qacc /
    qpos / qvel since the data was last reset by the caller (``mj_resetData`` clears the
    counters; MuJoCo's own reset after the warning keeps them)."""
    if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
        return True
    return any(d.warning[int(w)].number > 0 for w in _UNSTABLE)
