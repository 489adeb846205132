"""Training throughput: env-steps/s of ``bcg train``'s iteration per estimator, in one process,
and where an iteration's time goes.

The learner is built as ``bcg train`` builds it: from ``--recipe`` (a recipe file; each
estimator gets its own tables), from ``--run`` (a run directory's record, with the estimator
swapped; the record's other settings kept), or from ``--task`` and the library's defaults. Its
iteration is compiled (timed separately) and run ``--warmup`` times, then ``--iterations`` more
iterations are timed. The estimators' timed iterations are interleaved round-robin, so that a
load that changes during the run hits all of them alike; the ratio to the first estimator is
the number to compare across machines.

``--breakdown`` also times, per estimator (median of the same rounds, each part jitted on its
own): the actor window's forward pass (the rollout and its loss), forward + backward, and the
critic's part (:meth:`bcg.learners.shac.SHAC.critic_step`); the backward pass is their
difference and ``other`` the iteration minus both (optimiser, normalisers, metrics).
``--physics`` times one control step of the batch (``bcg.sim.step.control_step``) and, per
physics substep, MJX's position stage (kinematics, collision, constraint rows), its collision
alone and the constraint solve.

    python benchmarks/throughput.py --recipe recipes/g1_jump.toml --estimators analytic,bcg \
        --iterations 3 --breakdown --physics --json OUT
    python benchmarks/throughput.py --task g1_jump --num-envs 64 --horizon 32 \
        --estimators analytic,bcg --iterations 5 [--param bcg.capacity=16] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--recipe", help="build from a recipe file (bcg train --recipe)")
    src.add_argument("--run", help="build from a run directory's record")
    ap.add_argument("--task", default="g1_jump")
    ap.add_argument("--stiffness", default="stiff")
    ap.add_argument("--learner", default="shac", choices=("shac", "bptt"))
    ap.add_argument("--estimators", default="analytic,bcg")
    ap.add_argument("--num-envs", type=int, help="default: the recipe's / run's, else 64")
    ap.add_argument("--horizon", type=int, help="default: the recipe's / run's, else 32")
    ap.add_argument("--iterations", type=int, default=5, help="timed iterations per estimator")
    ap.add_argument("--warmup", type=int, default=1, help="untimed iterations after compiling")
    ap.add_argument("--param", action="append", default=[], help="EST.KEY=VALUE (repeatable)")
    ap.add_argument("--breakdown", action="store_true", help="time the iteration's parts")
    ap.add_argument("--physics", action="store_true", help="time the physics step's parts")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--smoke", action="store_true", help="hopper_jump, 4 envs x 4 steps")
    return ap.parse_args(argv)


def _params(pairs) -> dict:
    params: dict = {}
    for kv in pairs:
        k, v = kv.split("=", 1)
        ns, key = k.split(".", 1)
        try:
            v = json.loads(v)
        except json.JSONDecodeError:
            pass
        params.setdefault(ns, {})[key] = v
    return params


def build_run(a, name: str, params: dict) -> dict:
    """The run description ``bcg train`` would build for estimator ``name`` (module docstring)."""
    sizes = {k: v for k, v in (("num_envs", a.num_envs), ("horizon", a.horizon)) if v}
    if a.recipe:
        from bcg.learners.recipe import recipe_options
        from bcg.learners.run_config import prepare_run

        pairs = tuple(p for p in a.param if p.split(".", 1)[0] == name)
        run, _ = prepare_run(recipe_options(a.recipe, estimator=name, params=pairs, **sizes))
        return run
    if a.run:
        from bcg.learners import record

        run = record.read(a.run)
        if name != run["estimator"]:  # another estimator: none of the recorded one's settings
            resolved = {k: v for k, v in (run.get("resolved") or {}).items() if k != "estimator"}
            run = {**run, "estimator": name, "estimator_params": {}, "resolved": resolved}
            run.pop("estimator_factory", None)
        run["estimator_params"] = {**run.get("estimator_params", {}), **params.get(name, {})}
        return {**run, **sizes}
    from bcg.cli import _parse_stiffness

    return {
        "task": a.task,
        "stiffness": _parse_stiffness(a.stiffness),
        "learner": a.learner,
        "estimator": name,
        "estimator_params": params.get(name, {}),
        "iterations": 1000,
        "num_envs": a.num_envs or 64,
        "horizon": a.horizon or 32,
        "config": {},
    }


def _median_time(fn, args, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def iteration_parts(learner, state, repeats: int) -> dict:
    """Seconds (median of ``repeats``) of the actor forward pass, forward + backward, and the
    critic's part of one SHAC iteration, each jitted on its own (compiled before timing)."""
    import jax.numpy as jnp

    probe = jnp.zeros((learner.cfg.num_envs,), jnp.float32)
    key = jax.random.PRNGKey(1)
    fwd = jax.jit(lambda st, k: learner.actor_loss(st.actor, st, k, probe))
    both = jax.jit(
        lambda st, k: jax.value_and_grad(learner.actor_loss, argnums=(0, 3), has_aux=True)(
            st.actor, st, k, probe
        )
    )
    _, (_, traj, r) = jax.block_until_ready(fwd(state, key))
    traj, r = jax.lax.stop_gradient((traj, r))
    critic = jax.jit(learner.critic_step)
    for f, args in ((both, (state, key)), (critic, (state, traj, r, key))):
        jax.block_until_ready(f(*args))  # compile
    return {
        "actor_forward_s": _median_time(fwd, (state, key), repeats),
        "actor_forward_backward_s": _median_time(both, (state, key), repeats),
        "critic_s": _median_time(critic, (state, traj, r, key), repeats),
    }


