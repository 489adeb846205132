"""A run's schedule: settings that change at given iterations, run by one process.

A run description (:mod:`bcg.learners.registry`) may carry

    "schedule": [{"from": 100, "env_params": {"w_flight": 40.0}, "config": {"actor_lr": 1e-4},
                  "estimator_params": {"tau": "auto"}}, ...]

Each phase's values replace the run's (and the earlier phases') from the iteration after
``from`` completed ones on; a trained run's record adds each phase's ``resolved`` settings.
The run at iteration K is :func:`run_at` (the run without a schedule, every phase that starts
at or before K applied). Network sizes, the task, the learner, the estimator and the batch
stay fixed: the learner state carries over from phase to phase
(:func:`bcg.learners.harness.transplant`). Written by a recipe (:mod:`bcg.learners.recipe`);
``registry.build`` on a scheduled run builds its final phase (what ``eval``, ``transfer`` and
``export`` load).
"""

from __future__ import annotations

PHASE_FIELDS = ("env_params", "config", "estimator_params")
FIXED_SETTINGS = ("actor_hidden", "critic_hidden", "init_log_std")  # the state's layout


def phase_starts(run: dict) -> list[int]:
    """``[0, K1, K2, ...]``: the iterations (completed before it) at which each phase starts."""
    return [0, *(int(ph["from"]) for ph in run.get("schedule") or ())]


def run_at(run: dict, iteration: int | None = None) -> dict:
    """``run`` as it runs after ``iteration`` completed iterations (None: its final phase),
    without its schedule."""
    if not run.get("schedule"):
        return run
    out = {k: v for k, v in run.items() if k != "schedule"}
    for ph in run["schedule"]:
        if iteration is not None and int(ph["from"]) > iteration:
            break
        for field in PHASE_FIELDS:
            if ph.get(field):
                out[field] = {**(out.get(field) or {}), **ph[field]}
        if ph.get("resolved"):  # the phase's complete record (bcg.learners.record)
            out["resolved"] = ph["resolved"]
        elif ph.get("env_params") and (out.get("resolved") or {}).get("env"):
            # not trained yet: the phase's env is built from its own parameters, not put
            # back to the earlier phase's recorded settings
            out["resolved"] = {k: v for k, v in out["resolved"].items() if k != "env"}
    return out


def check_schedule(run: dict) -> None:
    """ValueError naming a phase that starts outside (0, iterations), out of order, has an
    unknown field, or changes what must stay fixed (network sizes)."""
    sched = run.get("schedule")
    if not sched:
        return
    if run["learner"] == "ppo":
        raise ValueError("a schedule applies to shac / bptt (brax PPO trains one env)")
    last = 0
    for i, ph in enumerate(sched):
        unknown = sorted(set(ph) - {"from", "resolved", *PHASE_FIELDS})
        if unknown:
            raise ValueError(f"schedule phase {i}: unknown field(s) {unknown}")
        k = ph.get("from")
        if not isinstance(k, int) or isinstance(k, bool) or not last < k < int(run["iterations"]):
            raise ValueError(
                f"schedule phase {i}: from = {k!r} must be an integer after the previous phase's "
                f"({last}) and before the run's iterations ({run['iterations']})"
            )
        fixed = sorted(set(ph.get("config") or {}) & set(FIXED_SETTINGS))
        if fixed:
            raise ValueError(
                f"schedule phase {i} (from {k}): {', '.join(fixed)} cannot change during a run "
                "(the networks carry over)"
            )
        last = k
