"""Per-episode runtime randomisation that leaves the model alone: action latency and root pushes.

One sampler for every robot and simulator (the G1's MJX training schedule and table,
:mod:`bcg.envs.g1.randomization`, and the native transfer runs of any env,
:mod:`bcg.transfer.randomizer`). With ``rng`` a NumPy generator:

    latency ~ U{lo, ..., hi} control steps                   (None: 0, no draw)
    t_1 ~ U(interval);  t_{j+1} = t_j + U(interval)          (None: no pushes, no draw)
    push j at control step round(t_j / dt), while t_j < num_steps * dt:
        linear  = U(-1, 1)^3 * push_linear    (world-frame root velocity change, m/s)
        angular = U(-1, 1)^3 * push_angular   (root angular velocity change, rad/s)

Defaults are the ranges of Aditya et al. (2026), docs/method.md: pushes every U(1, 3) s of up
to (0.5, 0.5, 0.2) m/s and (0.52, 0.52, 0.78) rad/s, latency of 0 or 1 control steps.
"""

from __future__ import annotations

import dataclasses

import numpy as np

LATENCY = (0, 1)  # control steps
PUSH_INTERVAL = (1.0, 3.0)  # s
PUSH_LINEAR = (0.5, 0.5, 0.2)  # m/s
PUSH_ANGULAR = (0.52, 0.52, 0.78)  # rad/s


@dataclasses.dataclass(frozen=True)
class Push:
    step: int  # control step at which the kick is applied
    linear: np.ndarray  # (3,) world-frame root velocity change, m/s
    angular: np.ndarray  # (3,) root angular velocity change (roll, pitch, yaw rates), rad/s


@dataclasses.dataclass(frozen=True)
class Episode:
    latency: int
    pushes: tuple[Push, ...]


def sample_episode(
    rng,
    control_dt: float,
    num_steps: int,
    *,
    latency: tuple[int, int] | None = LATENCY,
    push_interval: tuple[float, float] | None = PUSH_INTERVAL,
    push_linear: tuple[float, float, float] = PUSH_LINEAR,
    push_angular: tuple[float, float, float] = PUSH_ANGULAR,
) -> Episode:
    """The latency and push schedule of one episode of ``num_steps`` control steps (module
    docstring). ``rng``: a NumPy generator (used in place) or a seed."""
    rng = np.random.default_rng(rng)
    lat = 0 if latency is None else int(rng.integers(latency[0], latency[1] + 1))
    pushes = []
    if push_interval is not None:
        t = rng.uniform(*push_interval)
        while t < num_steps * control_dt:
            lin = rng.uniform(-1, 1, 3) * np.asarray(push_linear)
            ang = rng.uniform(-1, 1, 3) * np.asarray(push_angular)
            pushes.append(Push(int(round(t / control_dt)), lin, ang))
            t += rng.uniform(*push_interval)
    return Episode(lat, tuple(pushes))


def apply_push(qvel: np.ndarray, push: Push) -> np.ndarray:
    """``qvel`` of a free-floating root after the kick: world linear velocity (qvel[0:3]) +=
    ``push.linear``; angular velocity (qvel[3:6], MuJoCo's root-frame rates) += ``push.angular``."""
    v = np.array(qvel, float).copy()
    v[0:3] += push.linear
    v[3:6] += push.angular
    return v
