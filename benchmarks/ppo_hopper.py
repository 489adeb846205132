"""PPO baseline (brax's PPO, plain MJX step) on the hopper-jump task.

    python benchmarks/ppo_hopper.py --timesteps 1000000 --seed 0 --run-dir runs/ppo_hopper_stiff

Trains with :func:`bcg.learners.ppo.train_ppo` (its documented small-CPU defaults), prints
brax's evaluation return (deterministic policy, 16 episodes) against env steps and wall time,
then reloads the saved policy from the run directory and evaluates it independently with the
plain step (``--eval-episodes`` fresh episodes), next to a zero-action reference (the hopper
left standing on its spring leg). Everything is written to ``--run-dir`` (metrics.csv,
TensorBoard events, checkpoints, ppo_params.pkl, ppo_config.json, summary.json).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--timesteps", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-dir", default="runs/ppo_hopper_stiff")
    p.add_argument("--stiffness", default="stiff", help="soft | stiff | solref time constant")
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--num-evals", type=int, default=10)
    p.add_argument("--eval-episodes", type=int, default=32)
    p.add_argument("--x64", action="store_true", help="float64 physics (default float32)")
    p.add_argument("--resume", action="store_true")
    a = p.parse_args(argv)

    jax.config.update("jax_enable_x64", a.x64)
    jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))
    from bcg.envs import hopper_jump
    from bcg.learners.ppo import evaluate, load_ppo_policy, train_ppo

    try:
        stiffness = float(a.stiffness)
    except ValueError:
        stiffness = a.stiffness
    env = hopper_jump(stiffness)
    run_dir = Path(a.run_dir)
    print(
        f"[ppo_hopper] hopper_jump ({env.sim.stiffness.label}), {a.timesteps} env steps, "
        f"seed {a.seed}, {a.num_envs} envs, {'float64' if a.x64 else 'float32'} -> {run_dir}",
        flush=True,
    )
    t0 = time.time()
    _, _, history = train_ppo(
        env,
        num_timesteps=a.timesteps,
        seed=a.seed,
        run_dir=run_dir,
        num_envs=a.num_envs,
        num_evals=a.num_evals,
        resume=a.resume,
        run_config={"task": "hopper_jump", "stiffness": stiffness},
    )
    train_time = time.time() - t0

    key = jax.random.PRNGKey(10_000 + a.seed)
    policy = load_ppo_policy(run_dir, env)
    mean, rets, lens = evaluate(env, policy, a.eval_episodes, key)
    zero = jax.jit(lambda obs: jnp.zeros(obs.shape[:-1] + (env.action_size,), jnp.float32))
    zmean, _, zlens = evaluate(env, zero, a.eval_episodes, key)

    print("\n| env steps | wall time (s) | eval return (brax, 16 ep.) | episode length |")
    print("|---|---|---|---|")
    for r in history:
        print(
            f"| {r['env_steps']} | {r['wall_time']:.0f} | {r['eval_return']:.1f} "
            f"+- {r['eval_return_std']:.1f} | {r['eval_episode_length']:.0f} |"
        )
    print(
        f"\nreloaded policy, plain step, {a.eval_episodes} episodes: return {mean:.1f} "
        f"(std {rets.std():.1f}), length {lens.mean():.0f}; zero action: return {zmean:.1f}, "
        f"length {zlens.mean():.0f}; training wall time {train_time:.0f} s"
    )
    summary = {
        "timesteps": a.timesteps,
        "seed": a.seed,
        "stiffness": a.stiffness,
        "x64": a.x64,
        "train_wall_time_s": train_time,
        "history": history,
        "final_eval": {"mean_return": mean, "std": float(rets.std()), "length": lens.mean()},
        "zero_action_eval": {"mean_return": zmean, "length": float(zlens.mean())},
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=float))


if __name__ == "__main__":
    main()
