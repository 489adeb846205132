"""The gradient reports of ``bcg grad``: one :func:`bcg.diagnostics.report.run_report` per
stiffness of a sweep, on an MJCF file or a built-in task. Every estimator, model and problem is
built and checked before the first JAX compile, so that a bad option fails in a fraction of a
second; the last stiffness gives the main report, saved as JSON with the spread-vs-stiffness
plot.

    ests, problems = prepare_sweep(estimators=["analytic", "bcg"], model="robot.xml")
    reports = run_sweep(problems, ests)
    result, json_path, png_path = save_sweep(reports, "results")
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from bcg import estimators as E
from bcg.diagnostics import report as R
from bcg.options import parse_params, parse_stiffness


def stiffness_sweep(stiffness, sweep: Sequence = ()) -> list:
    """The stiffnesses of a sweep as values, the main ``stiffness`` last (added if absent)."""
    stiffs = [parse_stiffness(s) for s in sweep]
    main = parse_stiffness(stiffness)
    if main not in stiffs:
        stiffs.append(main)
    return stiffs


def prepare_sweep(
    *,
    estimators: Sequence[str],
    params: Sequence[str] = (),
    capacity: str | None = None,
    stiffness="stiff",
    sweep: Sequence = ("soft",),
    task: str = "bouncing_ball",
    model: str | None = None,
    batch: int = 32,
    horizon: int | None = None,
    seed: int = 0,
    substeps: int = 4,
    timestep: float | None = None,
    qpos_noise: float = 0.01,
    qvel_noise: float = 0.05,
) -> tuple[dict, list]:
    """``(estimators by name, one GradProblem per stiffness)``, every option checked.

    ``params``: ``NS.KEY=VALUE`` estimator parameters; ``capacity``: BCG bundle slots for
    bcg / bcg-stein. ``model`` (an MJCF path; initial states perturbed by ``qpos_noise`` /
    ``qvel_noise``, ``horizon`` default 50) or else the built-in ``task`` (its own initial
    states and horizon).
    """
    if batch < 2:
        raise ValueError(f"--batch must be >= 2 to estimate a variance, got {batch}")
    if horizon is not None and horizon < 1:
        raise ValueError(f"--horizon must be >= 1 control step, got {horizon}")
    names = list(estimators)
    if not names:
        raise ValueError("--estimators is empty")
    par = parse_params(params, capacity)
    bad = sorted(set(par) - set(E.names()) - set(names))
    if bad:
        raise ValueError(
            f"--param names unknown estimator(s) {bad}; choose from {', '.join(E.names())}"
        )
    ests = {n: E.make(n, **par.get(n, {})) for n in names}

    def build(stiff):
        if model:
            from bcg.sim import load

            sim = load(model, stiffness=stiff, substeps=substeps, timestep=timestep)
            return R.make_problem(
                sim,
                batch=batch,
                horizon=50 if horizon is None else horizon,
                seed=seed,
                qpos_noise=qpos_noise,
                qvel_noise=qvel_noise,
            )
        from bcg.envs import tasks

        return R.task_problem(tasks.get(task), stiff, batch=batch, seed=seed, horizon=horizon)

    # all models load before anything compiles
    return ests, [build(stiff) for stiff in stiffness_sweep(stiffness, sweep)]


def run_sweep(
    problems: list,
    ests: dict,
    *,
    seed: int = 0,
    reference: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One report per problem; ``progress`` (a callable taking a line) hears each start."""
    reports = []
    for prob in problems:
        if progress:
            progress(
                f"[bcg grad] {prob.sim.name}: stiffness {prob.sim.stiffness.label}, "
                f"batch {prob.batch}, horizon {prob.horizon}"
            )
        reports.append(R.run_report(prob, ests, seed=seed, reference=reference, progress=progress))
    return reports


def save_sweep(reports: list[dict], out_dir) -> tuple[dict, Path, Path]:
    """``(result, json path, png path)``: the main (last) report, with the whole sweep under
    ``"sweep"`` when there are several, saved as ``OUT/grad_MODEL.json`` and the
    spread-vs-stiffness plot as ``OUT/grad_MODEL.png``."""
    from bcg.diagnostics import plot as P

    main = reports[-1]
    result = main if len(reports) == 1 else {**main, "sweep": reports}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"grad_{main['model']}"
    js = out_dir / f"{stem}.json"
    js.write_text(json.dumps(result, indent=2))
    png = P.plot_spread_vs_stiffness(reports, out_dir / f"{stem}.png")
    return result, js, png
