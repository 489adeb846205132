"""examples/train_your_robot.py runs end to end (2 iterations, tiny sizes)."""

import csv
import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_your_robot.py"


def test_example_trains_two_iterations(tmp_path, restore_jax):
    spec = importlib.util.spec_from_file_location("train_your_robot", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    run = tmp_path / "run"
    argv = ["--iterations", "2", "--num-envs", "4", "--run-dir", str(run), "--eval-episodes", "1"]
    mod.main(argv)
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [r["iteration"] for r in rows] == ["1", "2"]
    assert all(float(r["skipped_updates"]) == 0 for r in rows)
    assert (run / "training.png").exists() and (run / "eval.json").exists()
