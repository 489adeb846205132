"""Probe (issue 43): SHAC iterations of the G1 jump recipe under different recomputation
policies of the rollout's backward pass (``bcg.learners.rollout.rollout(checkpoint=...)``), from
the same seed, compiled in one process and timed interleaved.

    python experiments/g1_throughput/remat_ab.py [--variants step,none,dots] [--iterations 4]
        [--num-envs 64] [--json OUT]

Variants: ``step`` (today: each control step recomputed in the backward pass), ``none`` (every
step's residuals stored by the forward pass), ``dots`` (``jax.checkpoint_policies.
dots_with_no_batch_dims_saveable``: matrix products stored, the rest recomputed). The same
mathematics: the metrics of each iteration are compared with the first variant's. Also prints
the process's peak resident memory after each variant's first iteration (the cost of storing).
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import time

import jax

POLICIES = {
    "step": True,
    "none": False,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "dots-any": jax.checkpoint_policies.dots_saveable,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--recipe", default="recipes/g1_jump.toml")
    p.add_argument("--estimator", default="analytic")
    p.add_argument("--variants", default="step,none")
    p.add_argument("--iterations", type=int, default=4)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    from bcg.cli.jax_setup import device_line, setup_jax

    setup_jax(False)
    from bcg.learners import harness, registry, shac
    from bcg.learners.recipe import recipe_options
    from bcg.learners.rollout import rollout

    print(device_line(), flush=True)
    names = a.variants.split(",")
    variants = {}
    for name in names:
        run, _ = prepare(a, recipe_options)
        _, learner = registry.build(run)
        state, _ = harness.compile_iteration(learner, learner.init(jax.random.PRNGKey(a.seed)))
        shac.rollout = functools.partial(rollout, checkpoint=POLICIES[name])
        t0 = time.perf_counter()
        try:
            compiled = jax.jit(learner.iteration).lower(state).compile()
        finally:
            shac.rollout = rollout
        jax.clear_caches()
        v = {"fn": compiled, "state": state, "compile_s": time.perf_counter() - t0}
        v.update(times=[], metrics=[], steps=learner.env_steps_per_iteration)
        variants[name] = v
        print(f"{name}: compile {v['compile_s']:.1f} s", flush=True)
    for i in range(a.iterations):
        for v in variants.values():
            t0 = time.perf_counter()
            v["state"], m = v["fn"](v["state"])
            jax.block_until_ready(v["state"])
            v["times"].append(time.perf_counter() - t0)
            v["metrics"].append({k: float(x) for k, x in jax.device_get(m).items()})
            if i == 0:
                v["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        ref = variants[names[0]]["metrics"][-1]
        line = [f"iteration {i}:"]
        for name, v in variants.items():
            m = v["metrics"][-1]
            worst = max(
                abs(ref[k] - m[k]) / max(abs(ref[k]), 1e-6) for k in ref if k in m and k != "time"
            )
            line.append(f"{name} {v['times'][-1]:.2f} s (metrics vs {names[0]}: {worst:.1e})")
        print(" ".join(line), flush=True)
    out = {"device": device_line(), "recipe": a.recipe, "num_envs": a.num_envs, "variants": {}}
    base = None
    for name, v in variants.items():
        ts = sorted(v["times"][1:] or v["times"])
        med = ts[len(ts) // 2]
        base = base or med
        out["variants"][name] = {
            "compile_s": v["compile_s"],
            "median_iteration_s": med,
            "env_steps_per_s": v["steps"] / med,
            "speedup_vs_first": base / med,
            "peak_rss_gb_after_first_iteration": v["peak_rss_gb"],
            "times": v["times"],
            "metrics": v["metrics"],
        }
        print(
            f"{name}: median {med:.2f} s per iteration, {v['steps'] / med:.1f} env-steps/s, "
            f"{base / med:.2f}x, peak RSS {v['peak_rss_gb']:.1f} GB"
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


def prepare(a, recipe_options):
    from bcg.learners.run_config import prepare_run

    return prepare_run(recipe_options(a.recipe, estimator=a.estimator, num_envs=a.num_envs))


if __name__ == "__main__":
    main()
