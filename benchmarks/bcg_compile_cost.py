"""Compile time and run time of a rollout gradient, analytic vs bcg, on a built-in task.

    python benchmarks/bcg_compile_cost.py --task hopper --batch 16 --horizon 50 --json

For each estimator: seconds to lower and compile ``jax.grad`` of a rollout loss (the sum of the
final positions and velocities) over ``--horizon`` control steps of ``--batch`` environments
from the task's initial states under its nominal controls, and the median seconds of the
compiled call (``--repeats`` rounds, estimators interleaved), with the bundled and overflow
env-step counts of the rollout. Ratios are bcg over analytic, measured in the same process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bcg import estimators as E
from bcg import sim as bs
from bcg.envs import tasks


def gradient_function(sim, est):
    def loss(dv, d0, ctrls, key):
        dT, st = E.rollout(sim, est, d0.replace(qvel=d0.qvel + dv), ctrls, key)
        return jnp.sum(dT.qpos) + jnp.sum(dT.qvel), st

    return jax.jit(jax.grad(loss, has_aux=True))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="hopper")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--horizon", type=int, default=50)
    p.add_argument("--stiffness", default="stiff")
    p.add_argument("--bcg-params", default="{}", help="JSON keywords of the bcg estimator")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", default=None, help="also write the JSON here")
    a = p.parse_args(argv)
    log = sys.stderr if a.json else sys.stdout
    task = tasks.get(a.task)
    sim = task.load(stiffness=a.stiffness)
    q, v = task.initial_states(sim, a.batch)
    tmpl = bs.make_data(sim)
    d0 = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (a.batch,) + x.shape), tmpl)
    d0 = d0.replace(qpos=jnp.asarray(q, d0.qpos.dtype), qvel=jnp.asarray(v, d0.qvel.dtype))
    u = np.asarray(task.nominal_controls(sim))[: a.horizon]
    ctrls = jnp.asarray(np.broadcast_to(u[:, None], (a.horizon, a.batch, u.shape[-1])))
    key = jax.random.PRNGKey(0)
    args = (jnp.zeros_like(d0.qvel), d0, ctrls, key)
    ests = {"analytic": E.make("analytic"), "bcg": E.make("bcg", **json.loads(a.bcg_params))}
    compiled, out = {}, {}
    for name, est in ests.items():
        t0 = time.perf_counter()
        compiled[name] = gradient_function(sim, est).lower(*args).compile()
        out[name] = {"compile_seconds": time.perf_counter() - t0, "seconds": []}
        print(f"{name}: compile {out[name]['compile_seconds']:.1f} s", file=log, flush=True)
    for r in range(a.repeats + 1):
        for name, fn in compiled.items():
            t0 = time.perf_counter()
            g, st = jax.block_until_ready(fn(*args))
            if r:
                out[name]["seconds"].append(time.perf_counter() - t0)
            out[name]["bundled"] = int(np.sum(st.bundled))
            out[name]["overflow"] = int(np.sum(st.overflow))
            out[name]["finite"] = bool(np.all(np.isfinite(np.asarray(g))))
    for name in out:
        out[name]["median_seconds"] = statistics.median(out[name]["seconds"])
    result = {
        "settings": vars(a),
        "estimators": out,
        "compile_ratio": out["bcg"]["compile_seconds"] / out["analytic"]["compile_seconds"],
        "time_ratio": out["bcg"]["median_seconds"] / out["analytic"]["median_seconds"],
        "bundled_fraction": out["bcg"]["bundled"] / (a.batch * a.horizon),
    }
    print(
        f"{a.task}: compile {result['compile_ratio']:.2f}x, run {result['time_ratio']:.2f}x, "
        f"bundled {result['bundled_fraction']:.3f}, overflow {out['bcg']['overflow']}",
        file=log,
    )
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(result, indent=1))
    if a.json:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
