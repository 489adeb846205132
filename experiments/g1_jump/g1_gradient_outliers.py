"""Which environments carry one draw's G1 actor-gradient variance, analytic vs bcg.

    python experiments/g1_jump/g1_gradient_outliers.py --key 16

From the same policy state as ``benchmarks/g1_policy_gradient.py`` (``--point initial`` or the run's
checkpoint) and its key ``fold_in(PRNGKey(seed), key)``: per estimator, the per-environment
actor-loss gradients' norms, the environments farthest from the batch mean, and the window's
trigger counts. Use it on a key where ``g1_policy_gradient.py --keys K`` reported a large
summed variance.
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
from common import (  # noqa: E402
    add_point_arguments,
    finite_rows,
    learner_state,
    restore_point,
    strong,
)

from bcg.learners import registry  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_point_arguments(p, point="checkpoint")
    p.add_argument("--bcg-params", default='{"tau": 981.22, "capacity": 12}')
    p.add_argument("--no-analytic", action="store_true", help="only bcg")
    p.add_argument("--top", type=int, default=4)
    a = p.parse_args(argv)
    print("command: python experiments/g1_jump/g1_gradient_outliers.py " + " ".join(sys.argv[1:]))
    run_dir = Path(a.run)
    run = json.loads((run_dir / "run.json").read_text())
    _, base = registry.build({**run, "estimator": "analytic", "estimator_params": {}})
    bcg_run = {**run, "estimator": "bcg", "estimator_params": json.loads(a.bcg_params)}
    learners = {} if a.no_analytic else {"analytic": base}
    learners["bcg"] = registry.build(bcg_run)[1]
    key = jax.random.PRNGKey(a.seed)
    state = restore_point(base, a, key)
    for name, lrn in learners.items():
        s = strong(learner_state(lrn, state, base, key))
        fn = jax.jit(lambda s, k, lrn=lrn: lrn.per_env_actor_gradients(s, k, return_stats=True))
        G, stats = fn(s, jax.random.fold_in(key, a.key))
        flat, ok = finite_rows(G)
        norms = np.linalg.norm(flat, axis=1)
        order = np.argsort(-np.sum((flat - flat.mean(0)) ** 2, 1))[: a.top]
        top = np.flatnonzero(ok)[order]  # environment indices of the farthest finite rows
        counts = {k: int(v) for k, v in stats._asdict().items()}
        print(
            f"{name}: nonfinite envs {int((~ok).sum())}, median gradient norm "
            f"{np.median(norms):.4g}; farthest envs {top.tolist()} with norms "
            f"{np.round(norms[order], 4).tolist()}; window env-steps {counts}",
            flush=True,
        )


if __name__ == "__main__":
    main()
