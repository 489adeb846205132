"""Settings of a native-MuJoCo transfer report (:func:`bcg.transfer.report.transfer`) and the
full constraint solver's iteration counts that the native model gets (MuJoCo's defaults)."""

from __future__ import annotations

import dataclasses

MUJOCO_DEFAULT_ITERATIONS = 100
MUJOCO_DEFAULT_LS_ITERATIONS = 50


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
    randomization: str | None = None  # G1: items of its table (Randomization.parse), "all"
