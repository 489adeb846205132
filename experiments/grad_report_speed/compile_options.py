"""XLA compile time and run time of the `bcg grad` gradient program under compiler options.
One question (issue 42, part 3): which options cut a cold compile, at what run-time cost.

    python experiments/grad_report_speed/compile_options.py MODEL.xml --estimator bcg
"""

import argparse
import json
import tempfile
import time

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="bcg_cold_cache_"))

import numpy as np  # noqa: E402

from bcg import estimators as E  # noqa: E402
from bcg.diagnostics import chunking  # noqa: E402
from bcg.diagnostics import report as R  # noqa: E402
from bcg.sim import load  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--estimator", default="analytic")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--horizon", type=int, default=20)
    p.add_argument("--options", default='[{}, {"xla_backend_optimization_level": 0}]')
    a = p.parse_args()
    sim = load(a.model, stiffness="stiff")
    prob = R.make_problem(sim, batch=a.batch, horizon=a.horizon)
    est = E.make(a.estimator)
    g = R.gradient_function(prob, est)
    size = min(a.batch, chunking.chunk_size_for(est))
    call = (
        sim.mjx_model,
        np.asarray(prob.qpos0)[:size],
        np.asarray(prob.qvel0)[:size],
        jax.numpy.asarray(prob.ctrl),
        jax.random.PRNGKey(0),
        np.uint32(0),
    )
    t = time.perf_counter()
    low = g.lower(*call)
    print(f"{a.estimator}: trace + lower {time.perf_counter() - t:.1f} s", flush=True)
    ref = None
    for opts in json.loads(a.options):
        t = time.perf_counter()
        comp = low.compile(compiler_options=opts or None)
        tc = time.perf_counter() - t
        G = np.asarray(jax.block_until_ready(comp(*call))[0])
        t = time.perf_counter()
        jax.block_until_ready(comp(*call))
        tr = time.perf_counter() - t
        diff = 0.0 if ref is None else float(np.max(np.abs(G - ref)) / np.max(np.abs(ref)))
        ref = G if ref is None else ref
        print(
            f"  {opts}: XLA compile {tc:.1f} s, run {tr:.3f} s, max rel diff {diff:.2e}", flush=True
        )


if __name__ == "__main__":
    main()
