"""How a G1 policy's episodes land, fallers against standers: MJX, the run's own training
distribution (as ``benchmarks/g1_training_distribution.py``), every episode from frame 0,
mean action.

    python experiments/g1_jump/g1_landing_probe.py CKPT [--envs 64] [--frames 70,80,92,110]
        [--brief] [--json out.json]

Per frame and quantity, the mean (std) over the episodes that will fall and over those that
stand, and the separation d' = |mean_f - mean_s| / sqrt((var_f + var_s) / 2). Quantities: root
minus feet centre (x, y), the stance (left minus right foot centre, x, y; the reference keeps
y at 0.237 m), root pitch and roll, root velocity (x, y), root height, the lowest foot height.
``--brief`` prints the falls and the mean stance width per frame only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bcg.transfer.policy import load_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import play_episodes  # noqa: E402

NAMES = (
    "root-feet x",
    "root-feet y",
    "stance x",
    "stance y",
    "pitch",
    "roll",
    "vx",
    "vy",
    "root z",
    "lowest foot",
)


def landing_traces(policy, envs: int, seed: int):
    """(traces (envs, T, len(NAMES)), alive (envs, T)) of ``envs`` episodes."""
    env = dataclasses.replace(policy.env, start="first")
    feet = env.foot_geom_ids
    half = len(feet) // 2  # left spheres first

    def record(d, obs, a, nd):
        kin = env.kinematics(nd)
        left = kin.geom_xpos[feet[:half]].mean(0)
        right = kin.geom_xpos[feet[half:]].mean(0)
        centre = 0.5 * (left + right)
        R = kin.xmat[env.tracked_body_ids[0]].reshape(3, 3)
        row = [
            nd.qpos[0] - centre[0],
            nd.qpos[1] - centre[1],
            left[0] - right[0],
            left[1] - right[1],
            jnp.arctan2(-R[2, 0], R[2, 2]),
            jnp.arctan2(R[2, 1], R[2, 2]),
            nd.qvel[0],
            nd.qvel[1],
            nd.qpos[2],
            jnp.min(kin.geom_xpos[feet, 2]),
        ]
        return jnp.stack(row)

    keys = jax.random.split(jax.random.PRNGKey(seed), envs)
    alive, traces = play_episodes(env, lambda o: policy.fn(o[None])[0], keys, record)
    return traces, alive


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", help="checkpoint, run directory or packed policy")
    p.add_argument("--envs", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--frames", default="70,80,92,110,140")
    p.add_argument("--brief", action="store_true")
    p.add_argument("--json")
    a = p.parse_args(argv)
    frames = [int(x) for x in a.frames.split(",")]
    o, alive = landing_traces(load_policy(a.path), a.envs, a.seed)
    fell = ~alive[:, -1]
    frames = [t for t in frames if t < o.shape[1]]
    width = {t: float(o[alive[:, t], t, 3].mean()) for t in frames}
    print(
        f"{a.path}: falls {int(fell.sum())}/{a.envs}; stance width (m) "
        + " ".join(f"frame {t} {w:.3f}" for t, w in width.items()),
        flush=True,
    )
    rows = []
    for t in frames:
        f_, s_ = fell & alive[:, t], ~fell
        for j, name in enumerate(NAMES):
            f, s = o[f_, t, j], o[s_, t, j]
            if not (f.size and s.size):
                continue
            sep = abs(f.mean() - s.mean()) / (np.sqrt(0.5 * (f.var() + s.var())) + 1e-12)
            rows.append(
                {
                    "frame": t,
                    "quantity": name,
                    "fallers": [float(f.mean()), float(f.std())],
                    "standers": [float(s.mean()), float(s.std())],
                    "d_prime": float(sep),
                }
            )
            if not a.brief:
                print(
                    f"frame {t:3d} {name:12s} fallers {f.mean():+.3f} ({f.std():.3f})  "
                    f"standers {s.mean():+.3f} ({s.std():.3f})  d' {sep:.2f}"
                )
    if a.json:
        with open(a.json, "w") as fh:
            out = {"path": a.path, "envs": a.envs, "seed": a.seed, "falls": int(fell.sum())}
            json.dump(out | {"stance_width": width, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
