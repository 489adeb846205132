"""G1 jump: soft contact vs stiff contact + BCG, transferred to native MuJoCo (issue 4 headline).

    .venv/bin/python benchmarks/g1_transfer.py \
        --run soft_analytic=runs/g1_jump_soft_analytic \
        --run stiff_bcg=runs/g1_jump_stiff_bcg --runs 5 --out results/g1

Writes into ``--out``:

* ``g1_transfer.md`` / ``g1_transfer.json``: the ``benchmarks/transfer_compare.py`` table (falls
  in native MuJoCo and in the training simulator, foot penetration in both and the gap, tracking
  error, returns) for every ``LABEL=RUN_DIR`` (a run directory or one of its
  ``checkpoints/<k>``), all transferred with the same seed, run count and duration (so the same
  initial states, randomised models, latencies and pushes), plus

  - a zero-action reference row (``--no-zero`` to skip): the targets of the clip's first frame
    held (what an untrained policy does), native MuJoCo only;
  - the training budget of each policy (checkpoint iteration, env steps, training wall time
    (its first iteration includes the compile), seconds per later iteration, first / last
    training episode return, from ``metrics.csv``);
  - standing foot penetration (2 s, PD + ankle CoM feedback, native MuJoCo,
    ``g1_model_report.stand``) at each contact setting (soft / stiff / gated / the model's own =
    what native transfer uses);
* ``training.png``: training episode return vs iteration of every run.

The policies are transferred in parallel worker processes (``--jobs``, default 2; each compiles
its own training-simulator rollout).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import fmt, transfer_table  # noqa: E402


def _cache():
    import jax

    jax.config.update("jax_compilation_cache_dir", str(Path.home() / ".cache" / "bcg" / "jax"))


def _transfer_one(label: str, path: str, cfg_kw: dict) -> tuple[str, dict, float]:
    """Worker: transfer one run (or the zero policy when ``path`` is None)."""
    _cache()
    from bcg.transfer import native

    t = time.time()
    if path is None:
        import numpy as np

        from bcg.envs.g1 import tracking
        from bcg.transfer.policy import LoadedPolicy

        env = tracking.g1_jump(stiffness="soft")
        pol = LoadedPolicy(
            lambda obs: np.zeros((obs.shape[0], env.action_size), np.float32),
            env,
            {"task": "g1_jump"},
            Path("."),
            None,
            None,
            "zero action",
        )
        rep = native.transfer(pol, native.TransferConfig(training_sim=False, **cfg_kw))
        rep["training_stiffness"] = "none (zero action)"
    else:
        from bcg.transfer.policy import load_policy

        pol = load_policy(path)
        rep = native.transfer(pol, native.TransferConfig(**cfg_kw))
        rep["checkpoint_iteration"] = pol.iteration
        rep["checkpoint_env_steps"] = pol.env_steps
    return label, rep, time.time() - t


def training_budget(path: str, iteration: int | None) -> dict:
    p = Path(path)
    run_dir = p.parent.parent if p.parent.name == "checkpoints" else p
    run = json.loads((run_dir / "run.json").read_text())
    out = {k: run.get(k) for k in ("stiffness", "learner", "estimator", "estimator_params")}
    out.update(num_envs=run.get("num_envs"), horizon=run.get("horizon"))
    out["schedule_iterations"] = run.get("iterations")
    csv_path = run_dir / "metrics.csv"
    if not csv_path.exists():  # an archived copy of the checkpoints: metrics next to the run
        alt = Path(str(run_dir).replace("/archive/", "/"))
        csv_path = alt / "metrics.csv"
    rows = list(csv.DictReader(csv_path.open())) if csv_path.exists() else []
    if iteration is not None:
        rows = [r for r in rows if int(r["iteration"]) <= iteration]
    if rows:
        last = rows[-1]
        out.update(
            iterations=int(last["iteration"]),
            env_steps=int(float(last["env_steps"])),
            wall_time_s=round(float(last["wall_time"]), 1),  # includes the first compile
            first_iteration_s=round(float(rows[0]["wall_time"]), 1),  # compile + 1 iteration
            s_per_iteration=round(
                (float(last["wall_time"]) - float(rows[0]["wall_time"]))
                / max(1, int(last["iteration"]) - int(rows[0]["iteration"])),
                2,
            ),
            first_return=next(  # the first iteration that finished an episode
                (float(r["episode_return"]) for r in rows if r["episode_return"] != "nan"),
                math.nan,
            ),
            last_return=float(last.get("episode_return", "nan")),
        )
    out["_rows"] = [(int(r["iteration"]), float(r.get("episode_return", "nan"))) for r in rows]
    return out


def plot(budgets: dict, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, b in budgets.items():
        if b["_rows"]:
            it, ret = zip(*b["_rows"], strict=True)
            ax.plot(it, ret, label=label)
    ax.set_xlabel("iteration")
    ax.set_ylabel("training episode return")
    ax.set_title("g1_jump training (MJX, 1 solver iteration)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="append", required=True, help="LABEL=RUN_DIR (repeat)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, help="per run (default: one episode = the clip)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-randomize", action="store_true")
    ap.add_argument("--no-zero", action="store_true", help="skip the zero-action reference")
    ap.add_argument("--no-standing", action="store_true", help="skip the standing table")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="results/g1")
    args = ap.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg_kw = dict(
        runs=args.runs, seconds=args.seconds, randomize=not args.no_randomize, seed=args.seed
    )
    jobs = []
    for spec in args.run:
        if "=" not in spec:
            ap.error(f"--run expects LABEL=RUN_DIR, got {spec!r}")
        jobs.append(tuple(spec.split("=", 1)))
    if not args.no_zero:
        jobs.append(("zero_action", None))

    t0 = time.time()
    reports, seconds = {}, {}
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as ex:
        futs = [ex.submit(_transfer_one, lab, p, cfg_kw) for lab, p in jobs]
        for f in futs:
            lab, rep, dt = f.result()
            reports[lab], seconds[lab] = rep, round(dt, 1)
            print(f"[g1_transfer] {lab}: {dt:.0f} s", file=sys.stderr)
    reports = {lab: reports[lab] for lab, _ in jobs}  # submission order

    budgets = {
        lab: training_budget(p, reports[lab].get("checkpoint_iteration"))
        for lab, p in jobs
        if p is not None
    }
    plot(budgets, out / "training.png")

    standing = []
    if not args.no_standing:
        from common import stand

        standing = [stand(s, True) for s in ("soft", "stiff", "gated", "model")]

    first = next(iter(reports.values()))
    lines = [
        "# G1 jump: soft vs stiff + BCG, native-MuJoCo transfer\n",
        f"{args.runs} runs x {first['steps']} control steps "
        f"({first['steps'] * first['control_dt']:.2f} s), seed {args.seed}, randomisation "
        f"{'off' if args.no_randomize else 'on (the paper table, latency, pushes)'}; the same "
        "initial states and randomised models for every policy.\n",
        transfer_table(reports),
        "",
        "## Per run (native MuJoCo): fell / steps survived / tracking error (cm)",
        "",
        "| policy | " + " | ".join(f"run {i}" for i in range(args.runs)) + " |",
        "|---|" + "---|" * args.runs,
    ]
    for lab, rep in reports.items():
        cells = [
            f"{'FALL' if r['fell'] else 'ok'} {r['steps']} / {fmt(r['tracking_error_cm'], '.1f')}"
            for r in rep["native"]["runs"]
        ]
        lines.append(f"| {lab} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Training budget (MJX training simulator)",
        "",
        "| policy | contact | estimator | envs x horizon | iterations (of schedule) | env steps"
        " | training wall time (s) | of which compile + first iteration (s) | s / iteration"
        " after | return first -> last |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for lab, b in budgets.items():
        lines.append(
            f"| {lab} | {b['stiffness']} | {b['estimator']} {b['estimator_params'] or ''} | "
            f"{b['num_envs']} x {b['horizon']} | {b.get('iterations')} "
            f"({b['schedule_iterations']}) | {b.get('env_steps')} | {b.get('wall_time_s')} | "
            f"{b.get('first_iteration_s')} | {b.get('s_per_iteration')} | "
            f"{fmt(b.get('first_return'), '.1f')} -> "
            f"{fmt(b.get('last_return'), '.1f')} |"
        )
    if standing:
        lines += [
            "",
            "## Standing 2 s, PD + ankle CoM feedback (native MuJoCo)",
            "",
            "| contact | max foot penetration (mm) | foot slide (mm) | pelvis height (m) |",
            "|---|---|---|---|",
        ]
        for s in standing:
            lines.append(
                f"| {s['stiffness']} | {s['max_foot_penetration_mm']} | {s['foot_slide_mm']} | "
                f"{s['final_pelvis_height_m']} |"
            )
    lines += ["", f"Transfer wall time: {time.time() - t0:.0f} s ({seconds}).", "", "Notes:"]
    for lab, rep in reports.items():
        lines += [f"- {lab}: {n}" for n in rep.get("notes", [])]
    md = "\n".join(lines) + "\n"
    (out / "g1_transfer.md").write_text(md)
    for b in budgets.values():
        b.pop("_rows")
    blob = {"reports": reports, "budgets": budgets, "standing": standing, "seconds": seconds}
    (out / "g1_transfer.json").write_text(json.dumps(blob, indent=2, default=float))
    print(md)
    print(f"saved {out}/g1_transfer.md, .json, training.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
