"""Transfer and deploy on the G1 tracking env (slow: the G1 model and its 327-D observation).

Open-loop actions isolate the deploy transport: the PD law through LowCmd reproduces MuJoCo's
position servos up to their 1 ms control filter (which the motor driver does not have)."""

import sys
from pathlib import Path

import jax
import numpy as np
import pytest

pytestmark = pytest.mark.slow
g1 = pytest.importorskip("bcg.envs.g1")

from bcg.transfer import native  # noqa: E402
from bcg.transfer.policy import LoadedPolicy  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_deploy import direct_native, via_runner  # noqa: E402


class OpenLoop:
    def __init__(self, n):
        self.k, self.n = 0, n

    def __call__(self, obs):
        self.k += 1
        return 0.3 * np.sin(0.2 * self.k + np.arange(self.n))


def _open_loop_runs(env, steps=50):
    m, _ = native.native_model(env, "g1_jump")
    key = jax.random.PRNGKey(2)
    want, _ = direct_native(env, m, OpenLoop(env.action_size), key, steps)
    got, _ = via_runner(env, m, OpenLoop(env.action_size), key, steps)
    assert np.abs(want[:, 7:] - want[0, 7:]).max() > 0.1
    return np.abs(got - want).max(axis=1)


def test_g1_deploy_transport_matches_native_servos():
    # without the servo filter: the LowCmd PD law is MuJoCo's position servo (torque limits too)
    err = _open_loop_runs(g1.g1_jump(config=g1.G1Config(action_memory=False)))
    assert err.max() < 1e-6, err.max()
    # with it: the filter's 0.7% lag in the first physics step of a new target (1e-4 rad),
    # amplified at touch-down / lift-off events
    err = _open_loop_runs(g1.g1_jump())
    assert err[:10].max() < 1e-3 and err.max() < 0.05, err


def test_g1_transfer_native_report():
    env = g1.g1_jump()
    pol = LoadedPolicy(
        lambda obs: np.zeros((obs.shape[0], env.action_size), np.float32),  # hold the crouch
        env,
        {"task": "g1_jump"},
        Path("."),
        None,
        None,
        "test",
    )
    rep = native.transfer(pol, native.TransferConfig(runs=2, seconds=0.6, training_sim=False))
    text = native.format_report(rep)
    assert "randomisation: G1 table" in text and "fall: env.fell()" in text
    assert "foot geoms: env.foot_geom_ids (8)" in text
    for r in rep["native"]["runs"]:
        assert r["contact_steps"] > 0 and 0 < r["tracking_error_cm"] < 100
