"""Probe (issue 43): SHAC iterations of the G1 jump recipe with the physics' backward pass as it
was before issue 43 and as it is now, from the same seed, compiled in one process and timed
interleaved. Variants (``--variants``, the first is the reference):

* ``mjx-solves``: MJX's own mass-matrix and Newton-Hessian solves, the line search
  differentiated through its iterations (the code before issue 43);
* ``spd-solves``: :func:`bcg.sim.spd_solve.spd_solve` for those solves, the line search still
  differentiated through (commit 628dd22);
* ``today``: today's :func:`bcg.sim.solver.differentiable_solver` (spd solves, the line search
  out of the reverse pass with its step differentiated implicitly).

    python experiments/g1_throughput/spd_solve_ab.py [--recipe recipes/g1_jump.toml]
        [--iterations 4] [--num-envs 64] [--variants mjx-solves,today] [--json OUT]

Prints per variant: compile time, median seconds per iteration (iterations after the first),
env-steps/s, its speed-up over the first variant, and per iteration the largest relative
difference of the metrics from the first variant (the same mathematics: only rounding, and
the line search's tolerance, may differ).
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
    p.add_argument("--variants", default="mjx-solves,today")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    from bcg.cli.jax_setup import device_line, setup_jax

    setup_jax(False)
    from bcg.learners import harness, registry
    from bcg.learners.recipe import recipe_options
    from bcg.learners.run_config import prepare_run
    from bcg.sim import mjx_compat, solver, step

    print(device_line(), flush=True)

    def swapped(*args, **kw):  # step.differentiable_solver replaced while a variant is traced
        @contextlib.contextmanager
        def ctx():
            today = step.differentiable_solver
            step.differentiable_solver = lambda: mjx_compat.solver_replaced(*args, **kw)
            try:
                yield
            finally:
                step.differentiable_solver = today

        return ctx

    through = solver.scan_solve  # MJX's line search, differentiated through its iterations
    contexts = {
        "mjx-solves": swapped(through),
        "spd-solves": swapped(
            through, solve_m=solver.solve_m, update_gradient=solver.update_gradient
        ),
        "today": contextlib.nullcontext,
    }
    names = a.variants.split(",")
    unknown = [n for n in names if n not in contexts]
    if unknown or len(names) < 2:
        p.error(f"--variants: two or more of {', '.join(contexts)}; got {a.variants!r}")
    variants = {}
    for name in names:
        ctx = contexts[name]
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
        ref = variants[names[0]]["metrics"][-1]
        line = []
        for name in names[1:]:
            got = variants[name]["metrics"][-1]
            worst = max(
                (abs(ref[k] - got[k]) / max(abs(ref[k]), 1e-6), k)
                for k in ref
                if k in got and k != "time"
            )
            line.append(f"{name} vs {names[0]}: {worst[0]:.2e} ({worst[1]})")
        times = ", ".join(f"{n} {variants[n]['times'][-1]:.2f} s" for n in names)
        print(f"iteration {i}: {times}; largest relative metric difference: {'; '.join(line)}")
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
    for name in names[1:]:
        ratio = out[names[0]]["median_iteration_s"] / out[name]["median_iteration_s"]
        out[name]["speedup_vs_" + names[0]] = ratio
        print(f"{name}: {ratio:.2f}x {names[0]}'s speed")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
