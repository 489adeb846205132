"""benchmarks/throughput.py: the learner is built from a recipe or a run's record as
``bcg train`` builds it (no compile here)."""

import importlib.util
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("throughput", ROOT / "benchmarks" / "throughput.py")
T = importlib.util.module_from_spec(spec)
sys.modules["throughput"] = T
spec.loader.exec_module(T)


def test_recipe_runs_give_each_estimator_its_own_tables():
    a = T.parse(["--recipe", str(ROOT / "recipes/g1_jump.toml"), "--param", "bcg.capacity=8"])
    params = T._params(a.param)
    bcg, analytic = T.build_run(a, "bcg", params), T.build_run(a, "analytic", params)
    assert bcg["estimator_params"] == {"tau": "auto", "capacity": 8}
    assert analytic["estimator"] == "analytic" and analytic["estimator_params"] == {}
    assert bcg["env_params"] == analytic["env_params"] and bcg["num_envs"] == 64


def test_a_run_record_keeps_its_settings_and_swaps_the_estimator():
    a = T.parse(["--run", str(ROOT / "results/g1/A_stage29_ff1"), "--num-envs", "8"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same = T.build_run(a, "bcg", {})
        other = T.build_run(a, "analytic", {})
    assert same["estimator_params"]["tau"] == 817.69 and same["num_envs"] == 8
    assert "estimator" in same["resolved"]  # the recorded BCG settings (mean forward, ...)
    assert other["estimator_params"] == {} and "estimator" not in other["resolved"]
    assert other["env_params"] == same["env_params"] and other["config"] == same["config"]
