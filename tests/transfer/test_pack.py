"""``bcg pack``: the policy alone (run.json + policy.npz) acts exactly like the checkpoint it
came from, in load_policy and through the CLI, and a policy.npz that does not fit is an error."""

import json
import shutil

import numpy as np
import pytest

from bcg import cli
from bcg.transfer.pack import POLICY_FILE, pack_policy
from bcg.transfer.policy import load_policy


def test_packed_policy_acts_like_its_checkpoint(hopper_run, tmp_path, restore_jax, capsys):
    run_dir, env, _, _ = hopper_run
    out = tmp_path / "packed"
    assert cli.main(["pack", str(run_dir / "checkpoints" / "1"), str(out)]) == 0
    assert "packed the policy" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == sorted(["run.json", POLICY_FILE])
    packed, full = load_policy(out), load_policy(run_dir)
    assert packed.iteration == 1 and packed.env_steps == 8
    obs = np.random.default_rng(0).normal(size=(16, env.observation_size)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(packed.fn(obs)), np.asarray(full.fn(obs)))
    assert cli.main(["eval", str(out), "--episodes", "2", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["returns"]) == 2


def test_a_policy_file_of_another_network_is_an_error(hopper_run, tmp_path):
    run_dir, _, _, _ = hopper_run
    out = pack_policy(run_dir, tmp_path / "packed")
    run = json.loads((out / "run.json").read_text())
    run["config"]["actor_hidden"] = [4]
    (out / "run.json").write_text(json.dumps(run))
    with pytest.raises(ValueError, match="does not fit the policy"):
        load_policy(out)
    with pytest.raises(ValueError, match="another folder"):
        pack_policy(run_dir, run_dir)


def test_packed_metrics_end_at_the_packed_iteration(hopper_run, tmp_path):
    run_dir, _, _, _ = hopper_run
    src = shutil.copytree(run_dir, tmp_path / "run")
    (src / "metrics.csv").write_text("iteration,env_steps\n1,8\n2,16\n3,24\n")
    out = pack_policy(src / "checkpoints" / "1", tmp_path / "packed")
    assert (out / "metrics.csv").read_text() == "iteration,env_steps\n1,8\n"
