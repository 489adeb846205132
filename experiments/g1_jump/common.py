"""Helpers the G1 jump probes of this folder share (import with ``from common import ...`` after
``sys.path.insert(0, <this folder>)``). Dated copies, not maintained as tools: the probes must
not change when the tools in ``benchmarks/`` do, and ``benchmarks/`` is not on their path.

* from ``benchmarks/actor_gradient_variance.py`` (2026-12-07): :func:`learner_state`, copied;
* from ``benchmarks/g1_policy_gradient.py`` (2026-12-07): :data:`DEFAULT_RUN`, copied;
  :func:`strong` and :func:`finite_rows` (with its ``_flat``), copied (``_strong``,
  ``_finite_rows`` there); :func:`add_point_arguments` and :func:`restore_point`, moved here
  (only the probes used them);
* from ``benchmarks/g1_training_distribution.py`` (2026-12-07): :func:`play_episodes` and
  :func:`episode_falls`, copied;
* from ``g1_reference_replay.py`` (this folder): :func:`runs_row` and :func:`row_line`, moved.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bcg.envs.g1 import randomization as g1r
from bcg.learners import harness
from bcg.learners.rollout import EnvState

# SHAC checkpoints kept in the repository, so that the metric runs on a fresh clone
DEFAULT_RUN = "results/g1/shac_checkpoints/analytic_it50"


def learner_state(learner, restored, restored_learner, key):
    """``learner``'s state with the restored networks, normalisers and environment states."""
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


def strong(tree):
    """Arrays with strong dtypes, so that a fresh and a restored state trace alike (a weakly
    typed scalar in one of them would compile the functions again)."""

    def one(x):
        if not hasattr(x, "dtype") or jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return x
        return jax.numpy.asarray(np.asarray(x), dtype=x.dtype)

    return jax.tree_util.tree_map(one, tree)


def add_point_arguments(p, point="initial"):
    """The arguments of the G1 replay benchmarks that pick a policy and a draw: ``--run``,
    ``--checkpoint``, ``--point``, ``--key``, ``--seed``."""
    p.add_argument("--run", default=DEFAULT_RUN, help="SHAC run directory")
    p.add_argument("--checkpoint", type=int, help="its checkpoint iteration (default: the newest)")
    p.add_argument("--point", choices=("initial", "checkpoint"), default=point)
    p.add_argument("--key", type=int, required=True, help="the draw (g1_policy_gradient's key)")
    p.add_argument("--seed", type=int, default=0)


def restore_point(lrn, a, key):
    """The SHAC state at ``a.point``: fresh from ``key``, or ``a.run``'s checkpoint
    ``a.checkpoint`` restored into it."""
    state = lrn.init(key)
    if a.point == "checkpoint":
        state, *_ = harness.restore_checkpoint(Path(a.run), state, a.checkpoint)
    return state


def _flat(G):
    leaves = jax.tree_util.tree_leaves(G)
    return np.concatenate([np.asarray(x, np.float64).reshape(x.shape[0], -1) for x in leaves], 1)


def finite_rows(G):
    """(rows of the flattened per-environment gradients that are finite, their mask)."""
    flat = _flat(G)
    ok = np.all(np.isfinite(flat), 1)
    return flat[ok], ok


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


def runs_row(runs: list[dict]) -> dict:
    """Falls, mean tracking error and the per-run flight and fall times of native runs."""
    return {
        "falls": sum(r["fell"] for r in runs),
        "runs": len(runs),
        "tracking_error_cm": float(np.nanmean([r["tracking_error_cm"] for r in runs])),
        "clearance_cm": [round(r["clearance_cm"], 2) for r in runs],
        "airborne_s": [round(r["airborne_s"], 3) for r in runs],
        "fall_time": [r["fall_time"] for r in runs],
    }


def row_line(row: dict) -> str:
    return (
        f"falls {row['falls']}/{row['runs']}, tracking {row['tracking_error_cm']:.1f} cm, "
        f"clearance {row['clearance_cm']} cm, airborne {row['airborne_s']} s, "
        f"fall times {row['fall_time']}"
    )
