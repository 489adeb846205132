"""Learning comparison on a training task: SHAC + BCG vs SHAC (analytic) vs PPO.

    python benchmarks/learning_comparison.py --task pogo_hop --stiffness gated --seeds 0,1,2 \
        --iterations 60 --init-log-std 0 --bcg-param tau=70 --runs runs/learning_pogo \
        --out results/learning_pogo

    python benchmarks/learning_comparison.py --seeds 0,1,2 --iterations 150 --ppo-factor 30 \
        --bcg-param tau=150 --bcg-capacity 0.25 --runs runs/learning --out results/learning

For every seed, trains (through ``bcg train``, one subprocess per run, sequentially):

* ``shac_bcg``: SHAC through the BCG step (``--bcg-param`` / ``--bcg-capacity`` passed on as
  ``--param bcg.K=V`` / ``--capacity``),
* ``shac_analytic``: SHAC through the plain autodiff step, same settings,
* ``ppo``: brax PPO on the plain step with ``--ppo-factor`` x the SHAC env steps.

A run directory that already holds a finished run is reused (not retrained); an unfinished
SHAC run is resumed from its last checkpoint (exact), an unfinished PPO run is retrained.
Every final policy is then evaluated the same way (shared evaluator, deterministic policy,
plain step, ``--eval-episodes`` episodes, key 1000 + seed; cached in ``bench_eval.json`` of
the run directory), which also gives the hopper-jump metrics (jump height, foot clearance,
airborne fraction).

Prints a markdown table (per method: final eval return mean +- std over seeds, episode length,
jump metrics, env steps, wall time), the env steps SHAC + BCG needs to reach PPO's final eval
return (first iteration where its training-episode return, mean over seeds and smoothed over
5 iterations, reaches it) and the ratio to PPO's steps, and the wall clock per iteration of
SHAC + BCG relative to SHAC (median iteration time after the first, compile, iteration, from
the runs' metrics.csv). Saves ``learning_comparison.png`` (return vs env steps, log x; mean
over seeds, band min/max; SHAC curves are the training-episode returns of the stochastic
policy, PPO's are brax's deterministic evaluations, and the final deterministic evaluations of
all three are the markers), ``learning_comparison.md``, ``learning_comparison.json`` and
every run's ``metrics.csv`` and final evaluation under ``runs/``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

METHODS = ("shac_bcg", "shac_analytic", "ppo")
LABELS = {"shac_bcg": "SHAC + BCG", "shac_analytic": "SHAC (analytic)", "ppo": "PPO (brax)"}
BCG_BIN = [sys.executable, "-m", "bcg.cli"]


def read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [
            {k: float(v) if v not in ("", None) else np.nan for k, v in r.items()}
            for r in csv.DictReader(f)
        ]


def run_dir(a, method: str, seed: int) -> Path:
    budget = f"it{a.iterations}" if method != "ppo" else f"{ppo_steps(a) // 1000}k"
    return Path(a.runs) / f"{method}_s{seed}_{budget}"


def shac_steps(a) -> int:
    return a.iterations * a.num_envs * a.horizon


def ppo_steps(a) -> int:
    return int(a.ppo_factor * shac_steps(a))


def finished(a, method: str, d: Path) -> bool:
    if method == "ppo":
        return (d / "ppo_params.pkl").exists() and (d / "ppo_config.json").exists()
    rows = read_csv(d / "metrics.csv")
    ev = json.loads((d / "eval.json").read_text()) if (d / "eval.json").exists() else {}
    return bool(rows) and int(rows[-1]["iteration"]) >= a.iterations and "final" in ev


def train_command(a, method: str, seed: int, d: Path) -> list[str]:
    cmd = [*BCG_BIN, "train", "--task", a.task, "--stiffness", a.stiffness, "--seed", str(seed)]
    cmd += ["--run-dir", str(d), "--quiet"]
    if method == "ppo":
        return [
            *cmd,
            "--learner",
            "ppo",
            "--num-envs",
            str(a.ppo_envs),
            "--timesteps",
            str(ppo_steps(a)),
        ]
    est = "bcg" if method == "shac_bcg" else "analytic"
    cmd += ["--learner", "shac", "--estimator", est, "--iterations", str(a.iterations)]
    cmd += ["--num-envs", str(a.num_envs), "--horizon", str(a.horizon)]
    cmd += ["--init-log-std", str(a.init_log_std), "--checkpoint-every", "25"]
    if method == "shac_bcg":
        for kv in a.bcg_param or []:
            cmd += ["--param", f"bcg.{kv}"]
        if a.bcg_capacity is not None:
            cmd += ["--capacity", str(a.bcg_capacity)]
    ck = d / "checkpoints"
    if (d / "run.json").exists() and ck.is_dir() and any(p.name.isdigit() for p in ck.iterdir()):
        cmd.append("--resume")
    return cmd


def ensure_trained(a, method: str, seed: int) -> Path:
    d = run_dir(a, method, seed)
    if finished(a, method, d):
        print(f"[learning] reuse {d}", flush=True)
        return d
    d.parent.mkdir(parents=True, exist_ok=True)
    cmd = train_command(a, method, seed, d)
    print(f"[learning] {' '.join(cmd[2:])}", flush=True)
    t0 = time.time()
    with open(str(d) + ".log", "a") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
    if rc != 0 or not finished(a, method, d):
        raise RuntimeError(f"training {d} failed (exit {rc}); see {d}.log")
    print(f"[learning] done {d} in {time.time() - t0:.0f} s", flush=True)
    return d


# ---------------------------------------------------------------------------- evaluation


def final_eval(a, method: str, seed: int, d: Path) -> dict:
    cache = d / "bench_eval.json"
    if cache.exists():
        ev = json.loads(cache.read_text())
        if ev.get("episodes") == a.eval_episodes:
            return ev
    import jax

    jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))
    from bcg.cli import _parse_stiffness
    from bcg.envs import make_env
    from bcg.learners import harness

    key = jax.random.PRNGKey(1000 + seed)
    if method == "ppo":
        from bcg.learners.ppo import load_ppo_policy

        env = make_env(a.task, stiffness=_parse_stiffness(a.stiffness))
        pol = load_ppo_policy(d, env)
        ev = harness.evaluate(env, lambda _, o: pol(o), None, a.eval_episodes, key)
    else:
        from bcg.learners import registry

        run = json.loads((d / "run.json").read_text())
        env, learner = registry.build(run)
        state, *_ = harness.restore_checkpoint(d, learner.init(jax.random.PRNGKey(0)))
        ev = harness.evaluate(
            env, learner.policy, learner.policy_params(state), a.eval_episodes, key
        )
    ev["episodes"] = a.eval_episodes
    cache.write_text(json.dumps(ev, indent=2))
    return ev


def time_iterations(a, dirs: dict, k: int) -> dict:
    """Seconds per SHAC iteration of SHAC + BCG and SHAC (analytic), measured interleaved in
    this process (same load for both): the first seed's final checkpoints, compiled as the
    harness compiles them (cached), one warm-up call each, then ``k`` rounds alternating the
    two; medians."""
    import jax

    jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))
    from bcg.diagnostics.timing import interleaved_medians
    from bcg.learners import harness, registry

    fns = {}
    for m in ("shac_bcg", "shac_analytic"):
        d = dirs[m][a.seeds[0]]
        _, learner = registry.build(json.loads((d / "run.json").read_text()))
        if getattr(learner, "mesh", None) is None and hasattr(learner, "sharded"):
            learner = learner.sharded(None)  # as harness.train does
        state, *_ = harness.restore_checkpoint(d, learner.init(jax.random.PRNGKey(0)))
        state, f = harness.compile_iteration(learner, state)
        t0 = time.time()
        state, met = f(state)
        jax.block_until_ready(met)
        print(f"[learning] {m}: compile (or cache load) + 1 iteration {time.time() - t0:.0f} s")
        fns[m] = _stepper(f, state)
    return interleaved_medians(fns, k)


def _stepper(f, state):
    """Zero-argument call running one iteration of ``f`` from the last state it returned."""
    box = [state]

    def call():
        box[0], met = f(box[0])
        return met

    return call


# ---------------------------------------------------------------------------- summary


def curves(method: str, d: Path):
    """(env steps, return, wall time) of one run: SHAC training-episode return per iteration,
    PPO brax evaluations."""
    rows = read_csv(d / "metrics.csv")
    x = np.array([r["env_steps"] for r in rows])
    if method == "ppo":
        return (
            x,
            np.array([r["eval_return"] for r in rows]),
            np.array([r.get("wall_time", r.get("wall_time_s")) for r in rows]),
        )
    y = np.array([r["episode_return"] for r in rows])
    return x, y, np.array([r["wall_time"] for r in rows])


def smooth(y, n=5):
    y = np.asarray(y, float)
    out = np.empty_like(y)
    for i in range(len(y)):
        w = y[max(0, i - n + 1) : i + 1]
        w = w[np.isfinite(w)]
        out[i] = w.mean() if w.size else np.nan
    return out


def iteration_time(d: Path) -> float:
    rows = read_csv(d / "metrics.csv")
    w = np.array([r["wall_time"] for r in rows])
    dt = np.diff(w)  # drops the first iteration (compile)
    return float(np.median(dt)) if dt.size else np.nan


def summarise(a, dirs: dict, evals: dict) -> dict:
    out = {"settings": vars(a), "methods": {}}
    for m in METHODS:
        ev = [evals[m][s] for s in a.seeds]
        rets = np.array([e["mean_return"] for e in ev])
        res = {
            "final_return_mean": float(rets.mean()),
            "final_return_std": float(rets.std()),
            "final_returns": rets.tolist(),
            "eval_length_mean": float(np.mean([e["mean_length"] for e in ev])),
            "task_metrics": {
                k: float(np.mean([e.get(k, np.nan) for e in ev])) for k in task_metric_keys(ev)
            },
        }
        steps, walls = [], []
        for s in a.seeds:
            x, _, w = curves(m, dirs[m][s])
            steps.append(x[-1])
            walls.append(w[-1])
        res["env_steps"] = int(np.mean(steps))
        res["wall_time_s"] = float(np.mean(walls))
        if m != "ppo":
            res["iteration_time_s"] = float(np.mean([iteration_time(dirs[m][s]) for s in a.seeds]))
            bf = [
                np.nanmean(
                    [
                        r.get("bundled_fraction", np.nan)
                        for r in read_csv(dirs[m][s] / "metrics.csv")
                    ]
                )
                for s in a.seeds
            ]
            res["bundled_fraction"] = float(np.mean(bf))
        out["methods"][m] = res
    # env steps for SHAC + BCG to reach PPO's final return
    target = out["methods"]["ppo"]["final_return_mean"]
    xs, ys = [], []
    for s in a.seeds:
        x, y, _ = curves("shac_bcg", dirs["shac_bcg"][s])
        xs.append(x)
        ys.append(y)
    n = min(len(y) for y in ys)
    ymean = smooth(np.nanmean(np.stack([y[:n] for y in ys]), axis=0))
    hit = np.nonzero(ymean >= target)[0]
    reach = int(xs[0][hit[0]]) if hit.size else None
    out["ppo_target_return"] = target
    out["bcg_steps_to_ppo_return"] = reach
    out["bcg_steps_ratio_vs_ppo"] = (
        reach / out["methods"]["ppo"]["env_steps"] if reach is not None else None
    )
    tb, ta = (out["methods"][m]["iteration_time_s"] for m in ("shac_bcg", "shac_analytic"))
    out["bcg_vs_analytic_iteration_time"] = tb / ta
    if a.time_iterations > 0:
        t = time_iterations(a, dirs, a.time_iterations)
        out["interleaved_iteration_time_s"] = t
        out["bcg_vs_analytic_iteration_time_interleaved"] = t["shac_bcg"] / t["shac_analytic"]
    return out


def task_metric_keys(evals: list[dict]) -> list[str]:
    """The task's evaluation metrics (``<name>_max`` / ``<name>_mean`` of env.eval_metrics)."""
    skip = {"mean_return", "mean_length"}
    keys = set.intersection(*(set(e) for e in evals))
    return sorted(k for k in keys if k not in skip and k.endswith(("_max", "_mean")))


