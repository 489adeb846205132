"""Which part of the reset noise makes a G1 policy fall: 64 MJX episodes of the run's env from
frame 0 with the model items and pushes neutral and latency 0
(``benchmarks/g1_training_distribution.py``), the reset noise whole or one part at a time (root
rotation, joints, root position).

    python experiments/g1_jump/g1_reset_noise_split.py CKPT [--envs 64] \\
        [--parts all,rot,joints,root]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from bcg.envs.g1 import randomization as g1r
from bcg.transfer.policy import load_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import episode_falls  # noqa: E402

PARTS = {
    "all": {},
    "rot": dict(reset_noise=(0.05, 0.0), reset_root_xy=0.0, reset_root_up=0.0),
    "joints": dict(reset_noise=(0.0, 0.1), reset_root_xy=0.0, reset_root_up=0.0),
    "root": dict(reset_noise=(0.0, 0.0)),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", help="checkpoint, run directory or packed policy")
    p.add_argument("--envs", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--parts", default=",".join(PARTS))
    a = p.parse_args(argv)
    pol = load_policy(a.path)
    m = pol.env.sim.mj_model
    neutral = tuple(n for n in g1r.draw_layout(m) if n != "latency")
    for part in a.parts.split(","):
        if part not in PARTS:
            raise ValueError(f"unknown part {part!r}; choose from {', '.join(PARTS)}")
        cfg = dataclasses.replace(pol.env.randomization, **PARTS[part])
        p_ = dataclasses.replace(pol, env=dataclasses.replace(pol.env, randomization=cfg))
        fell, _, _ = episode_falls(p_, a.envs, a.seed, neutral, 0)
        print(f"{a.path}: reset noise {part}: falls {int(fell.sum())}/{a.envs}", flush=True)


if __name__ == "__main__":
    main()
