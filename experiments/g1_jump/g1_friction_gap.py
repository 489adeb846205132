"""Foot friction as a sim-to-sim gap: one G1 policy on the nominal model with its foot friction
set to each value, in native MuJoCo (100 solver iterations) and in the MJX training simulator
(the run's solver iterations and contact stiffness, or ``--mjx-iterations`` /
``--mjx-stiffness``), from the same initial states, no latency or pushes.

    python experiments/g1_jump/g1_friction_gap.py POLICY --friction 0.3,0.5,0.8,1.2 --runs 5

The G1's randomisation draws the foot-floor friction from U(0.3, 1.2) (MuJoCo combines by
max: the feet and the floor get the same value); MJX at one solver iteration does not settle
sliding friction (docs/method.md), so where the two simulators part is worth knowing.
Without randomisation the reset noise is off too: every run of one friction starts from the
same state, so the runs of a row repeat one trajectory (a check of the simulators, not of the
policy's spread); ``--randomization reset_noise`` gives each run its own initial state (the
same in both simulators).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from bcg.learners.registry import make_run_env
from bcg.transfer.config import TransferConfig
from bcg.transfer.policy import load_policy
from bcg.transfer.report import transfer


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path")
    p.add_argument("--friction", default="0.3,0.5,0.8,1.2")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mjx-iterations", type=int, help="MJX solver iterations (default: the run's)")
    p.add_argument("--mjx-stiffness", help="MJX contact stiffness (default: the run's)")
    p.add_argument(
        "--randomization",
        help="native items besides the friction (e.g. reset_noise: distinct initial states for "
        "both simulators); default none",
    )
    p.add_argument(
        "--native-no-actearly",
        action="store_true",
        help="native servos without actearly (MJX ignores it: a new target acts one physics "
        "step later there, docs/reports/solver_fidelity.md)",
    )
    p.add_argument(
        "--native-mjx-solver",
        action="store_true",
        help="native MuJoCo stepping what MJX steps: the training model's contact and MJX's "
        "solver settings (Sim.native_with_mjx_solver)",
    )
    p.add_argument(
        "--native-iterations",
        type=int,
        help="with --native-mjx-solver: this many solver iterations (50 line search) instead",
    )
    p.add_argument("--json")
    a = p.parse_args(argv)
    policy = load_policy(a.path)
    if a.native_no_actearly:
        from bcg.transfer import report

        own = report.native_model

        def without_actearly(*args, **kw):
            m, notes = own(*args, **kw)
            m.actuator_actearly[:] = 0
            return m, [*notes, "actearly off"]

        report.native_model = without_actearly
    if a.native_mjx_solver:
        from bcg.transfer import report

        def mjx_solver_model(env, *args, **kw):
            m = env.sim.native_with_mjx_solver()
            if a.native_iterations is not None:
                m.opt.iterations, m.opt.ls_iterations = a.native_iterations, 50
            return m, ["native: MJX's model and solver settings"]

        report.native_model = mjx_solver_model
    out = {}
    for f in (float(x) for x in a.friction.split(",")):
        run = dict(policy.run)
        params = dict(run.get("env_params") or {})
        params["config"] = {**(params.get("config") or {}), "friction": f}
        if a.mjx_iterations is not None:
            params["solver_iterations"] = a.mjx_iterations
        run["env_params"] = params
        if a.mjx_stiffness is not None:
            run["stiffness"] = a.mjx_stiffness
        pf = dataclasses.replace(policy, env=make_run_env(run), run=run)
        cfg = TransferConfig(
            runs=a.runs,
            seed=a.seed,
            randomize=a.randomization is not None,
            randomization=a.randomization,
        )
        rep = transfer(pf, cfg)
        row = {}
        for side in ("native", "training_sim"):
            s = rep[side]["summary"]
            row[side] = {k: s[k] for k in ("falls", "tracking_error_cm", "penetration_mm")}
            row[side]["fall_times"] = [r["fall_time"] for r in rep[side]["runs"] if r["fell"]]
        out[f] = row
        n, m = row["native"], row["training_sim"]
        print(
            f"friction {f:.2f}: falls native {n['falls']}/{a.runs}, MJX {m['falls']}/{a.runs}; "
            f"tracking native {n['tracking_error_cm']:.1f} cm, "
            f"MJX {m['tracking_error_cm']:.1f} cm; native falls at {n['fall_times']} s",
            flush=True,
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