def physics_parts(learner, state, repeats: int) -> dict:
    """Seconds (median of ``repeats``) of one control step of the batch and, per physics
    substep, MJX's position stage, its collision and the constraint solve (jitted, vmapped)."""
    import jax.numpy as jnp
    from mujoco import mjx
    from mujoco.mjx._src import solver

    from bcg.sim.step import control_step

    sim = learner.env.sim
    m = sim.mjx_model
    data = learner.estimator.state(state.env.carry)
    ctrl = jnp.zeros((data.qpos.shape[0], sim.mj_model.nu), data.qpos.dtype)
    step = jax.jit(jax.vmap(lambda d, u: control_step(sim, d, u)))
    position = jax.jit(jax.vmap(lambda d: mjx.fwd_position(m, d)))
    collide = jax.jit(jax.vmap(lambda d: mjx.collision(m, mjx.kinematics(m, d))))
    d_acc = jax.jit(
        jax.vmap(
            lambda d: mjx.fwd_acceleration(
                m, mjx.fwd_actuation(m, mjx.fwd_velocity(m, mjx.fwd_position(m, d)))
            )
        )
    )(data)
    solve = jax.jit(jax.vmap(lambda d: solver.solve(m, d)))
    for f, args in (
        (step, (data, ctrl)),
        (position, (data,)),
        (collide, (data,)),
        (solve, (d_acc,)),
    ):
        jax.block_until_ready(f(*args))  # compile
    return {
        "control_step_s": _median_time(step, (data, ctrl), repeats),
        "substeps": int(sim.substeps),
        "position_stage_s": _median_time(position, (data,), repeats),
        "collision_s": _median_time(collide, (data,), repeats),
        "solve_s": _median_time(solve, (d_acc,), repeats),
        "solver_iterations": int(m.opt.iterations),
    }


def main(argv=None) -> int:
    a = parse(argv)
    from bcg.cli import device_line
    from bcg.learners import harness, registry

    if a.smoke:
        a.recipe = a.run = None
        a.task, a.num_envs, a.horizon, a.iterations, a.warmup = "hopper_jump", 4, 4, 1, 0
    print(device_line(), flush=True)
    params = _params(a.param)
    names = [n for n in a.estimators.split(",") if n]
    runs = {}
    for name in names:  # build and compile every estimator's iteration first
        run = build_run(a, name, params)
        registry.validate(run)
        _, learner = registry.build(run)
        t0 = time.perf_counter()
        state, step = harness.compile_iteration(learner, learner.init(jax.random.PRNGKey(0)))
        state, m = step(state)
        jax.block_until_ready(state)
        compile_s = time.perf_counter() - t0
        for _ in range(a.warmup):
            state, m = step(state)
        jax.block_until_ready(state)
        runs[name] = {
            "run": run,
            "learner": learner,
            "state": state,
            "step": step,
            "compile_s": compile_s,
            "times": [],
            "metrics": [],
        }
        print(f"{name}: compile + first iteration {compile_s:.1f} s", flush=True)
    for _ in range(a.iterations):
        for name in names:
            r = runs[name]
            t0 = time.perf_counter()
            r["state"], m = r["step"](r["state"])
            jax.block_until_ready(r["state"])
            r["times"].append(time.perf_counter() - t0)
            r["metrics"].append({k: float(v) for k, v in jax.device_get(m).items()})
    first = runs[names[0]]["run"]
    out = {
        "device": device_line(),
        "source": a.recipe or a.run or "task defaults",
        "task": first["task"],
        "stiffness": first["stiffness"],
        "num_envs": first["num_envs"],
        "horizon": first["horizon"],
        "estimators": {},
    }
    base = None

    def save():  # after every estimator's row and every part: nothing lost if a part fails
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=2)

    for name in names:
        r = runs[name]
        t = sorted(r["times"])[len(r["times"]) // 2]
        sps = r["learner"].env_steps_per_iteration / t
        base = base or t
        ms = r["metrics"]
        res = {
            "median_iteration_s": t,
            "env_steps_per_s": sps,
            "time_ratio": t / base,
            "compile_s": r["compile_s"],
            "bundled_fraction": sum(m.get("bundled_fraction", 0.0) for m in ms) / len(ms),
            "masked_fraction": sum(m.get("masked_fraction", 0.0) for m in ms) / len(ms),
            "actor_skipped": sum(m.get("actor_skipped", 0.0) for m in ms),
            "overflow": sum(m.get("overflow", 0.0) for m in ms),
        }
        out["estimators"][name] = res
        print(
            f"{name:14s} {sps:9.1f} env-steps/s  (median iteration {t:.3f} s, {t / base:.2f}x "
            f"{names[0]}; bundled {res['bundled_fraction']:.1%}, masked "
            f"{res['masked_fraction']:.1%}, overflow {res['overflow']:.0f}, "
            f"skipped {res['actor_skipped']:.0f}/{len(ms)})",
            flush=True,
        )
        save()
    for name in names:
        r, res = runs[name], out["estimators"][name]
        if a.breakdown:
            parts = iteration_parts(r["learner"], r["state"], max(a.iterations, 1))
            parts["backward_s"] = parts["actor_forward_backward_s"] - parts["actor_forward_s"]
            parts["other_s"] = (
                res["median_iteration_s"] - parts["actor_forward_backward_s"] - parts["critic_s"]
            )
            res["breakdown"] = parts
            print(f"  {name} parts: " + ", ".join(f"{k} {v:.3f}" for k, v in parts.items()))
            save()
        if a.physics:
            res["physics"] = physics_parts(r["learner"], r["state"], max(a.iterations, 1))
            print(f"  {name} physics: {res['physics']}", flush=True)
            save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