def table(a, s: dict) -> str:
    keys = list(s["methods"][METHODS[0]]["task_metrics"])
    lines = [
        "| method | seeds | final eval return (mean ± std) | eval episode length | "
        + "".join(f"{k} | " for k in keys)
        + "env steps | wall time (s) |",
        "|---|---|---|---|" + "---|" * len(keys) + "---|---|",
    ]
    for m in METHODS:
        r = s["methods"][m]
        lines.append(
            f"| {LABELS[m]} | {len(a.seeds)} | {r['final_return_mean']:.1f} ± "
            f"{r['final_return_std']:.1f} | {r['eval_length_mean']:.0f} | "
            + "".join(f"{r['task_metrics'].get(k, np.nan):.3f} | " for k in keys)
            + f"{r['env_steps']:,} | {r['wall_time_s']:.0f} |"
        )
    reach = s["bcg_steps_to_ppo_return"]
    ppo = s["methods"]["ppo"]
    fin = s["methods"]["shac_bcg"]["final_return_mean"]
    if reach is None:
        rtxt = (
            f"SHAC + BCG did not reach PPO's final eval return ({s['ppo_target_return']:.1f}) "
            f"within {s['methods']['shac_bcg']['env_steps']:,} env steps"
        )
    else:
        rtxt = (
            f"SHAC + BCG reached PPO's final eval return ({s['ppo_target_return']:.1f}) after "
            f"{reach:,} env steps = {s['bcg_steps_ratio_vs_ppo']:.3f} x PPO's "
            f"{ppo['env_steps']:,} (training-episode return of the stochastic policy, mean over "
            f"seeds, 5-iteration mean; first crossing: its final deterministic eval return is "
            f"{fin:.1f}, {'above' if fin >= s['ppo_target_return'] else 'below'} PPO's)"
        )
    b, an = s["methods"]["shac_bcg"], s["methods"]["shac_analytic"]
    if "interleaved_iteration_time_s" in s:
        t = s["interleaved_iteration_time_s"]
        tline = (
            f"- Wall clock per SHAC iteration, interleaved in this script ({a.time_iterations} "
            f"rounds, medians): SHAC + BCG {t['shac_bcg']:.2f} s, SHAC {t['shac_analytic']:.2f} s:"
            f" {s['bcg_vs_analytic_iteration_time_interleaved']:.2f}x."
        )
    else:
        tline = ""
    lines += [
        "",
        f"- {rtxt}.",
        f"- Wall clock per SHAC iteration in the training runs (median after the compile "
        f"iteration; runs overlapped with other jobs, so loads differ): SHAC + BCG "
        f"{b['iteration_time_s']:.2f} s, SHAC {an['iteration_time_s']:.2f} s: "
        f"{s['bcg_vs_analytic_iteration_time']:.2f}x; bundled env-steps "
        f"{100 * b['bundled_fraction']:.1f}%.",
    ]
    if tline:
        lines.append(tline)
    return "\n".join(lines)


