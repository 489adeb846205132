"""Probe (issue 43): one control step's gradient of the G1 jump recipe's batch with the solver's
line search differentiated through its iterations, or left out of the backward pass
(:func:`bcg.sim.solver.fixed_step_linesearch`: the step's derivative by the implicit function
theorem, the default since this probe, or a frozen step), in one process.

    python experiments/g1_throughput/linesearch_backward.py [--repeats 5] [--json OUT]

Each variant is ``value_and_grad(jax.checkpoint(step))`` as the rollout differentiates a control
step, at the recipe's settings (64 envs, 4 solver iterations), all compiled first and then timed
interleaved. Reports compile time, the median time of the gradient, the forward value's
difference (0: the forward pass is MJX's) and the gradient's largest difference relative to
the first variant's.
"""

from __future__ import annotations

import argparse
import functools
import json
import time

import jax
import jax.numpy as jnp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--recipe", default="recipes/g1_jump.toml")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--variants", default="exact,implicit,frozen")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    from bcg.cli.jax_setup import setup_jax

    setup_jax(False)
    from bcg.learners import registry
    from bcg.learners.recipe import recipe_options
    from bcg.learners.run_config import prepare_run
    from bcg.sim import solver

    run, _ = prepare_run(recipe_options(a.recipe, estimator="analytic", num_envs=a.num_envs))
    _, learner = registry.build(run)
    state = learner.init(jax.random.PRNGKey(0))
    est, sim = learner.estimator, learner.env.sim
    carry = state.env.carry
    data = est.state(carry)
    E = data.qpos.shape[0]
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(1), 3)
    ctrl = 0.1 * jax.random.normal(k1, (E, sim.mj_model.nu), data.qpos.dtype)
    wq = jax.random.normal(k2, data.qpos.shape, data.qpos.dtype)
    wv = jax.random.normal(k3, data.qvel.shape, data.qvel.dtype)
    key = jax.random.PRNGKey(2)

    def make_step():  # a new function per variant: nothing traced under one is reused
        def step(qpos, qvel, u, carry):
            new, _ = est.step(sim, carry.replace(qpos=qpos, qvel=qvel), u, key)
            d = est.state(new)
            return jnp.sum(wq * d.qpos) + jnp.sum(wv * d.qvel)

        return step

    frozen = functools.partial(solver.fixed_step_linesearch, implicit=False)
    solves = {
        "exact": lambda m, d: solver.scan_solve(m, d),  # MJX's line search, differentiated
        "implicit": solver.scan_solve_fixed_step,  # today's default
        "frozen": lambda m, d: solver.scan_solve(m, d, linesearch=frozen),
    }
    default = solver.scan_solve_fixed_step

    args = (data.qpos, data.qvel, ctrl, carry)
    out, ref, compiled = {"num_envs": E, "variants": {}}, None, {}
    names = a.variants.split(",")
    for name in names:  # compile each variant (the solver swapped in while it is traced)
        solver.scan_solve_fixed_step = solves[name]
        jax.clear_caches()
        try:
            f = jax.jit(jax.value_and_grad(jax.checkpoint(make_step()), argnums=(0, 1, 2)))
            t0 = time.perf_counter()
            v, g = jax.block_until_ready(f(*args))
            compiled[name] = (f, v, g, time.perf_counter() - t0)
        finally:
            solver.scan_solve_fixed_step = default
    times = {name: [] for name in names}
    for _ in range(a.repeats):  # interleaved, so that both meet the same load
        for name in names:
            t0 = time.perf_counter()
            jax.block_until_ready(compiled[name][0](*args))
            times[name].append(time.perf_counter() - t0)
    for name in names:
        f, v, g, comp = compiled[name]
        ts = times[name]
        med = sorted(ts)[len(ts) // 2]
        ref = ref or (v, g)
        dv = float(jnp.abs(v - ref[0]))
        diff = [
            float(jnp.max(jnp.abs(x - y)) / jnp.maximum(jnp.max(jnp.abs(y)), 1e-12))
            for x, y in zip(g, ref[1], strict=True)
        ]
        flat = jnp.concatenate([x.ravel() for x in g]).astype(jnp.float64)
        flat_ref = jnp.concatenate([x.ravel() for x in ref[1]]).astype(jnp.float64)
        cos = float(flat @ flat_ref / (jnp.linalg.norm(flat) * jnp.linalg.norm(flat_ref)))
        out["variants"][name] = {
            "compile_s": comp,
            "median_s": med,
            "times_s": ts,
            "value_diff": dv,
            "grad_max_rel_diff": {"qpos": diff[0], "qvel": diff[1], "ctrl": diff[2]},
            "grad_cosine": cos,
        }
        print(
            f"{name:8s} compile {comp:6.1f} s  median {med * 1e3:7.1f} ms  value diff {dv:.1e}  "
            f"grad rel diff qpos {diff[0]:.1e} qvel {diff[1]:.1e} ctrl {diff[2]:.1e} cos {cos:.7f}",
            flush=True,
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
