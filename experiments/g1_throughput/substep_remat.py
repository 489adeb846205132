"""Probe (issue 43): is one control step's gradient of the G1 jump recipe's batch faster when the
backward pass also recomputes inside the step (nested remat), in one process?

    python experiments/g1_throughput/substep_remat.py [--repeats 5] [--json OUT]

Variants, each ``grad(jax.checkpoint(step))`` as the rollout differentiates a control step:
  ckpt       today: the control step recomputed, its substeps' residuals stored
  substeps   also each physics substep checkpointed (the substep scan's body)
  scans      every scan body traced inside the step checkpointed (substeps, solver
             iterations, line search)
The same mathematics: the gradients are compared with ``ckpt``'s.
"""

from __future__ import annotations

import argparse
import json
import time
import types

import jax
import jax.numpy as jnp


class _JaxWithRematScan:
    """``jax`` as seen by a module whose ``jax.lax.scan`` bodies are checkpointed."""

    def __init__(self):
        lax = types.SimpleNamespace(**{k: getattr(jax.lax, k) for k in dir(jax.lax) if k[0] != "_"})
        lax.scan = lambda f, *a, **k: jax.lax.scan(jax.checkpoint(f), *a, **k)
        self.lax = lax

    def __getattr__(self, name):
        return getattr(jax, name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--recipe", default="recipes/g1_jump.toml")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--variants", default="ckpt,substeps,scans")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    from bcg.cli.jax_setup import setup_jax

    setup_jax(False)
    from bcg.learners import registry
    from bcg.learners.recipe import recipe_options
    from bcg.learners.run_config import prepare_run
    from bcg.sim import step as step_module
    from bcg.sim.mjx_compat import solver_internals

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

    patched = _JaxWithRematScan()
    modules = {
        "ckpt": [],
        "substeps": [step_module],
        "scans": [step_module, solver_internals],
    }
    args = (data.qpos, data.qvel, ctrl, carry)
    out, ref = {"num_envs": E, "variants": {}}, None
    for name in a.variants.split(","):
        saved = [(m, m.jax) for m in modules[name]]
        for m in modules[name]:
            m.jax = patched
        jax.clear_caches()
        try:
            f = jax.jit(jax.grad(jax.checkpoint(make_step()), argnums=(0, 1, 2)))
            t0 = time.perf_counter()
            g = jax.block_until_ready(f(*args))
            comp = time.perf_counter() - t0
        finally:
            for m, j in saved:
                m.jax = j
        ts = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(f(*args))
            ts.append(time.perf_counter() - t0)
        med = sorted(ts)[len(ts) // 2]
        ref = ref or g
        diff = max(
            float(jnp.max(jnp.abs(x - y)) / jnp.maximum(jnp.max(jnp.abs(y)), 1e-12))
            for x, y in zip(g, ref, strict=True)
        )
        out["variants"][name] = {"compile_s": comp, "median_s": med, "max_rel_diff": diff}
        print(f"{name:9s} compile {comp:6.1f} s  median {med * 1e3:7.1f} ms  vs ckpt {diff:.1e}")
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
