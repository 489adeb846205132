"""Settings of a native-MuJoCo transfer report (:func:`bcg.transfer.report.transfer`) and the
full constraint solver's iteration counts that the native model gets (MuJoCo's defaults)."""

from __future__ import annotations

import dataclasses

MUJOCO_DEFAULT_ITERATIONS = 100
MUJOCO_DEFAULT_LS_ITERATIONS = 50
MAX_ROOT_SPEED = 10.0  # m/s: a free root faster than this (a 5 m free fall) has blown up


@dataclasses.dataclass
class TransferConfig:
    runs: int = 5
    seconds: float | None = None  # default: the env's episode length
    randomize: bool = True
    latency: bool = True  # with randomize: 0 or 1 control steps per run
    pushes: bool = True  # with randomize, free-joint roots only
    seed: int = 0
    solver_iterations: int = MUJOCO_DEFAULT_ITERATIONS
    ls_iterations: int = MUJOCO_DEFAULT_LS_ITERATIONS
    render: bool = False
    video_path: str | None = None  # .mp4 (or a folder of PNG frames as fallback)
    render_size: tuple[int, int] = (360, 480)  # (height, width)
    training_sim: bool = True  # also run the MJX training simulator for the comparison
    # a free root faster than this (m/s) stops a run as diverged (None: only MuJoCo's checks)
    max_root_speed: float | None = MAX_ROOT_SPEED
    randomization: str | None = None  # G1: items of its table (Randomization.parse), "all"
