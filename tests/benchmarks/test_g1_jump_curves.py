"""benchmarks/g1_jump_curves.py: the seed aggregation by hand, unfinished runs, and the smoke."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "g1_jump_curves.py"
spec = importlib.util.spec_from_file_location("g1_jump_curves", SCRIPT)
C = importlib.util.module_from_spec(spec)
spec.loader.exec_module(C)


def test_moving_average_is_centred_and_skips_nans():
    assert C.moving_average([1.0, 2.0, 3.0, 4.0], 3) == [1.5, 2.0, 3.0, 3.5]
    out = C.moving_average([1.0, math.nan, 3.0], 3)
    assert out == [1.0, 2.0, 3.0]
    assert C.moving_average([5.0, 7.0], 1) == [5.0, 7.0]


def test_arm_curve_is_the_mean_and_range_over_the_seeds_that_reached_each_iteration():
    a = {"env_steps": [10.0, 20.0, 30.0], "r": [1.0, 2.0, 3.0]}
    b = {"env_steps": [10.0, 20.0], "r": [3.0, 6.0]}  # a shorter seed
    x, mean, lo, hi, n = C.arm_curve([a, b], "env_steps", "r", 1)
    assert x == [10.0, 20.0, 30.0] and n == [2, 2, 1]
    assert mean == [2.0, 4.0, 3.0] and lo == [1.0, 2.0, 3.0] and hi == [3.0, 6.0, 3.0]
    assert C.arm_curve([a], "env_steps", "missing", 1) is None


def _run(root, arm, seed, rows, iterations):
    d = root / arm / f"seed{seed}"
    d.mkdir(parents=True)
    lines = ["iteration,env_steps,wall_time,episode_return,episode_length,bundled_fraction"]
    lines += [f"{i},{i * 100},{i * 60.0},{10.0 * i},{20 + i},0.2" for i in range(1, rows + 1)]
    (d / "metrics.csv").write_text("\n".join(lines) + "\n")
    (d / "run.json").write_text(json.dumps({"iterations": iterations}))
    return d


def test_plot_marks_unfinished_runs_and_writes_the_png(tmp_path):
    done = _run(tmp_path / "jump", "stiff-analytic", 0, 5, 5)
    part = _run(tmp_path / "wip", "stiff-bcg", 0, 3, 5)
    runs = C.find_runs((tmp_path / "jump", tmp_path / "wip"))
    assert runs == {("stiff-analytic", "seed0"): done, ("stiff-bcg", "seed0"): part}
    assert C.is_unfinished(part, C.read_metrics(part))
    assert not C.is_unfinished(done, C.read_metrics(done))
    out = tmp_path / "curves.png"
    lines = C.plot(runs, out, window=2)
    assert out.stat().st_size > 10_000
    assert lines[0].startswith("stiff-bcg: 1 seed(s) (in progress), up to 300 env steps")
    assert lines[1].startswith("stiff-analytic: 1 seed(s), up to 500 env steps")


def test_bad_arm_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        C.main(["--arm", f"stiff-bcg=/{tmp_path}"])
    assert "ARM/seedK=RUN_DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        C.main(["--arm", f"stiff-bcg/seed0={tmp_path}"])
    assert "no metrics.csv" in capsys.readouterr().err


def test_smoke_plots_the_committed_arms(capsys):
    assert C.main(["--smoke"]) == 0
    assert "wrote " in capsys.readouterr().out
