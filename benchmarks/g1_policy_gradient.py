"""The paper's gradient metric and the cost of BCG on the G1 jump, analytic vs bcg, same states.

    python benchmarks/g1_policy_gradient.py --json

For each measured policy (``initial``: a fresh SHAC state; ``checkpoint-N``: a SHAC run's
checkpoint, by default the newest of :data:`DEFAULT_RUN`, iteration 50 of an analytic SHAC
run of g1_jump, stiff, 64 x 32; :data:`JUMP_RUN`'s, iteration 20, is the trained jumping
policy ``results/g1/A_stage29_ff1`` after a 20-iteration critic warm-up with the actor held)
and each estimator (``analytic`` and ``bcg``, built from the run's settings; bcg by default
with 12 slots, tau = 3 x the robot's weight and ``env_clip=3``, the G1 setting that
docs/reports/legged_bcg.md recommends; ``--tau-weights``, ``--bcg-params``):

* ``summed_variance``: sum over the actor parameters of the variance across the 64 environments
  of the per-environment SHAC actor-loss gradients d L_e / d theta (one window of 32 steps from
  the policy's environment states, same key for both estimators), with a bootstrap 95% interval
  (:meth:`bcg.learners.shac.SHAC.per_env_actor_gradients`, one stacked reverse pass);
* ``seconds_per_iteration`` (``--timing iteration``): median wall time of a full SHAC iteration
  (actor window forward and backward, critic update) from the same state, the estimators
  interleaved (``--repeats`` rounds), after compilation; ``compile_seconds``: the first call;
  or ``seconds_per_gradient`` (``--timing gradient``): the same for the actor-window gradient
  pass alone (the per-environment gradients), which skips compiling the iterations;
* with ``--keys K``, ``summed_variance_per_key`` and ``summed_variance_median``: the same
  metric from the same states with K keys (the first is ``summed_variance``'s), and
  ``summed_variance_pooled`` (with its bootstrap interval): the metric over all K x 64
  per-environment gradients as one sample; ``pooled_mean_norm`` and
  ``pooled_mean_cosine_to_analytic``: the norm of those gradients' mean and its cosine to
  analytic's (a variance cut that also shrinks or turns the mean gradient is a bias);
  ``relative_variance_pooled``: the pooled summed variance over the squared norm of the
  pooled mean, which a gradient that is only scaled down does not lower;
  ``variance_decomposition``: the per-key summed variance split into ``between`` (the spread
  of the states' draw-averaged gradients: what no averaging within a state removes) and
  ``within`` (the draws' part), :func:`bcg.diagnostics.report.variance_decomposition`;
  ``summed_variance_of_draw_means``: for M = 2, 3, 4, 6, the metric when every state's
  gradient is the mean over M draws (disjoint groups of M keys, averaged over the groups);
* ``bundled_fraction`` / ``triggered_fraction`` / ``overflow`` of the window (for ``analytic``:
  the env-steps that would trigger at the plain step's own ``tau="auto"``, not bcg's tau);
  ``gradient_compile_seconds``: compile + first gradient (at the first point; a later point
  reuses the compiled function; with the persistent compilation cache on, a cached executable
  is only loaded: ``--no-compile-cache``);
* with ``--extra '{"label": ["estimator", {params}], ...}'``, further estimators measured
  from the same states like the two above (not timed), e.g. ``analytic`` with ``env_clip``;
* with ``--soft-floor``, ``analytic_soft``: the analytic gradient from the same states on soft
  contact, the variance of a smooth model's gradients (not timed).

Prints a table and, with ``--json``, the JSON ``{"points": [...], "settings": ...}`` on stdout
(also written to ``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import learner_state  # noqa: E402

from bcg.diagnostics.report import (  # noqa: E402
    bootstrap_interval,
    cosine,
    summed_variance,
    variance_decomposition,
)
from bcg.learners import harness, registry  # noqa: E402

# 12 slots x B = 10 branches: at most 2 phases of 64 states per step; with tau at 3 x the
# robot's weight (--tau-weights) the G1 jump needs at most 10 bundles per step
# (results/g1_policy_gradient/trigger_loads.json), so nothing overflows; env_clip = 3 holds
# each environment's backward cotangent to 3 x the batch median (the bundles alone leave the
# G1's diverging environments, docs/reports/legged_bcg.md)
DEFAULT_BCG = {"capacity": 12, "env_clip": 3.0}
# SHAC checkpoints kept in the repository, so that the metric runs on a fresh clone
DEFAULT_RUN = "results/g1/shac_checkpoints/analytic_it50"
JUMP_RUN = "results/g1/shac_checkpoints/A_jump_critic20"


def _strong(tree):
    """Arrays with strong dtypes, so that a fresh and a restored state trace alike (a weakly
    typed scalar in one of them would compile the functions again)."""

    def one(x):
        if not hasattr(x, "dtype") or jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return x
        return jax.numpy.asarray(np.asarray(x), dtype=x.dtype)

    return jax.tree_util.tree_map(one, tree)


def _with_action_std(state, std: float):
    """``state`` whose actor's log_std vector is log(std) in every action dimension."""
    if not (std > 0 and np.isfinite(std)):
        raise SystemExit(f"--action-std must be a finite number > 0, got {std}")
    params = dict(state.actor["params"])
    params["log_std"] = jax.numpy.full_like(params["log_std"], np.log(std))
    return dataclasses.replace(state, actor={**state.actor, "params": params})


