"""``bcg train --learner ppo`` writes the run format every learner writes (run.json with the task,
metrics.csv, training.png), and ``bcg eval`` / ``export`` / ``transfer`` rebuild the run's own
task from it: a tiny PPO run of pogo_hop (not the default hopper_jump)."""

import csv
import json

from bcg import cli

PPO_TINY = [
    "--num-envs", "4", "--timesteps", "128", "--actor-hidden", "8", "--critic-hidden", "8",
    "--param", "ppo.batch_size=4", "--param", "ppo.num_minibatches=2",
    "--param", "ppo.unroll_length=4", "--param", "ppo.num_updates_per_batch=1",
    "--param", "ppo.num_evals=3", "--param", "ppo.num_eval_envs=2",
]  # fmt: skip


def test_ppo_run_through_the_cli_is_a_bcg_run(tmp_path, capsys, restore_jax):
    run = tmp_path / "ppo_pogo"
    argv = ["train", "--task", "pogo_hop", "--stiffness", "gated", "--learner", "ppo"]
    assert cli.main([*argv, *PPO_TINY, "--quiet", "--run-dir", str(run)]) == 0
    capsys.readouterr()

    spec = json.loads((run / "run.json").read_text())
    assert spec["task"] == "pogo_hop" and spec["learner"] == "ppo"
    assert spec["stiffness"] == "gated" and spec["estimator"] is None
    assert spec["config"]["unroll_length"] == 4 and spec["config"]["policy_hidden_layer_sizes"]
    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3]
    assert {"env_steps", "wall_time"} <= set(rows[0])
    assert (run / "training.png").stat().st_size > 1000

    assert cli.main(["eval", str(run), "--episodes", "2", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["returns"]) == 2
    # pogo_hop's own metrics: the env was rebuilt as pogo_hop, not as hopper_jump
    assert "hop_height_max" in res and res["mean_length"] > 0

    onnx = tmp_path / "p.onnx"
    assert cli.main(["export", str(run), "--onnx", str(onnx)]) == 0
    assert "max abs diff" in capsys.readouterr().out and onnx.exists()

    js = tmp_path / "t.json"
    argv = ["transfer", str(run), "--runs", "1", "--seconds", "0.2", "--out", str(js)]
    assert cli.main([*argv, "--no-training-sim"]) == 0
    rep = json.loads(js.read_text())
    assert rep["native"]["summary"]["runs"] == 1
    assert "pogo" in json.dumps(rep).lower() or rep["task"] == "pogo_hop"
