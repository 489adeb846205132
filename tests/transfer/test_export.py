"""ONNX export: onnxruntime reproduces the JAX policy (observation normalisation folded in)."""

import json

import numpy as np

from bcg.transfer.export import OnnxPolicy, check_onnx, export_onnx, metadata_path
from bcg.transfer.policy import load_policy


def test_export_matches_jax_policy(hopper_run, tmp_path):
    run_dir, env, learner, state = hopper_run
    pol = load_policy(run_dir)
    assert pol.iteration == 1 and pol.learner == "shac"
    # the restored policy is the saved one (normaliser included)
    obs = np.random.default_rng(0).standard_normal((7, env.observation_size)).astype(np.float32)
    want = np.asarray(learner.policy(learner.policy_params(state), obs))
    np.testing.assert_allclose(np.asarray(pol.fn(obs)), want, atol=1e-6)

    out = export_onnx(pol, tmp_path / "policy.onnx")
    res = check_onnx(pol, out, num=128)
    assert res["max_abs_diff"] < 1e-5, res
    onnx_pol = OnnxPolicy(out)
    single = onnx_pol(obs[0])
    assert single.shape == (env.action_size,)
    np.testing.assert_allclose(single, want[0], atol=1e-5)
    meta = json.loads(metadata_path(out).read_text())
    assert meta["observation_size"] == env.observation_size
    assert meta["action_size"] == env.action_size
    assert [a["kind"] for a in meta["actuators"]] == ["motor", "motor"]
    assert meta["control_dt"] == env.sim.control_dt


def test_gain_schedule_table_lists_the_factors_per_control_step():
    """A model with a servo gain schedule exports its factors per control step from time 0
    (for deploy code of one's own, which must send the scheduled kp / kd)."""
    import dataclasses
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from pdbot import pdbot_env

    from bcg.transfer.export import gain_schedule_table

    env = pdbot_env()

    def at(time):  # actuator 0 x3 (kd x sqrt 3) in control steps [2, 4)
        f = np.ones(4)
        f[0] = 3.0 if 2 <= round(time / env.sim.control_dt) < 4 else 1.0
        return f, np.sqrt(f)

    env = dataclasses.replace(env, sim=dataclasses.replace(env.sim, servo_scale_at=at))
    table = gain_schedule_table(env)
    assert len(table["kp_factor"]) == env.episode_length == 50
    assert [row[0] for row in table["kp_factor"][:5]] == [1.0, 1.0, 3.0, 3.0, 1.0]
    assert table["kd_factor"][2] == [round(3.0**0.5, 6), 1.0, 1.0, 1.0]
