"""Which native randomisation items make a G1 policy fall: ``bcg transfer``'s native runs of one
policy under several item sets (same seed and run count for each).

    python experiments/g1_jump/g1_randomization_ablation.py POLICY --runs 10 --seed 1 \\
        --sets all "latency,push,reset_noise" "all,-friction"

Each set is a :meth:`bcg.envs.g1.randomization.Randomization.parse` string. Switching items off
changes the later items' draws too (one random stream per run), so read differences between
sets as tendencies, not per-run effects.
"""

from __future__ import annotations

import argparse
import json

from bcg.transfer.config import TransferConfig
from bcg.transfer.policy import load_policy
from bcg.transfer.report import transfer


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--sets", nargs="+", default=["all"])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json")
    a = p.parse_args(argv)
    policy = load_policy(a.path)
    out = {}
    for spec in a.sets:
        cfg = TransferConfig(runs=a.runs, seed=a.seed, training_sim=False, randomization=spec)
        runs = transfer(policy, cfg)["native"]["runs"]
        out[spec] = runs
        falls = [r for r in runs if r["fell"]]
        times = ", ".join(f"{r['fall_time']:.2f}" for r in falls)
        print(f"{spec:32s} falls {len(falls)}/{len(runs)}  at [{times}] s", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
