"""Helpers shared by the tools in ``benchmarks/`` (``from common import ...``; a script imports
no other script of this folder). Only the standard library at import time, so that the
scripts that import JAX late (``transfer_compare.py``, ``g1_transfer.py`` and its worker
processes) stay light; each helper imports what it needs.

* :func:`learner_state`: from ``actor_gradient_variance.py`` (also used by
  ``g1_policy_gradient.py``);
* :func:`fmt` and :func:`transfer_table`: ``_fmt`` and ``table`` of ``transfer_compare.py``
  (also used by ``g1_transfer.py``);
* :func:`stand`: from ``g1_model_report.py`` (also used by ``g1_transfer.py``; still
  ``g1_model_report.stand``).
"""

from __future__ import annotations

import math


def learner_state(learner, restored, restored_learner, key):
    """``learner``'s state with the restored networks, normalisers and environment states."""
    from bcg.learners.rollout import EnvState

    st = learner.init(key)
    data = restored_learner.estimator.state(restored.env.carry)
    env = EnvState(learner.estimator.init(learner.env.sim, data), *restored.env[1:])
    return st.__class__(
        **{
            **{f: getattr(st, f) for f in st.__dataclass_fields__},
            "actor": restored.actor,
            "critic": restored.critic,
            "target": restored.target,
            "obs_rms": restored.obs_rms,
            "ret_rms": restored.ret_rms,
            "ret": restored.ret,
            "env": env,
        }
    )


def fmt(x, spec=".2f"):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def transfer_table(reports: dict) -> str:
    lines = [
        "| policy | trained with | falls (native) | falls (training sim) | penetration training"
        " sim (mm) | penetration native (mm) | gap (mm) | tracking error native (cm) |"
        " return native | return training sim |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, rep in reports.items():
        n = rep["native"]["summary"]
        t = rep.get("training_sim", {}).get("summary")
        lines.append(
            f"| {label} | {rep['training_stiffness']} | {n['falls']}/{n['runs']} | "
            + (f"{t['falls']}/{t['runs']}" if t else "n/a")
            + f" | {fmt(t['penetration_mm'] if t else None)} | {fmt(n['penetration_mm'])} | "
            f"{fmt(rep.get('penetration_gap_mm'))} | {fmt(n['tracking_error_cm'], '.1f')} | "
            f"{fmt(n['mean_return'], '.1f')} | {fmt(t['mean_return'] if t else None, '.1f')} |"
        )
    return "\n".join(lines)


def stand(stiffness: str, balance: bool, seconds: float = 2.0) -> dict:
    """The G1 standing ``seconds`` in its default crouch (keyframe 0), native MuJoCo, contact
    ``stiffness``, under PD + the ankle CoM feedback (``balance``) or fixed-target PD: final
    pelvis height, largest foot penetration, foot slide, time of the fall (None)."""
    import mujoco
    import numpy as np

    from bcg.envs.g1 import model as gm
    from bcg.sim.contact import resolve_stiffness

    m = gm.mj_model(visuals=False)
    resolve_stiffness(stiffness, m.opt.timestep).apply(m)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    feet = gm.foot_geom_ids(m)
    x0 = d.geom_xpos[feet, :2].copy()
    target = m.key_ctrl[0].copy()
    pen, fall = 0.0, None
    for i in range(int(round(seconds / m.opt.timestep))):
        d.ctrl[:] = gm.balance_ctrl(m, d, target) if balance else target
        mujoco.mj_step(m, d)
        pen = max(pen, -gm.lowest_sphere_z(m, d))
        if fall is None and d.qpos[2] < 0.5:
            fall = (i + 1) * m.opt.timestep
    slide = float(np.max(np.linalg.norm(d.geom_xpos[feet, :2] - x0, axis=1)))
    return {
        "stiffness": stiffness,
        "controller": "PD + ankle CoM feedback" if balance else "fixed-target PD",
        "final_pelvis_height_m": round(float(d.qpos[2]), 4),
        "max_foot_penetration_mm": round(1e3 * pen, 2),
        "foot_slide_mm": round(1e3 * slide, 2),
        "fell_at_s": fall,
    }
