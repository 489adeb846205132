"""One SHAC iteration on 1 device vs the env batch sharded over 2 (forced host) devices.

Run in a fresh process (JAX fixes its device count at import):

    XLA_FLAGS=--xla_force_host_platform_device_count=2 JAX_PLATFORMS=cpu \\
        python tests/learners/sharding_check.py analytic|bcg [--float32] [--time N]

Prints one JSON line: per compared quantity the max abs difference and the reference's max
abs value, whether the sharded state / gradient really live on 2 devices, and the metrics of
both runs. ``--time N`` also times N further iterations of each (seconds per iteration).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

from toy import toy_env  # noqa: E402

from bcg import estimators as E  # noqa: E402
from bcg.envs.base import ContactEnv  # noqa: E402
from bcg.learners import harness, parallel  # noqa: E402
from bcg.learners.shac import SHAC, SHACConfig  # noqa: E402
from bcg.sim import load  # noqa: E402

DROP_XML = """
<mujoco model="drop">
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="ball">
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="z" gear="20" ctrlrange="-1 1" ctrllimited="true"/></actuator>
</mujoco>
"""


@dataclasses.dataclass(frozen=True, eq=False)
class Drop(ContactEnv):
    """A sphere on a vertical slide, pushed by a motor, starting just above a stiff floor and
    moving down: it hits the floor within the first control steps (BCG bundles)."""

    episode_length: int = 20

    def reset_state(self, key):
        kq, kv = jax.random.split(key)
        q = jax.random.uniform(kq, (1,), minval=0.105, maxval=0.12)
        v = jax.random.uniform(kv, (1,), minval=-1.5, maxval=-1.0)
        return q, v

    def observe(self, data):
        return jnp.concatenate([data.qpos, data.qvel])

    def reward(self, data, action, next_data):
        return -((next_data.qpos[0] - 0.3) ** 2) - 0.01 * jnp.sum(action**2)


def build(estimator: str, num_envs: int = 4) -> SHAC:
    cfg = SHACConfig(
        num_envs=num_envs,
        horizon=3,
        actor_hidden=(8,),
        critic_hidden=(8,),
        critic_iterations=2,
        critic_minibatches=2,
    )
    if estimator == "analytic":
        env, est = toy_env(episode_length=2), E.make("analytic")  # a reset inside the window
    else:
        env = Drop(sim=load(DROP_XML, stiffness="stiff", substeps=2, name="drop"))
        est = E.make("bcg", num_branches=4, horizon=2, capacity=2)  # compaction path
    return SHAC(env, est, cfg, iterations=10)


def run(learner: SHAC, state, n_time: int):
    state, step = harness.compile_iteration(learner, state)
    k = jax.random.PRNGKey(11)

    @jax.jit
    def grad_fn(actor, st):
        return jax.grad(lambda p: learner.actor_loss(p, st, k)[0])(actor)

    t0 = time.time()
    g = jax.block_until_ready(grad_fn(state.actor, state))
    new, metrics = jax.block_until_ready(step(state))
    first = time.time() - t0
    per = None
    if n_time:
        s = new
        t0 = time.time()
        for _ in range(n_time):
            s, m = step(s)
        jax.block_until_ready(s)
        per = (time.time() - t0) / n_time
    return g, new, metrics, first, per


def _f64(x):
    return np.asarray(x).astype(np.float64)


def _diff(x, y):
    x, y = _f64(x), _f64(y)
    d = np.abs(x - y)
    d = np.where(np.isnan(x) & np.isnan(y), 0.0, np.where(np.isnan(d), np.inf, d))
    return float(np.max(d, initial=0.0))


def _scale(x):
    a = np.abs(_f64(x))
    return max(1.0, float(np.max(a[np.isfinite(a)], initial=0.0)))


def max_diff(a, b):
    """Over matching leaves (NaN = NaN): the max abs difference, and the max of each leaf's
    abs difference relative to max(1, the leaf's max abs value)."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    d = [_diff(x, y) for x, y in zip(la, lb, strict=True)]
    rel = max(di / _scale(x) for di, x in zip(d, la, strict=True))
    return {"max_abs_diff": max(d), "max_rel_diff": rel}


def divisibility_errors() -> dict:
    """The messages of sharding 3 environments over 2 devices (learner and ``bcg train``)."""
    import contextlib
    import io

    from bcg import cli
    from bcg.envs import POLICY_ENVS

    out = {}
    try:
        build("analytic", num_envs=3).sharded(2)
    except ValueError as e:
        out["learner"] = str(e)
    POLICY_ENVS["toy"] = lambda stiffness="stiff": toy_env()
    err = io.StringIO()
    argv = ["train", "--task", "toy", "--estimator", "analytic", "--num-envs", "3"]
    argv += ["--devices", "2", "--run-dir", os.devnull, "--quiet", "--float64"]
    with contextlib.redirect_stderr(err):
        out["cli_rc"] = cli.main(argv)
    out["cli"] = err.getvalue().strip().splitlines()[-1]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("estimator", choices=["analytic", "bcg"])
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--time", type=int, default=0, help="also time N further iterations")
    args = ap.parse_args()
    jax.config.update("jax_enable_x64", not args.float32)
    cache = os.environ.get("BCG_JAX_CACHE", str(Path.home() / ".cache" / "bcg" / "jax-tests"))
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    assert len(jax.devices()) == 2, jax.devices()

    one = build(args.estimator)  # no mesh: everything on device 0
    two = one.sharded(2)
    state0 = one.init(jax.random.PRNGKey(5))
    g1, new1, m1, t1, p1 = run(one, state0, args.time)
    g2, new2, m2, t2, p2 = run(two, state0, args.time)

    qpos2 = E.BCG.state(new2.env.carry).qpos if args.estimator == "bcg" else new2.env.carry.qpos
    out = {
        "devices": len(jax.devices()),
        "x64": not args.float32,
        "grad": max_diff(g1, g2),
        "state": max_diff(new1, new2),
        "actor": max_diff(new1.actor, new2.actor),
        "critic": max_diff(new1.critic, new2.critic),
        "metrics": max_diff(m1, m2),
        "metrics_1": {k: float(v) for k, v in m1.items()},
        "metrics_2": {k: float(v) for k, v in m2.items()},
        "one_device_on": len(new1.env.step.sharding.device_set),
        "env_sharded_2": parallel.is_sharded_over(new2.env.step, 2)
        and parallel.is_sharded_over(qpos2, 2)
        and parallel.is_sharded_over(new2.ret, 2),
        "actor_replicated_2": all(
            len(x.sharding.device_set) == 2 and x.sharding.is_fully_replicated
            for x in jax.tree_util.tree_leaves(new2.actor)
        ),
        "env_sharding_2": str(new2.env.step.sharding),
        "first_call_s": [t1, t2],
        "iteration_s": [p1, p2],
    }
    if args.estimator == "analytic":
        out["errors"] = divisibility_errors()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
