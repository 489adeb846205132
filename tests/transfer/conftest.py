"""A tiny hopper_jump SHAC checkpoint (random actor, non-trivial observation normaliser), saved
without training so that the transfer / export / deploy tests compile nothing heavy."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import pytest

RUN = {
    "task": "hopper_jump",
    "stiffness": "stiff",
    "learner": "shac",
    "estimator": "analytic",
    "estimator_params": {},
    "iterations": 1,
    "num_envs": 2,
    "horizon": 4,
    "seed": 0,
    "float64": False,
    "config": {"actor_hidden": [8, 8], "critic_hidden": [8], "init_log_std": -1.0},
}


def make_state(learner, seed=0):
    """Initial learner state with a non-trivial observation normaliser (so that folding it
    into the exported policy is tested)."""
    state = learner.init(jax.random.PRNGKey(seed))
    n = state.obs_rms.mean.shape[0]
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed + 1))
    mean = 0.3 * jax.random.normal(k1, (n,), state.obs_rms.mean.dtype)
    var = jnp.exp(jax.random.normal(k2, (n,), state.obs_rms.var.dtype))
    return dataclasses.replace(state, obs_rms=state.obs_rms._replace(mean=mean, var=var))


@pytest.fixture(scope="session")
def hopper_run(tmp_path_factory):
    """``(run_dir, env, learner, state)`` of a saved tiny hopper_jump checkpoint."""
    from bcg.learners import harness, registry

    run_dir = tmp_path_factory.mktemp("transfer") / "hop_run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps(RUN))
    env, learner = registry.build(RUN)
    state = make_state(learner)
    mgr = harness._manager(run_dir)
    harness.save_checkpoint(mgr, state, 1, 8, 0.0)
    mgr.close()
    return run_dir, env, learner, state
