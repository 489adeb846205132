"""Probe (issue 43): how long tracing the G1 jump recipe's SHAC iteration takes, and how large
its program is, before XLA compiles it (the compile itself is not run).

    python experiments/g1_throughput/trace_size.py [--estimator analytic|bcg] [--run RUN_JSON]

Builds the learner of a recorded run (default: the committed stiff-bcg arm of the recipe; with
``--estimator analytic`` the same run with the plain step), then times ``jax.make_jaxpr`` of
one iteration (tracing and the autodiff transforms), counts the equations of the jaxpr with
every sub-jaxpr (scan and cond bodies, custom rules), and times ``jax.jit(...).lower`` (tracing
again plus the conversion to StableHLO) and the size of the lowered text.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
from jax.extend import core as jcore

from bcg.learners import registry

RUN = "results/g1/jump_in_progress/stiff-bcg/seed0/run.json"


def count_equations(jaxpr) -> int:
    """Equations of ``jaxpr`` and of every jaxpr in its equations' parameters."""
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                if isinstance(sub, jcore.ClosedJaxpr):
                    n += count_equations(sub.jaxpr)
                elif isinstance(sub, jcore.Jaxpr):
                    n += count_equations(sub)
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", default=RUN, help="run.json of a recorded run")
    ap.add_argument("--estimator", choices=("analytic", "bcg"), default="bcg")
    args = ap.parse_args()
    run = json.loads(open(args.run).read())
    if args.estimator == "analytic":
        run["estimator"], run["estimator_params"] = "analytic", {}
        run["resolved"]["estimator"] = {"backward_armature": None, "env_clip": None}
    _, learner = registry.build(run)
    state = learner.init(jax.random.PRNGKey(0))
    t = time.perf_counter()
    jaxpr = jax.make_jaxpr(learner.iteration)(state)
    trace_s = time.perf_counter() - t
    t = time.perf_counter()
    lowered = jax.jit(learner.iteration).lower(state)
    lower_s = time.perf_counter() - t
    out = {
        "estimator": args.estimator,
        "trace_s": round(trace_s, 1),
        "equations": count_equations(jaxpr.jaxpr),
        "trace_and_lower_s": round(lower_s, 1),
        "stablehlo_chars": len(lowered.as_text()),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
