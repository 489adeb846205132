"""How often BCG's trigger fires on the G1 jump, per threshold: the loads of one SHAC window.

    python experiments/g1_jump/g1_trigger_loads.py --json

Rolls one 32-step window of 64 environments with the plain (analytic) step from a fresh SHAC
state and from a checkpoint (default: ``DEFAULT_RUN``, g1_policy_gradient's, at 50), records
each env-step's trigger signals (:meth:`bcg.estimators.trigger.Trigger.loads`: the largest
group mean load, the largest group peak load, the largest contact peak force) and reports, for
tau as multiples of the robot's weight, the fraction of env-steps that would trigger and, replaying
H = 2 bundles on these loads (a trigger opens a bundle unless one is running), the mean and
largest number of environments in a bundle at one step. The bundles change the trajectory,
so these are estimates for choosing tau and ``capacity``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import jax

jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_RUN, learner_state  # noqa: E402

from bcg.estimators.stats import StepStats  # noqa: E402
from bcg.estimators.trigger import Trigger  # noqa: E402
from bcg.learners import harness, registry  # noqa: E402
from bcg.learners.rollout import rollout  # noqa: E402
from bcg.sim.step import control_step  # noqa: E402

MULTIPLES = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0)


class LoadProbe:
    """A plain step whose statistics are the trigger signals (E, G), (E, G), (E,)."""

    name = "analytic"

    def init(self, sim, data):
        return data

    def state(self, carry):
        return carry

    def step(self, sim, data, ctrl, key):
        out, f = jax.vmap(lambda d, u: control_step(sim, d, u, per_substep=True))(data, ctrl)

        def loads(mode, d, ff):
            return Trigger(mode=mode).loads(sim, d, ff)

        mean = jax.vmap(lambda d, ff: loads("group-mean", d, ff)[0])(out, f)
        peak = jax.vmap(lambda d, ff: loads("group-peak", d, ff)[0])(out, f)
        contact = jax.vmap(lambda d, ff: loads("contact", d, ff)[1].max(-1))(out, f)
        return out.replace(time=data.time + sim.control_dt), StepStats(mean, peak, contact)


def bundles(trig: np.ndarray, horizon: int) -> np.ndarray:
    """Environments in a bundle at each step (T,) for triggers ``trig`` (T, E)."""
    remaining = np.zeros(trig.shape[1], int)
    counts = []
    for t in range(trig.shape[0]):
        running = remaining > 0
        start = ~running & trig[t]
        remaining = np.where(running, remaining - 1, np.where(start, horizon - 1, 0))
        counts.append(int((running | start).sum()))
    return np.asarray(counts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", default=DEFAULT_RUN)
    p.add_argument("--checkpoint", type=int, default=50)
    p.add_argument("--horizon", type=int, default=2, help="bundle length H for the replay")
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", default="results/g1_policy_gradient/trigger_loads.json")
    a = p.parse_args(argv)
    run_dir = Path(a.run)
    run = json.loads((run_dir / "run.json").read_text())
    _, lrn = registry.build({**run, "estimator": "analytic", "estimator_params": {}})
    key = jax.random.PRNGKey(0)
    template = lrn.init(key)
    weight = lrn.env.sim.total_weight()
    window = jax.jit(
        lambda s, k: (
            rollout(lrn.env, LoadProbe(), lrn._sampling_policy(s.obs_rms), s.actor, s.env, k, 32)[
                1
            ].stats
        )
    )
    result = {"command": "python " + " ".join(sys.argv), "weight_newton": weight, "points": []}
    for label in ("initial", f"checkpoint-{a.checkpoint}"):
        if label == "initial":
            restored = template
        else:
            restored = harness.restore_checkpoint(run_dir, template, a.checkpoint)[0]
        stats = jax.device_get(window(learner_state(lrn, restored, lrn, key), key))
        group_mean, group_peak, contact = (np.asarray(x) for x in stats)
        signals = {
            "group-mean": group_mean.max(-1),
            "group-peak": group_peak.max(-1),
            "contact": contact,
        }
        point = {"point": label, "taus": []}
        for m in MULTIPLES:
            row = {"tau_over_weight": m}
            for mode, sig in signals.items():
                trig = sig > m * weight
                row[mode] = float(trig.mean())
                if mode == "group-mean":
                    n = bundles(trig, a.horizon)
                    row["group-mean_bundled_mean"] = float(n.mean())
                    row["group-mean_bundled_max"] = int(n.max())
            point["taus"].append(row)
            print(label, row, file=sys.stderr, flush=True)
        result["points"].append(point)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    if a.json:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
