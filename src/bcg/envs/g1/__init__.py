"""Unitree G1 (29 DoF) motion tracking: model (:mod:`.model`), reference clips (:mod:`.clips`),
domain randomisation (:mod:`.randomization`) and the tracking environment (:mod:`.tracking`)."""

from bcg.envs.g1.clips import BUILTIN_CLIPS, Clip, ClipError, get_clip, load_csv, resample
from bcg.envs.g1.model import G1Config, load_g1
from bcg.envs.g1.randomization import Randomization, randomize, randomize_mjx, sample_episode
from bcg.envs.g1.tracking import G1Tracking, g1_hop, g1_jump, g1_squat_jump, g1_tracking

__all__ = [
    "BUILTIN_CLIPS",
    "Clip",
    "ClipError",
    "G1Config",
    "G1Tracking",
    "Randomization",
    "g1_hop",
    "g1_jump",
    "g1_squat_jump",
    "g1_tracking",
    "get_clip",
    "load_csv",
    "load_g1",
    "randomize",
    "randomize_mjx",
    "resample",
    "sample_episode",
]
