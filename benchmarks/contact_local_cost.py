"""Contact-local cost of BCG: gradient time relative to analytic vs the fraction of env-steps
that bundle, for the naive per-environment select and for compaction into C slots.

A batch of E spheres: a chosen number of them are thrown at the floor (they hit it once and
trigger a bundle), the rest fly freely and never touch it. All timings are of the compiled
value-and-grad of the summed final heights w.r.t. the initial velocities, in the same run, calls
interleaved round-robin (median of ``--repeats``).

    python benchmarks/contact_local_cost.py [--envs 64] [--horizon 20] [--hits 0,2,6]
        [--capacity 0.25] [--variants compacted,compacted-remat,naive]

By default the slot count C is the number of hitting spheres (the best fixed C). With
``--capacity F`` it is the fraction F of the batch for every row (a user who does not know the
need in advance). Variants: ``compacted`` (C slots; their branches run in the phases in use,
:mod:`bcg.estimators.slots`), ``naive`` (C = E: every environment has a slot), each optionally
``-remat`` (physics recomputed on the backward pass). Every variant's gradient is checked equal
to the first one's.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

from bcg import estimators as E  # noqa: E402
from bcg.diagnostics.timing import interleaved_medians  # noqa: E402
from bcg.sim import load, make_data  # noqa: E402

XML = """<mujoco><option timestep="0.005"/><worldbody>
<geom type="plane" size="50 50 .1"/>
<body pos="0 0 1"><freejoint/><geom type="sphere" size=".1" mass="1"/></body>
</worldbody></mujoco>"""


def batch_data(sim, n_env, n_hit, seed=0):
    rng = np.random.default_rng(seed)
    qpos = np.tile(sim.mj_model.qpos0, (n_env, 1))
    qvel = np.zeros((n_env, 6))
    qpos[:, 2] = 3.0  # flying: high above the floor, moving up
    qvel[:, 2] = 1.0
    qpos[:n_hit, 2] = 0.1 + 0.05 + 0.02 * rng.random(n_hit)  # hitting: just above the floor
    qvel[:n_hit, 2] = -1.5
    qvel[:, 0] = 0.5
    tmpl = make_data(sim)
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n_env,) + x.shape), tmpl)
    return d.replace(qpos=jnp.asarray(qpos), qvel=jnp.asarray(qvel))


def compiled_grad(sim, est, d0, T):
    """Compiled value-and-grad of the summed final heights w.r.t. the initial velocities."""
    ctrls = jnp.zeros((T, d0.qpos.shape[0], 0))

    def loss(dv):
        dT, st = E.rollout(sim, est, d0.replace(qvel=d0.qvel + dv), ctrls, jax.random.PRNGKey(0))
        return jnp.sum(dT.qpos[:, 2]), st

    f = jax.jit(jax.value_and_grad(loss, has_aux=True))
    x = jnp.zeros_like(d0.qvel)
    t0 = time.perf_counter()
    (v, st), g = jax.block_until_ready(f(x))
    return (lambda: f(x)), time.perf_counter() - t0, st, np.asarray(g)


VARIANTS = ("compacted", "naive")


def make_variant(name, args, cap):
    base, _, suffix = name.partition("-")
    if base not in VARIANTS or suffix not in ("", "remat"):
        raise SystemExit(f"unknown variant {name!r}: one of {VARIANTS}, optionally with -remat")
    kw = {"num_branches": args.branches, "remat": suffix == "remat"}
    if base != "naive":
        kw["capacity"] = cap
    return E.make("bcg", **kw)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--horizon", type=int, default=20)
    ap.add_argument("--hits", default="0,2,6", help="comma list: envs thrown at the floor")
    ap.add_argument("--branches", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--capacity", type=float, default=None, help="slots as a batch fraction")
    ap.add_argument("--variants", default="compacted", help="comma list, see the docstring")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    print("command: python " + " ".join(sys.argv))
    sim = load(XML, stiffness="stiff", name="balls")
    env_steps = args.envs * args.horizon
    rows = []
    for n_hit in [int(h) for h in args.hits.split(",")]:
        d0 = batch_data(sim, args.envs, n_hit)
        f_an, c_an, st_an, _ = compiled_grad(sim, E.make("analytic"), d0, args.horizon)
        if args.capacity is None:
            cap = max(1, math.ceil(1.0 * n_hit))  # slots: the number of envs that hit at once
        else:
            cap = max(1, math.ceil(args.capacity * args.envs))
        fns = {"analytic": f_an}
        row = {
            "hitting_envs": n_hit,
            "stiff_fraction_analytic": float(np.sum(st_an.triggered)) / env_steps,
            "capacity": cap,
            "compile_analytic_s": c_an,
        }
        g0 = None
        for name in variants:
            f, c, st, g = compiled_grad(sim, make_variant(name, args, cap), d0, args.horizon)
            fns[name] = f
            g0 = g if g0 is None else g0
            row[f"compile_{name}_s"] = c
            row[f"max_abs_grad_diff_{name}"] = float(np.max(np.abs(g - g0)))
            row[f"nan_{name}"] = int(np.sum(~np.isfinite(g)))
            if name == variants[0]:
                row["triggered_fraction"] = float(np.sum(st.triggered)) / env_steps
                row["bundled_fraction"] = float(np.sum(st.bundled)) / env_steps
                row["overflow"] = int(np.sum(st.overflow))
        t = interleaved_medians(fns, args.repeats)
        for name in variants:
            row[f"ratio_{name}"] = t[name] / t["analytic"]
        rows.append(row)
        print(row, flush=True)
    print()
    print(
        "| hitting envs | triggered | bundled | slots C | overflow | "
        + " | ".join(f"{v} / analytic" for v in variants)
        + " |"
    )
    print("|---|---|---|---|---|" + "---|" * len(variants))
    for r in rows:
        print(
            f"| {r['hitting_envs']}/{args.envs} | {100 * r['triggered_fraction']:.1f}% | "
            f"{100 * r['bundled_fraction']:.1f}% | {r['capacity']} | {r['overflow']} | "
            + " | ".join(f"{r[f'ratio_{v}']:.2f}x" for v in variants)
            + " |"
        )


if __name__ == "__main__":
    main()