def plot(a, dirs: dict, evals: dict, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, m in enumerate(METHODS):
        xs, ys = zip(*[curves(m, dirs[m][s])[:2] for s in a.seeds], strict=True)
        n = min(len(y) for y in ys)
        x = xs[0][:n]
        Y = np.stack([smooth(y[:n]) if m != "ppo" else y[:n] for y in ys])
        ok = x > 0
        c = f"C{i}"
        ax.plot(x[ok], np.nanmean(Y, 0)[ok], color=c, label=LABELS[m])
        ax.fill_between(x[ok], np.nanmin(Y, 0)[ok], np.nanmax(Y, 0)[ok], color=c, alpha=0.2)
        fr = [evals[m][s]["mean_return"] for s in a.seeds]
        ax.errorbar(
            [x[-1]],
            [np.mean(fr)],
            yerr=[[np.mean(fr) - min(fr)], [max(fr) - np.mean(fr)]],
            color=c,
            marker="o",
            capsize=3,
        )
    ax.set_xscale("log")
    ax.set_xlabel("env steps (control steps)")
    ax.set_ylabel("episode return")
    ax.set_title(
        f"{a.task}, {a.stiffness} contact, {len(a.seeds)} seed(s)\nSHAC: training episodes "
        "(5-iteration mean); PPO: brax eval; markers: final deterministic eval",
        fontsize=9,
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="hopper_jump", help="training task (bcg train --task)")
    p.add_argument("--stiffness", default="stiff", help="contact stiffness of every run")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--iterations", type=int, default=150, help="SHAC iterations")
    p.add_argument("--num-envs", type=int, default=16, help="SHAC environments")
    p.add_argument("--horizon", type=int, default=32, help="SHAC window")
    p.add_argument("--init-log-std", type=float, default=-1.0)
    p.add_argument("--ppo-factor", type=float, default=30.0, help="PPO env steps / SHAC's")
    p.add_argument("--ppo-envs", type=int, default=32)
    p.add_argument("--bcg-param", action="append", help="BCG parameter K=V, e.g. tau=150")
    p.add_argument("--bcg-capacity", help="BCG bundle slots (int or fraction of the batch)")
    p.add_argument("--eval-episodes", type=int, default=16)
    p.add_argument(
        "--time-iterations", type=int, default=10, help="interleaved timing rounds (0: skip)"
    )
    p.add_argument("--methods", default=",".join(METHODS), help="train only these (table: all)")
    p.add_argument("--runs", default="runs/learning")
    p.add_argument("--out", default="results/learning")
    a = p.parse_args(argv)
    a.seeds = [int(s) for s in a.seeds.split(",") if s]
    todo = [m for m in a.methods.split(",") if m]
    bad = set(todo) - set(METHODS)
    if bad:
        raise SystemExit(f"unknown methods {sorted(bad)}; choose from {', '.join(METHODS)}")

    dirs = {m: {} for m in METHODS}
    for s in a.seeds:
        for m in METHODS:
            if m in todo:
                dirs[m][s] = ensure_trained(a, m, s)
            else:
                dirs[m][s] = run_dir(a, m, s)
    missing = [str(d) for m in METHODS for d in dirs[m].values() if not finished(a, m, d)]
    if missing:
        print(f"[learning] not finished, no table: {', '.join(missing)}")
        return 1
    evals = {m: {s: final_eval(a, m, s, dirs[m][s]) for s in a.seeds} for m in METHODS}
    summ = summarise(a, dirs, evals)
    txt = table(a, summ)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    png = plot(a, dirs, evals, out / "learning_comparison.png")
    cmd = "python benchmarks/learning_comparison.py " + " ".join(argv or sys.argv[1:])
    (out / "learning_comparison.md").write_text(f"`{cmd}`\n\n{txt}\n")
    (out / "learning_comparison.json").write_text(
        json.dumps({**summ, "evals": evals}, indent=2, default=str)
    )
    import shutil

    (out / "runs").mkdir(exist_ok=True)
    for m in METHODS:  # the per-run logs behind the table
        for d in dirs[m].values():
            shutil.copy(d / "metrics.csv", out / "runs" / f"{d.name}_metrics.csv")
            shutil.copy(d / "bench_eval.json", out / "runs" / f"{d.name}_eval.json")
    print(txt)
    print(f"saved {png}, {out / 'learning_comparison.md'}, {out / 'learning_comparison.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
