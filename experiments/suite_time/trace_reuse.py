"""Probe (issue 46): how long JAX traces each of several estimators' rollout gradients in one
process, on the test suite's cheapest contact model (a 1 kg ball on a vertical slide, stiff
contact, 5 environments x 6 control steps), and how long lowering takes.

    python experiments/suite_time/trace_reuse.py [LABEL ...]

Labels: analytic, naive (BCG with the bundle mean as the forward state), plain-forward (BCG's
defaults), compact (3 slots, the bundle recomputed backward). Tracing is timed with
``jax.jit(f).trace`` (the jaxpr with every autodiff transform), lowering with ``.lower()``;
nothing is compiled. Run it at two commits to compare; later labels show what a process gains
from what earlier programs traced.
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import bcg.sim as bs
from bcg import estimators as E
from bcg.estimators.bcg import BCG

BALL = """<mujoco><option timestep="0.005"/><worldbody><geom type="plane" size="50 50 .1"/>
<body><joint name="z" type="slide" axis="0 0 1"/><geom type="sphere" size=".1" mass="1"/></body>
</worldbody></mujoco>"""
CONFIGS = {
    "analytic": lambda: E.make("analytic"),
    "naive": lambda: BCG(forward="mean", antithetic=False),
    "plain-forward": lambda: BCG(),
    "compact": lambda: BCG(capacity=3, remat=True, forward="mean", antithetic=False),
}
T = 6


def batch(sim, z, vz):
    n = len(z)
    tmpl = bs.make_data(sim)
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tmpl)
    return d.replace(
        qpos=jnp.asarray(np.reshape(z, (n, 1)), float), qvel=jnp.asarray(np.reshape(vz, (n, 1)))
    )


def main(labels: list[str]) -> None:
    jax.config.update("jax_enable_x64", True)
    sim = bs.load(BALL, stiffness="stiff", name="ball")
    d0 = batch(sim, [0.13, 0.15, 0.16, 3.0, 3.0], [-1.5, -1.5, -1.5, 1.0, 1.0])
    for label in labels:
        est = CONFIGS[label]()

        def loss(dv, d0, key, est=est):
            d = d0.replace(qvel=d0.qvel + dv)
            dT, _ = E.rollout(sim, est, d, jnp.zeros((T, d0.qpos.shape[0], 0)), key)
            return jnp.sum(dT.qpos[:, 0] + 0.1 * dT.qvel[:, 0])

        f = jax.jit(jax.value_and_grad(loss))
        t0 = time.perf_counter()
        traced = f.trace(jnp.zeros_like(d0.qvel), d0, jax.random.PRNGKey(3))
        t1 = time.perf_counter()
        traced.lower()
        t2 = time.perf_counter()
        print(f"{label:14s} trace {t1 - t0:6.1f} s  lower {t2 - t1:5.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["analytic", "naive", "plain-forward", "compact"])
