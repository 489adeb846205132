"""The transfer report of a trained policy (``bcg transfer RUN_DIR``): native-MuJoCo runs and,
for comparison, training-simulator runs from the same initial states, their means, the foot
penetration gap between the two, and a Markdown table of them."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from bcg.transfer.bridge import NativeBridge
from bcg.transfer.config import TransferConfig
from bcg.transfer.measures import foot_geoms
from bcg.transfer.model import native_model
from bcg.transfer.randomizer import Randomizer
from bcg.transfer.render import save_video
from bcg.transfer.runs import episode_steps, run_native, run_training_sim


def summarize(runs: list[dict]) -> dict:
    """Counts (runs, falls, divergences), means (ignoring NaN) of per-run dicts, and the
    flight of the worst run (the smallest highest clearance and longest flight)."""

    def mean(k):
        v = [r[k] for r in runs if r[k] is not None and not math.isnan(r[k])]
        return float(np.mean(v)) if v else math.nan

    def lowest(k):
        v = [r[k] for r in runs if r.get(k) is not None and not math.isnan(r[k])]
        return float(np.min(v)) if v else math.nan

    return {
        "runs": len(runs),
        "falls": int(sum(r["fell"] for r in runs)),
        "diverged": int(sum(r["diverged"] for r in runs)),
        "mean_return": mean("return"),
        "mean_steps": mean("steps"),
        "penetration_mm": mean("penetration_mm"),
        "tracking_error_cm": mean("tracking_error_cm"),
        "clearance_cm": mean("clearance_cm"),
        "airborne_s": mean("airborne_s"),
        "clearance_cm_min": lowest("clearance_cm"),
        "airborne_s_min": lowest("airborne_s"),
    }


def transfer(policy, cfg: TransferConfig | None = None) -> dict:
    """Native-MuJoCo transfer report of ``policy`` (a :class:`bcg.transfer.policy.LoadedPolicy`)."""
    cfg = cfg or TransferConfig()
    if cfg.runs < 1:
        raise ValueError(f"runs must be >= 1, got {cfg.runs}")
    env = policy.env
    m, notes = native_model(
        env, policy.run.get("task"), cfg, task_factory=policy.run.get("task_factory")
    )
    feet, feet_note = foot_geoms(env, m)
    bridge = NativeBridge(env, m)
    notes += [feet_note, bridge.fall_note, bridge.track_note]
    rand = Randomizer(env, cfg, m)
    runs, run_notes, frames = run_native(policy, cfg, m, bridge, feet, rand)
    notes += run_notes
    report = {
        "policy": policy.label,
        "task": policy.run.get("task"),
        "training_stiffness": env.sim.stiffness.label,
        "control_dt": env.sim.control_dt,
        "steps": episode_steps(env, cfg),
        "config": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "render_size"},
        "native": {"summary": summarize(runs), "runs": runs},
    }
    if cfg.training_sim:
        tr = run_training_sim(policy, cfg, feet, rand.init_env)
        report["training_sim"] = {"summary": summarize(tr), "runs": tr}
        gap = report["native"]["summary"]["penetration_mm"] - summarize(tr)["penetration_mm"]
        report["penetration_gap_mm"] = gap
    if cfg.render:
        if frames:
            path = cfg.video_path or "transfer.mp4"
            notes.append(save_video(frames, path, 1.0 / env.sim.control_dt))
        elif not any(n.startswith("rendering unavailable") for n in notes):
            notes.append("rendering: no frames")
    report["notes"] = notes
    return report


def format_report(rep: dict) -> str:
    """The report as a Markdown table (one row per simulator) and its notes."""

    def f(x, fmt):
        return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)

    lines = [
        f"transfer of {rep['policy']}: task {rep['task']}, trained with "
        f"{rep['training_stiffness']} contact, {rep['steps']} control steps "
        f"({rep['steps'] * rep['control_dt']:.2f} s) per run",
        "",
        "| simulator | runs | falls | diverged | mean return | mean steps | foot penetration (mm)"
        " | tracking error (cm) | foot clearance (cm) | flight (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [("training sim (MJX)", "training_sim"), ("native MuJoCo", "native")]
    for label, k in rows:
        if k not in rep:
            continue
        s = rep[k]["summary"]
        lines.append(
            f"| {label} | {s['runs']} | {s['falls']}/{s['runs']} | {s['diverged']} | "
            f"{f(s['mean_return'], '.2f')} | {f(s['mean_steps'], '.1f')} | "
            f"{f(s['penetration_mm'], '.2f')} | {f(s['tracking_error_cm'], '.1f')} | "
            f"{f(s['clearance_cm'], '.1f')} (min {f(s['clearance_cm_min'], '.1f')}) | "
            f"{f(s['airborne_s'], '.2f')} (min {f(s['airborne_s_min'], '.2f')}) |"
        )
    if "penetration_gap_mm" in rep:
        lines.append("")
        lines.append(
            "foot penetration gap (native - training sim): "
            f"{f(rep['penetration_gap_mm'], '.2f')} mm"
        )
    lines.append("")
    lines += [f"- {n}" for n in rep.get("notes", [])]
    return "\n".join(lines)
