"""Probe (issue 43): SHAC iterations of the G1 jump recipe with MJX's own mass-matrix and
Newton-Hessian solves ("before") and with :func:`bcg.sim.spd_solve.spd_solve` ("after"), from
the same seed, compiled in one process and timed interleaved.

    python experiments/g1_throughput/spd_solve_ab.py [--recipe recipes/g1_jump.toml]
        [--iterations 4] [--num-envs 64] [--json OUT]

Prints per variant: compile time, median seconds per iteration, env-steps/s, and per iteration
the largest relative difference of the metrics between the variants (the same mathematics:
only rounding may differ).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import jax


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--recipe", default="recipes/g1_jump.toml")
    p.add_argument("--estimator", default="analytic")
    p.add_argument("--iterations", type=int, default=4)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    from bcg.cli.jax_setup import device_line, setup_jax

    setup_jax(False)
    from bcg.learners import harness, registry
    from bcg.learners.recipe import recipe_options
    from bcg.learners.run_config import prepare_run
    from bcg.sim import mjx_compat, step
    from bcg.sim.solver import scan_solve

    print(device_line(), flush=True)

    @contextlib.contextmanager
    def mjx_linear_solves():  # the code before the change: only the solver loop swapped
        new = step.differentiable_solver
        step.differentiable_solver = lambda: mjx_compat.solver_replaced(scan_solve)
        try:
            yield
        finally:
            step.differentiable_solver = new

    variants = {}
    for name, ctx in (("before", mjx_linear_solves), ("after", contextlib.nullcontext)):
        run, _ = prepare_run(recipe_options(a.recipe, estimator=a.estimator, num_envs=a.num_envs))
        _, learner = registry.build(run)
        state, _ = harness.compile_iteration(learner, learner.init(jax.random.PRNGKey(a.seed)))
        t0 = time.perf_counter()
        with ctx():
            compiled = jax.jit(learner.iteration).lower(state).compile()
        jax.clear_caches()  # nothing traced under one variant is reused by the other
        variants[name] = {
            "fn": compiled,
            "state": state,
            "compile_s": time.perf_counter() - t0,
            "times": [],
            "metrics": [],
            "steps": learner.env_steps_per_iteration,
        }
        print(f"{name}: compile {variants[name]['compile_s']:.1f} s", flush=True)
    for i in range(a.iterations):
        for v in variants.values():
            t0 = time.perf_counter()
            v["state"], m = v["fn"](v["state"])
            jax.block_until_ready(v["state"])
            v["times"].append(time.perf_counter() - t0)
            v["metrics"].append({k: float(x) for k, x in jax.device_get(m).items()})
        b, f = variants["before"]["metrics"][-1], variants["after"]["metrics"][-1]
        worst = max(
            (abs(b[k] - f[k]) / max(abs(b[k]), 1e-6), k) for k in b if k in f and k != "time"
        )
        print(
            f"iteration {i}: before {variants['before']['times'][-1]:.2f} s, after "
            f"{variants['after']['times'][-1]:.2f} s; largest relative metric difference "
            f"{worst[0]:.2e} ({worst[1]})",
            flush=True,
        )
    out = {"device": device_line(), "recipe": a.recipe, "num_envs": a.num_envs}
    for name, v in variants.items():
        ts = sorted(v["times"][1:] or v["times"])
        med = ts[len(ts) // 2]
        out[name] = {
            "compile_s": v["compile_s"],
            "median_iteration_s": med,
            "env_steps_per_s": v["steps"] / med,
            "times": v["times"],
            "metrics": v["metrics"],
        }
        print(f"{name}: median {med:.2f} s per iteration, {v['steps'] / med:.1f} env-steps/s")
    ratio = out["before"]["median_iteration_s"] / out["after"]["median_iteration_s"]
    print(f"speed-up {ratio:.2f}x")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
