"""benchmarks/g1_jump_arms.py: the Wilson interval, arm discovery, and (``--full``) a native
smoke run of the committed policy A."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "g1_jump_arms", ROOT / "benchmarks" / "g1_jump_arms.py"
)
A = importlib.util.module_from_spec(spec)
sys.modules["g1_jump_arms"] = A
spec.loader.exec_module(A)


def test_wilson_interval():
    """Closed forms at the ends (z = 1.96): 0 of n has upper bound z^2 / (n + z^2), n of n has
    lower bound n / (n + z^2); k of n mirrors n - k of n; the interval holds k / n."""
    z2 = 1.96**2
    assert A.wilson(0, 50) == pytest.approx((0.0, z2 / (50 + z2)), abs=1e-12)
    assert A.wilson(1, 1) == pytest.approx((1 / (1 + z2), 1.0), abs=1e-12)
    for k in range(51):
        lo, hi = A.wilson(k, 50)
        mlo, mhi = A.wilson(50 - k, 50)
        assert lo == pytest.approx(1 - mhi) and hi == pytest.approx(1 - mlo)
        assert lo <= k / 50 <= hi


def test_committed_arms_are_found_by_folder(tmp_path):
    for arm, seed in (("stiff-bcg", 0), ("stiff-bcg", 1), ("ppo", 0)):
        d = tmp_path / arm / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "run.json").write_text("{}")
    (tmp_path / "notes").mkdir()  # no run.json: not an arm
    assert list(A.committed_arms(tmp_path)) == ["ppo/seed0", "stiff-bcg/seed0", "stiff-bcg/seed1"]


def test_bad_options_are_errors(capsys):
    with pytest.raises(SystemExit):
        A.main(["--conditions", "model,wind"])
    assert "wind" in capsys.readouterr().err


@pytest.mark.slow
def test_smoke_runs_policy_a_natively(capsys):
    assert A.main(["--smoke", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["arms"]["A"]
    assert [r["condition"] for r in rows] == ["model", "push"]
    assert all(r["runs"] == 1 and r["env_steps"] == 2734080 for r in rows)
