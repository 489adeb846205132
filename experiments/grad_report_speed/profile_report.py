"""Where the time of a cold `bcg grad --model` report goes: reference, trace/lower, XLA compile,
run, per estimator. One question (issue 42, part 3); not a documented tool.

    python experiments/grad_report_speed/profile_report.py MODEL.xml [--batch 16 --horizon 20]
"""

import argparse
import tempfile
import time

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="bcg_cold_cache_"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

import numpy as np  # noqa: E402

from bcg import estimators as E  # noqa: E402
from bcg.diagnostics import chunking  # noqa: E402
from bcg.diagnostics import report as R  # noqa: E402
from bcg.sim import load  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--horizon", type=int, default=20)
    p.add_argument("--estimators", default="analytic,bcg")
    p.add_argument("--no-reference", action="store_true")
    a = p.parse_args()
    t = time.perf_counter()
    sim = load(a.model, stiffness="stiff")
    prob = R.make_problem(sim, batch=a.batch, horizon=a.horizon)
    print(f"load + problem {time.perf_counter() - t:.1f} s", flush=True)
    if not a.no_reference:
        t = time.perf_counter()
        R.problem_reference(prob)
        print(f"reference {time.perf_counter() - t:.1f} s", flush=True)
    args = (
        sim.mjx_model,
        np.asarray(prob.qpos0),
        np.asarray(prob.qvel0),
        jax.numpy.asarray(prob.ctrl),
        jax.random.PRNGKey(0),
    )
    for name in a.estimators.split(","):
        est = E.make(name)
        g = R.gradient_function(prob, est)
        size = chunking.chunk_size_for(est)
        q, v = args[1][:size], args[2][:size]
        call = (args[0], q, v, args[3], args[4], np.uint32(0))
        t = time.perf_counter()
        tr = g.trace(*call)
        t1 = time.perf_counter()
        low = tr.lower()
        t2 = time.perf_counter()
        comp = low.compile()
        t3 = time.perf_counter()
        jax.block_until_ready(comp(*call))
        t4 = time.perf_counter()
        jax.block_until_ready(comp(*call))
        t5 = time.perf_counter()
        n_ops = low.as_text().count("\n")
        print(
            f"{name}: chunk {size}, trace {t1 - t:.1f} s, lower {t2 - t1:.1f} s, "
            f"XLA compile {t3 - t2:.1f} s, first run {t4 - t3:.1f} s, run {t5 - t4:.2f} s, "
            f"StableHLO lines {n_ops}",
            flush=True,
        )


if __name__ == "__main__":
    main()
