"""Does a SHAC run's critic see a G1 policy's falls coming? MJX, the run's own training
distribution (as ``benchmarks/g1_training_distribution.py``), every episode from frame 0,
mean action.

    python experiments/g1_jump/g1_critic_probe.py CKPT [--envs 64] [--frames 0,40,60,80,90,100,110]

Per frame, the target critic's value V(o_t) (the mean of the ensemble, in the run's scaled
return units) and the realised discounted return G_t = sum_k gamma^k r_{t+k} / std(R) (0 after
a fall; without bootstrap at the clip's end), averaged over the episodes that will fall and
over those that stand, and corr(V, G) over the episodes alive at t. The checkpoint must hold
the whole learner state (a run's checkpoint, not a packed policy).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bcg.transfer.policy import load_state

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import play_episodes  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", help="a SHAC checkpoint (runs/RUN/checkpoints/K)")
    p.add_argument("--envs", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--frames", default="0,40,60,70,80,90,100,110,120")
    a = p.parse_args(argv)
    run, learner, state, _, _ = load_state(a.path)
    if run.get("learner") != "shac":
        raise ValueError(f"{a.path} is a {run.get('learner')} run; the probe needs a SHAC critic")
    env = dataclasses.replace(learner.env, start="first")
    T, gamma = int(env.episode_length), learner.cfg.gamma
    params = learner.policy_params(state)
    std = jnp.sqrt(state.ret_rms.var + 1e-8) if learner.cfg.normalize_returns else 1.0

    def record(d, obs, act, nd):
        v = learner._values(state.target, state.obs_rms, obs[None])[0]
        return v, env.reward(d, act, nd) / std

    keys = jax.random.split(jax.random.PRNGKey(a.seed), a.envs)

    def act(obs):
        return learner.policy(params, obs[None])[0]

    after, (v, r) = play_episodes(env, act, keys, record)
    alive = np.concatenate([np.ones((a.envs, 1), bool), after[:, :-1]], axis=1)  # before a step
    fell_at = alive & ~after
    fell = fell_at.any(1)
    G, nxt = np.zeros_like(r), np.zeros(a.envs)
    for t in range(T - 1, -1, -1):
        nxt = np.where(alive[:, t], r[:, t] + gamma * np.where(fell_at[:, t], 0.0, nxt), 0.0)
        G[:, t] = nxt
    print(f"{a.path}: falls {int(fell.sum())}/{a.envs}, return std {float(std):.1f}")
    for t in (int(x) for x in a.frames.split(",")):
        if t >= T:
            continue
        m = alive[:, t]
        f, s = m & fell, m & ~fell
        if not (f.any() and s.any()):
            continue
        c = np.corrcoef(v[m, t], G[m, t])[0, 1]
        print(
            f"frame {t:3d}: V fallers {v[f, t].mean():6.2f} standers {v[s, t].mean():6.2f} | "
            f"G fallers {G[f, t].mean():6.2f} standers {G[s, t].mean():6.2f} | "
            f"corr(V, G) {c:.2f} | alive fallers {f.sum()}, standers {s.sum()}"
        )


if __name__ == "__main__":
    main()