def _flat(G):
    leaves = jax.tree_util.tree_leaves(G)
    return np.concatenate([np.asarray(x, np.float64).reshape(x.shape[0], -1) for x in leaves], 1)


def _finite_rows(G):
    """(rows of the flattened per-environment gradients that are finite, their mask)."""
    flat = _flat(G)
    ok = np.all(np.isfinite(flat), 1)
    return flat[ok], ok


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", default=DEFAULT_RUN, help="SHAC run directory")
    p.add_argument("--checkpoint", type=int, help="its checkpoint iteration (default: the newest)")
    p.add_argument("--points", default="initial,checkpoint", help="initial and/or checkpoint")
    p.add_argument(
        "--bcg-params", default=json.dumps(DEFAULT_BCG), help="JSON keywords of the bcg estimator"
    )
    p.add_argument(
        "--tau-weights",
        type=float,
        default=3.0,
        help="bcg trigger threshold in multiples of the robot's weight, unless --bcg-params "
        "sets tau",
    )
    p.add_argument("--repeats", type=int, default=3, help="interleaved timing rounds")
    p.add_argument(
        "--timing",
        choices=("iteration", "gradient"),
        default="iteration",
        help="time a full SHAC iteration, or only the actor-window gradient pass",
    )
    p.add_argument(
        "--soft-floor",
        action="store_true",
        help="also the analytic gradient on soft contact from the same states (a smooth model's "
        "variance, not timed)",
    )
    p.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="compile from scratch (the compile seconds are then comparable)",
    )
    p.add_argument(
        "--extra",
        default="{}",
        help='JSON {"label": ["estimator", {params}]}: further estimators measured (not timed)',
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--keys",
        type=int,
        default=1,
        help="also the summed variance with K-1 further keys from the same states (heavy-tailed "
        "estimators vary by orders of magnitude between draws): per key and the median",
    )
    p.add_argument(
        "--action-std",
        type=float,
        default=None,
        help="measure with the policy's exploration noise set to this pre-squash standard "
        "deviation (every action dimension), instead of the checkpoint's learned one",
    )
    p.add_argument("--json", action="store_true", help="print the JSON result on stdout")
    p.add_argument("--out", default="results/g1_policy_gradient/g1_policy_gradient.json")
    a = p.parse_args(argv)
    log = sys.stderr if a.json else sys.stdout
    if a.no_compile_cache:
        jax.config.update("jax_enable_compilation_cache", False)
    print("command: python " + " ".join(sys.argv), file=log, flush=True)
    maps = Path("/proc/sys/vm/max_map_count")
    if jax.default_backend() == "cpu" and maps.exists() and int(maps.read_text()) < 262144:
        print(
            f"warning: vm.max_map_count is {maps.read_text().strip()}: compiling the bcg SHAC "
            "iteration may fail with 'LLVM compilation error: Cannot allocate memory' "
            "(docs/troubleshooting.md)",
            file=log,
            flush=True,
        )
    run_dir = Path(a.run)
    run = json.loads((run_dir / "run.json").read_text())
    if run["learner"] != "shac":
        raise SystemExit(f"{run_dir} is a {run['learner']} run; this metric needs SHAC")
    env, analytic = registry.build({**run, "estimator": "analytic", "estimator_params": {}})
    bcg_params = json.loads(a.bcg_params)
    if "tau" not in bcg_params:
        bcg_params["tau"] = round(a.tau_weights * env.sim.total_weight(), 2)
    learners = {
        "analytic": analytic,
        "bcg": registry.build({**run, "estimator": "bcg", "estimator_params": bcg_params})[1],
    }
    measured = dict(learners)  # the gradient metric; the timing is of ``learners`` only
    for label, (name, params) in json.loads(a.extra).items():
        if label in measured:
            raise SystemExit(f"--extra: {label!r} is already measured")
        measured[label] = registry.build({**run, "estimator": name, "estimator_params": params})[1]
    if a.soft_floor:
        soft = {**run, "stiffness": "soft", "estimator": "analytic", "estimator_params": {}}
        measured["analytic_soft"] = registry.build(soft)[1]
    base = learners["analytic"]
    n_env_steps = base.env_steps_per_iteration
    key = jax.random.PRNGKey(a.seed)
    template = base.init(key)
    grads = {  # one compiled function per estimator, shared by the points (same shapes)
        name: jax.jit(lambda s, k, lrn=lrn: lrn.per_env_actor_gradients(s, k, return_stats=True))
        for name, lrn in measured.items()
    }
    iterations = {n: jax.jit(lrn.iteration) for n, lrn in learners.items()}
    points = []
    for which in a.points.split(","):
        if which == "initial":
            restored, owner, label = template, base, "initial"
        elif which == "checkpoint":
            # restored into the state of the learner that wrote it (a bcg run's state holds
            # more than an analytic one's), then handed to each measured learner
            owner = registry.build(run)[1]
            restored, step, *_ = harness.restore_checkpoint(run_dir, owner.init(key), a.checkpoint)
            label = f"checkpoint-{step}"  # the newest unless --checkpoint
        else:
            raise SystemExit(f"unknown point {which!r}: use initial and/or checkpoint")
        if a.action_std is not None:
            restored = _with_action_std(restored, a.action_std)
            label += f"-std{a.action_std:g}"
        states = {
            n: _strong(learner_state(lrn, restored, owner, key)) for n, lrn in measured.items()
        }
        entry = {"point": label}
        pooled_means = {}  # name: mean of the pooled per-environment gradients (--keys)
        for name in measured:
            t0 = time.perf_counter()
            G, stats = jax.block_until_ready(grads[name](states[name], key))
            flat, ok = _finite_rows(G)
            lo, hi = bootstrap_interval(flat, seed=a.seed)
            entry[name] = {
                "summed_variance": summed_variance(flat),
                "summed_variance_ci95": [lo, hi],
                "nonfinite_envs": int((~ok).sum()),
                # per environment: squared distance of its gradient to the batch mean (the
                # summed variance is their sum / (n - 1)); shows how heavy the tail is
                "per_env_squared_deviation": np.sum((flat - flat.mean(0)) ** 2, axis=1).tolist(),
                "gradient_compile_seconds": time.perf_counter() - t0,
                "window_overflow": int(stats.overflow),
                "window_bundled_fraction": float(stats.bundled) / n_env_steps,
                "window_triggered_fraction": float(stats.triggered) / n_env_steps,
            }
            if a.keys > 1:  # the same states with other draws (branch offsets, action noise)
                per_key, rows = [entry[name]["summed_variance"]], [flat.astype(np.float32)]
                masks = [ok]
                for k in range(1, a.keys):
                    Gk, _ = jax.block_until_ready(
                        grads[name](states[name], jax.random.fold_in(key, k))
                    )
                    flat_k, ok_k = _finite_rows(Gk)
                    rows.append(flat_k.astype(np.float32))
                    masks.append(ok_k)
                    per_key.append(summed_variance(rows[-1]))
                # the same states under K draws: how much of the spread is between states
                # (left after averaging each state's gradient over draws) and how much is the
                # draws' (envs finite in every key only)
                every = np.all(masks, axis=0)
                aligned = np.stack([r[every[m]] for r, m in zip(rows, masks, strict=True)])
                entry[name]["variance_decomposition"] = variance_decomposition(aligned)
                # measured, not predicted: every state's gradient averaged over M draws
                # (disjoint groups of M keys), the summed variance across states of those means,
                # averaged over the groups; the decomposition predicts between + within / M
                entry[name]["summed_variance_of_draw_means"] = {
                    m: float(
                        np.mean(
                            [
                                summed_variance(aligned[i : i + m].astype(np.float64).mean(0))
                                for i in range(0, a.keys - m + 1, m)
                            ]
                        )
                    )
                    for m in (2, 3, 4, 6)
                    if m <= a.keys // 2
                }
                entry[name]["summed_variance_per_key"] = per_key
                entry[name]["summed_variance_median"] = float(np.median(per_key))
                # every key's environments as one sample of K x 64 (state, draw) pairs: the
                # estimate of the same variance that keeps the rare exploding draws at their rate
                pooled = np.concatenate(rows)
                entry[name]["summed_variance_pooled"] = summed_variance(pooled)
                entry[name]["summed_variance_pooled_ci95"] = list(
                    bootstrap_interval(pooled, seed=a.seed)
                )
                pooled_means[name] = pooled.astype(np.float64).mean(0)
                entry[name]["pooled_mean_norm"] = float(np.linalg.norm(pooled_means[name]))
                # scale-free: a surrogate that only shrinks every gradient lowers the summed
                # variance but not this
                entry[name]["relative_variance_pooled"] = entry[name][
                    "summed_variance_pooled"
                ] / max(entry[name]["pooled_mean_norm"] ** 2, 1e-300)
                entry[name]["pooled_mean_cosine_to_analytic"] = cosine(
                    pooled_means[name], pooled_means["analytic"]
                )
            print(f"[{label}] {name}: {entry[name]}", file=log, flush=True)
        if a.timing == "iteration":
            fns = iterations
        else:  # the actor window forward and backward: the gradient pass alone
            fns = grads
        times = {n: [] for n in learners}
        for r in range(a.repeats + 1):
            for name in learners:
                t0 = time.perf_counter()
                args = (states[name],) if a.timing == "iteration" else (states[name], key)
                _, m = jax.block_until_ready(fns[name](*args))
                dt = time.perf_counter() - t0
                if r == 0 and a.timing == "iteration":
                    entry[name]["compile_seconds"] = dt
                    for k in ("triggered_fraction", "bundled_fraction", "overflow"):
                        entry[name][k] = float(m[k])
                elif r == 0:
                    entry[name]["triggered_fraction"] = entry[name]["window_triggered_fraction"]
                    entry[name]["bundled_fraction"] = entry[name]["window_bundled_fraction"]
                    entry[name]["overflow"] = entry[name]["window_overflow"]
                if r > 0:
                    times[name].append(dt)
                print(f"[{label}] {name} {a.timing} round {r}: {dt:.1f} s", file=log, flush=True)
        for name in learners:
            key_name = (
                "seconds_per_iteration" if a.timing == "iteration" else "seconds_per_gradient"
            )
            entry[name][key_name] = statistics.median(times[name])
            entry[name]["timed_seconds"] = times[name]
        an, bc = entry["analytic"], entry["bcg"]
        entry["variance_ratio"] = an["summed_variance"] / max(bc["summed_variance"], 1e-300)
        if a.keys > 1:
            entry["variance_ratio_median"] = an["summed_variance_median"] / max(
                bc["summed_variance_median"], 1e-300
            )
            entry["variance_ratio_pooled"] = an["summed_variance_pooled"] / max(
                bc["summed_variance_pooled"], 1e-300
            )
        tkey = "seconds_per_iteration" if a.timing == "iteration" else "seconds_per_gradient"
        entry["time_ratio"] = bc[tkey] / an[tkey]
        print(
            f"[{label}] summed variance analytic {an['summed_variance']:.4g} bcg "
            f"{bc['summed_variance']:.4g} (ratio {entry['variance_ratio']:.3g}x); {tkey} "
            f"{an[tkey]:.2f} vs {bc[tkey]:.2f} "
            f"({entry['time_ratio']:.2f}x); bcg bundled {bc['bundled_fraction']:.3f} overflow "
            f"{bc['overflow']:.0f}",
            file=log,
            flush=True,
        )
        points.append(entry)
        result = {
            "settings": {
                **vars(a),
                "run": run,
                "bcg": bcg_params,
                "device": str(jax.devices()),
            },
            "points": points,
        }
        out = Path(a.out)  # written after every point: a crash keeps the finished ones
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
    if a.json:
        print(json.dumps(result, indent=1))
    print(f"saved {out}", file=log)


if __name__ == "__main__":
    main()
