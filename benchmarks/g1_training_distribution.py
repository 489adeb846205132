"""Falls of a G1 policy in its own training distribution: MJX, the run's env (contact, solver
iterations, per-environment model draws, latency, pushes, reset noise), every episode from the
clip's first frame, N draws at once.

    python benchmarks/g1_training_distribution.py CKPT [CKPT ...] [--envs 64] [--neutral push,kp]
        [--latency 0|1] [--no-reset-noise] [--json out.json]

Each environment draws its model and episode exactly as a training reset does
(:meth:`bcg.envs.g1.tracking.G1Tracking.initial_data`: uniform draws in ``userdata``), then the
deterministic policy (the mean action) plays ``episode_length`` control steps with the plain
step; a fall is :meth:`G1Tracking.fell` (root below 0.3 m), as in ``bcg transfer``.
``--neutral ITEMS`` sets those items' draws to 0.5 (the middle of each range: no push kick,
nominal gains and masses, friction 0.75), ``--latency`` forces the action latency of every
environment. The draws depend only on ``--seed``, so checkpoints are compared on the same N
episodes. What it is for: ``bcg transfer`` plays 5-10 native runs in minutes; this plays 64
training-distribution episodes in about the time of one compile, for choosing checkpoints and
for asking whether a native fall rate is a sim-to-sim gap (it is not, when the policy falls as
often here).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np

from bcg.envs.g1 import randomization as g1r
from bcg.transfer.policy import load_policy


def play_episodes(env, act, keys, record=None, prepare=None):
    """One episode per key from ``env.initial_data(key)`` (``prepare(d)`` applied first), each
    played ``env.episode_length`` control steps with ``act(obs) -> action`` and the plain step.
    Returns ``(alive, records)``: ``alive`` (E, T), whether the episode is still up after each
    step (:meth:`fell`: root below 0.3 m; a fallen episode keeps stepping), and ``records``, the
    stacked ``record(d, obs, action, next_d)`` of every step (None without ``record``)."""
    T = int(env.episode_length)

    def one(key):
        d = env.initial_data(key)
        if prepare is not None:
            d = prepare(d)

        def body(c, _):
            d, alive = c
            obs = env.observe(d)
            a = act(obs)
            nd, _, _ = env.plain_step(d, a)
            out = None if record is None else record(d, obs, a, nd)
            alive = alive & ~env.fell(nd)
            return (nd, alive), (alive, out)

        _, (alive, out) = jax.lax.scan(body, (d, jnp.array(True)), None, T)
        return alive, out

    alive, out = jax.jit(jax.vmap(one))(keys)
    return np.asarray(alive), jax.tree_util.tree_map(np.asarray, out)


def episode_falls(policy, envs: int, seed: int, neutral=(), latency=None, reset_noise=True):
    """Per environment: (fell, steps survived) of ``envs`` training-distribution episodes
    (``reset_noise=False``: every episode starts on the reference's first frame)."""
    env = dataclasses.replace(policy.env, start="first")
    if not reset_noise:
        cfg = dataclasses.replace(env.randomization, reset_noise=None)
        env = dataclasses.replace(env, randomization=cfg)
    m = env.sim.mj_model
    layout = g1r.draw_layout(m) if m.nuserdata else {}
    unknown = [n for n in neutral if n not in layout]
    if unknown:
        raise ValueError(
            f"items {unknown} are not drawn by this env (its draws: {', '.join(layout) or 'none'})"
        )
    if latency is not None and "latency" not in layout:
        raise ValueError("--latency needs an env that draws latency")

    def prepare(d):
        ud = d.userdata
        for name in neutral:
            a = 1 + g1r._block_start(m, name)
            ud = ud.at[a : a + layout[name]].set(0.5)
        if latency is not None:
            ud = ud.at[1 + g1r._block_start(m, "latency")].set(0.99 if latency else 0.0)
        return d.replace(userdata=ud)

    keys = jax.random.split(jax.random.PRNGKey(seed), envs)
    alive, _ = play_episodes(env, lambda o: policy.fn(o[None])[0], keys, prepare=prepare)
    return ~alive[:, -1], alive.sum(1), env.sim.control_dt


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", help="checkpoints, run directories or packed policies")
    p.add_argument("--envs", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--neutral", default="", help="comma list of items whose draws are set to 0.5")
    p.add_argument("--latency", type=int, choices=(0, 1), help="force every env's latency")
    p.add_argument(
        "--no-reset-noise", action="store_true", help="start on the reference's first frame"
    )
    p.add_argument("--json")
    a = p.parse_args(argv)
    neutral = tuple(x for x in a.neutral.split(",") if x)
    rows = []
    for path in a.paths:
        fell, steps, dt = episode_falls(
            load_policy(path), a.envs, a.seed, neutral, a.latency, not a.no_reset_noise
        )
        t = np.sort(steps[fell] * dt)
        row = {
            "path": path,
            "envs": a.envs,
            "falls": int(fell.sum()),
            "fall_times_s": [round(float(x), 2) for x in t],
        }
        rows.append(row)
        q = ""
        if t.size:
            q = f", fall times {t.min():.2f}-{t.max():.2f} s (median {np.median(t):.2f})"
        print(f"{path}: falls {row['falls']}/{a.envs}{q}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            out = {"seed": a.seed, "neutral": neutral, "latency": a.latency}
            out |= {"reset_noise": not a.no_reset_noise, "rows": rows}
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
