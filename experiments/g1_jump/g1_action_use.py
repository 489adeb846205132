"""How much of its action range does a G1 tracking policy use, phase by phase?

Plays a trained policy deterministically in the training simulator (MJX, its training contact,
nominal model, plain step) from the clip's first frame, and reports per clip phase the mean
``|a|`` of the tanh-squashed actions and the share of action components with ``|a| > 0.9``
(where the squashing's slope ``1 - a^2`` is below 0.19, so a gradient asking for more of that
residual is damped five-fold or more), for all 29 joints and for the 12 leg joints. Phases of
the ``jump`` clip: stance (frames 0-49), push-off (55-72), flight (73-84, the reference's
airborne frames), landing and after (85-155).

    .venv/bin/python experiments/g1_jump/g1_action_use.py results/g1/A_stage2 \\
        RUN[/checkpoints/N] [--json]
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

from bcg.transfer.policy import load_policy

PHASES = {"stance": (0, 50), "push-off": (55, 73), "flight": (73, 85), "landing": (85, 156)}
LEGS = slice(0, 12)  # left and right leg joints in the Unitree order


def action_use(path: str, saturated: float = 0.9) -> dict:
    """Per phase: mean |a| and the share of components above ``saturated`` (all, legs)."""
    pol = load_policy(path)
    env = pol.env
    d = env.initial_data(jax.random.PRNGKey(0))
    d = d.replace(time=jnp.zeros_like(d.time))  # the clip's first frame
    act = jax.jit(lambda d: pol.fn(env.observe(d)[None])[0])
    step = jax.jit(env.plain_step)
    actions = []
    for _ in range(int(env.episode_length)):
        a = act(d)
        actions.append(np.asarray(a))
        d, _, _ = step(d, a)
    a = np.abs(np.array(actions))
    out = {}
    for name, (lo, hi) in PHASES.items():
        w = a[lo:hi]
        out[name] = {
            "mean_abs": float(w.mean()),
            "saturated": float((w > saturated).mean()),
            "legs_saturated": float((w[:, LEGS] > saturated).mean()),
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("policies", nargs="+", help="run directories, checkpoints or packed results")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    res = {path: action_use(path) for path in args.policies}
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print("| policy | phase | mean abs a | share abs a > 0.9 | legs: share abs a > 0.9 |")
    print("|---|---|---|---|---|")
    for path, phases in res.items():
        for name, s in phases.items():
            print(
                f"| {path} | {name} | {s['mean_abs']:.2f} | {s['saturated']:.2f} "
                f"| {s['legs_saturated']:.2f} |"
            )


if __name__ == "__main__":
    main()
