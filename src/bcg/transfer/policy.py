"""Load the deterministic policy of a ``bcg train`` run (SHAC / BPTT / PPO) as a pure function.

    pol = load_policy("runs/hop")                 # newest checkpoint
    pol = load_policy("runs/hop/checkpoints/150")  # one checkpoint
    a = pol.fn(obs)                               # raw observation (B, n) -> action (B, A)

``fn`` folds the observation normalisation in (raw observation in, action in [-1, 1]^A out), a
closure over the restored parameters, so it can be jitted, run on native-MuJoCo observations or
exported to ONNX. ``env`` is the *training* environment (training stiffness, the run's task).
A packed run (:mod:`bcg.transfer.pack`: run.json and policy.npz, no checkpoints) loads the same.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from bcg.envs.base import ContactEnv
from bcg.learners import record
from bcg.learners.rundir import (  # noqa: F401  (re-exported)
    POLICY_FILE,
    load_packed_params,
    run_float64,
    split_checkpoint_path,
)


@dataclasses.dataclass(frozen=True)
class LoadedPolicy:
    fn: Callable  # obs (B, n) -> action (B, A), deterministic, normalisation folded in
    env: ContactEnv  # the training environment of the run
    run: dict  # run.json (or ppo_config.json) contents
    run_dir: Path
    iteration: int | None
    env_steps: int | None
    learner: str

    @property
    def label(self) -> str:
        it = f"iteration {self.iteration}" if self.iteration is not None else "final"
        return f"{self.run_dir} ({self.learner}, {it})"


def load_policy(path) -> LoadedPolicy:
    """The deterministic policy of a run directory or checkpoint (see module docstring)."""
    run_dir, step = split_checkpoint_path(path)
    if not (run_dir / "run.json").exists():
        if (run_dir / "ppo_config.json").exists():  # written by train_ppo outside `bcg train`
            return _load_ppo(run_dir, step, None)
        raise FileNotFoundError(f"{run_dir} is not a bcg run directory (missing run.json)")
    run = record.read(run_dir)  # completed from the defaults of its time (record.complete)
    if run.get("learner") == "ppo":
        return _load_ppo(run_dir, step, run)
    packed = load_packed(run_dir, step, run)
    if packed is not None:
        env, learner, params, it, env_steps = packed
    else:
        learner, state, it, env_steps = _restore(run_dir, step, run)
        env, params = learner.env, learner.policy_params(state)

    def fn(obs):
        return learner.policy(params, obs)

    return LoadedPolicy(fn, env, run, run_dir, it, env_steps, run["learner"])


def load_packed(run_dir: Path, step: int | None, run: dict):
    """``(env, learner, params, iteration, env_steps)`` when ``run_dir`` (no checkpoint step
    asked for, none saved, a ``policy.npz``) is a packed policy (:mod:`bcg.transfer.pack`),
    else None."""
    from bcg.learners import harness, registry

    if step is not None or harness.latest_step(run_dir) is not None:
        return None
    if not (run_dir / POLICY_FILE).exists():
        return None
    env, learner = registry.build(run)
    params = load_packed_params(run_dir, learner)
    return env, learner, params, run["packed"]["iteration"], run["packed"]["env_steps"]


def load_state(path):
    """``(run, learner, state, iteration, env_steps)``: the whole learner state of a SHAC / BPTT
    run directory (newest checkpoint) or checkpoint."""
    run_dir, step = split_checkpoint_path(path)
    if not (run_dir / "run.json").exists():
        raise FileNotFoundError(f"{run_dir} is not a bcg run directory (missing run.json)")
    run = record.read(run_dir)
    if run.get("learner") == "ppo":
        raise ValueError(f"{run_dir} is a PPO run: its state is brax's, not a bcg learner's")
    return (run, *_restore(run_dir, step, run))


def _restore(run_dir: Path, step: int | None, run: dict):
    """``(learner, state, iteration, env_steps)`` of the SHAC / BPTT run ``run`` from its
    checkpoint ``step`` (None: the newest)."""
    import jax

    from bcg.learners import harness, registry

    if step is None and harness.latest_step(run_dir) is None:
        raise FileNotFoundError(f"no checkpoint in {run_dir / 'checkpoints'}")
    _, learner = registry.build(run)
    template = learner.init(jax.random.PRNGKey(0))
    state, it, env_steps, _ = harness.restore_checkpoint(run_dir, template, step)
    return learner, state, it, env_steps


def _load_ppo(run_dir: Path, step: int | None, run: dict | None) -> LoadedPolicy:
    """A brax PPO run: ``run`` from run.json (``bcg train --learner ppo``), or None for a
    directory written by ``train_ppo`` alone, whose ppo_config.json names task and stiffness
    (when its caller passed them)."""
    from bcg.envs import make_env
    from bcg.learners import ppo
    from bcg.learners.registry import make_run_env

    cfg = json.loads((run_dir / ppo.CONFIG_FILE).read_text())
    if run is None:
        if "task" not in cfg:
            raise FileNotFoundError(
                f"{run_dir} holds a PPO policy but no run.json and no task in "
                f"{ppo.CONFIG_FILE}: cannot tell which environment it was trained on"
            )
        env = make_env(cfg["task"], stiffness=cfg.get("stiffness", "stiff"))
        run = {"task": cfg["task"], "stiffness": cfg.get("stiffness", "stiff"), "learner": "ppo"}
    else:
        env = make_run_env(run)
    fn = ppo.load_ppo_policy(run_dir, env, step)
    env_steps = step if step is not None else cfg.get("env_steps")
    return LoadedPolicy(fn, env, {**cfg, **run}, run_dir, step, env_steps, "ppo")


def policy_from_learner(learner, state, env=None, run: dict | None = None) -> LoadedPolicy:
    """A :class:`LoadedPolicy` from an in-memory learner state (tests, notebooks)."""
    params = learner.policy_params(state)

    def fn(obs):
        return learner.policy(params, obs)

    return LoadedPolicy(
        fn, env or learner.env, dict(run or {}), Path("."), None, None, learner.name
    )


def evaluate_policy(pol: LoadedPolicy, episodes: int, seed: int = 1) -> dict:
    """:func:`bcg.learners.harness.evaluate` of the deterministic policy (plain step) over
    ``episodes`` episodes from the initial states of ``seed``."""
    import jax

    from bcg.learners import harness

    key = jax.random.PRNGKey(seed)
    return harness.evaluate(pol.env, lambda _, obs: pol.fn(obs), None, episodes, key)
