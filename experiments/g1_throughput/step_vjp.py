"""Probe (issue 43): the forward and the backward pass of ONE control step of the G1 jump
recipe's batch, under variants of the backward's recomputation, in one process.

    python experiments/g1_throughput/step_vjp.py [--recipe recipes/g1_jump.toml] [--variants ...]

Loss: a fixed random projection of the next state's (qpos, qvel); gradient with respect to the
batch's (qpos, qvel, ctrl). Variants (the same mathematics, different programs):
  fwd        the step alone
  ckpt       grad through jax.checkpoint(step) (what the rollout does per control step)
  plain      grad without the checkpoint (residuals stored by the forward pass)
XLA options go in through XLA_FLAGS (run the script once per setting).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--recipe", default="recipes/g1_jump.toml")
    p.add_argument("--task", default=None, help="a registered task instead of the recipe")
    p.add_argument("--estimator", default="analytic")
    p.add_argument("--variants", default="fwd,ckpt,plain")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None)
    p.add_argument("--trace", default=None, help="write a perfetto trace of one call per variant")
    a = p.parse_args()
    from bcg.cli.jax_setup import setup_jax

    setup_jax(False)  # float32 and the persistent compile cache, as `bcg train`
    from bcg.learners import registry
    from bcg.learners.recipe import recipe_options
    from bcg.learners.run_config import prepare_run

    if a.task:
        run = {
            "task": a.task,
            "stiffness": "stiff",
            "learner": "shac",
            "iterations": 1,
            "estimator": a.estimator,
            "estimator_params": {},
            "num_envs": a.num_envs,
            "horizon": 32,
            "config": {},
        }
    else:
        run, _ = prepare_run(recipe_options(a.recipe, estimator=a.estimator, num_envs=a.num_envs))
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

    def step(qpos, qvel, u, carry):
        new, _ = est.step(sim, carry.replace(qpos=qpos, qvel=qvel), u, key)
        d = est.state(new)
        return jnp.sum(wq * d.qpos) + jnp.sum(wv * d.qvel)

    progs = {
        "fwd": jax.jit(step),
        "ckpt": jax.jit(jax.grad(jax.checkpoint(step), argnums=(0, 1, 2))),
        "plain": jax.jit(jax.grad(step, argnums=(0, 1, 2))),
    }
    args = (data.qpos, data.qvel, ctrl, carry)
    out = {"xla_flags": os.environ.get("XLA_FLAGS", ""), "num_envs": E, "variants": {}}
    for name in a.variants.split(","):
        f = progs[name]
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        comp = time.perf_counter() - t0
        ts = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            r = jax.block_until_ready(f(*args))
            ts.append(time.perf_counter() - t0)
        med = sorted(ts)[len(ts) // 2]
        if a.trace:
            with jax.profiler.trace(f"{a.trace}/{name}", create_perfetto_trace=True):
                jax.block_until_ready(f(*args))
        finite = all(bool(jnp.isfinite(x).all()) for x in jax.tree_util.tree_leaves(r))
        out["variants"][name] = {"compile_s": comp, "median_s": med, "finite": finite}
        print(
            f"{name:6s} compile+first {comp:7.1f} s  median {med * 1e3:8.1f} ms  finite {finite}",
            flush=True,
        )
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
