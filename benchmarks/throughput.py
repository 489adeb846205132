"""Training throughput: env-steps/s of ``bcg train``'s iteration per estimator, in one process.

For each estimator the learner of ``--task`` is built as ``bcg train`` builds it, its iteration is
compiled (timed separately) and run ``--warmup`` times, then ``--iterations`` more iterations
are timed. The estimators' timed iterations are interleaved round-robin, so that a load that
changes during the run hits all of them alike; the ratio to the first estimator is the number
to compare across machines.

    python benchmarks/throughput.py --task g1_jump --num-envs 64 --horizon 32 \
        --estimators analytic,bcg --iterations 5 [--param bcg.capacity=16] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="g1_jump")
    ap.add_argument("--stiffness", default="stiff")
    ap.add_argument("--learner", default="shac", choices=("shac", "bptt"))
    ap.add_argument("--estimators", default="analytic,bcg")
    ap.add_argument("--num-envs", type=int, default=64)
    ap.add_argument("--horizon", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=5, help="timed iterations per estimator")
    ap.add_argument("--warmup", type=int, default=1, help="untimed iterations after compiling")
    ap.add_argument("--param", action="append", default=[], help="EST.KEY=VALUE (repeatable)")
    ap.add_argument("--json", help="write the result here")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    a = parse(argv)
    from bcg.cli import _parse_stiffness, device_line
    from bcg.learners import harness, registry

    print(device_line(), flush=True)
    params: dict = {}
    for kv in a.param:
        k, v = kv.split("=", 1)
        ns, key = k.split(".", 1)
        try:
            v = json.loads(v)
        except json.JSONDecodeError:
            pass
        params.setdefault(ns, {})[key] = v
    names = [n for n in a.estimators.split(",") if n]
    runs = {}
    for name in names:  # build and compile every estimator's iteration first
        run = {
            "task": a.task,
            "stiffness": _parse_stiffness(a.stiffness),
            "learner": a.learner,
            "estimator": name,
            "estimator_params": params.get(name, {}),
            "iterations": 1000,
            "num_envs": a.num_envs,
            "horizon": a.horizon,
            "config": {},
        }
        registry.validate(run)
        _, learner = registry.build(run)
        t0 = time.perf_counter()
        state, step = harness.compile_iteration(learner, learner.init(jax.random.PRNGKey(0)))
        state, m = step(state)
        jax.block_until_ready(state)
        compile_s = time.perf_counter() - t0
        for _ in range(a.warmup):
            state, m = step(state)
        jax.block_until_ready(state)
        runs[name] = {
            "learner": learner,
            "state": state,
            "step": step,
            "compile_s": compile_s,
            "times": [],
            "metrics": [],
        }
        print(f"{name}: compile + first iteration {compile_s:.1f} s", flush=True)
    for _ in range(a.iterations):
        for name in names:
            r = runs[name]
            t0 = time.perf_counter()
            r["state"], m = r["step"](r["state"])
            jax.block_until_ready(r["state"])
            r["times"].append(time.perf_counter() - t0)
            r["metrics"].append({k: float(v) for k, v in jax.device_get(m).items()})
    out = {
        "device": device_line(),
        "task": a.task,
        "stiffness": a.stiffness,
        "num_envs": a.num_envs,
        "horizon": a.horizon,
        "estimators": {},
    }
    base = None
    for name in names:
        r = runs[name]
        t = sorted(r["times"])[len(r["times"]) // 2]
        sps = r["learner"].env_steps_per_iteration / t
        base = base or t
        ms = r["metrics"]
        res = {
            "median_iteration_s": t,
            "env_steps_per_s": sps,
            "time_ratio": t / base,
            "compile_s": r["compile_s"],
            "bundled_fraction": sum(m.get("bundled_fraction", 0.0) for m in ms) / len(ms),
            "masked_fraction": sum(m.get("masked_fraction", 0.0) for m in ms) / len(ms),
            "actor_skipped": sum(m.get("actor_skipped", 0.0) for m in ms),
            "overflow": sum(m.get("overflow", 0.0) for m in ms),
        }
        out["estimators"][name] = res
        print(
            f"{name:14s} {sps:9.1f} env-steps/s  (median iteration {t:.3f} s, {t / base:.2f}x "
            f"{names[0]}; bundled {res['bundled_fraction']:.1%}, masked "
            f"{res['masked_fraction']:.1%}, overflow {res['overflow']:.0f}, "
            f"skipped {res['actor_skipped']:.0f}/{len(ms)})",
            flush=True,
        )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
