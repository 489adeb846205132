"""The command line (bcg.cli), run in-process.

Bad arguments must fail with exit code 2 and a one-line message before anything is compiled:
``run_report`` (the first place that compiles) is replaced by a function that fails the test.
Only one end-to-end run compiles (the analytic gradient of falling_mass, batch 4, horizon 8 --
the same shapes as tests/diagnostics/test_report.py, so the persistent cache can serve it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import bcg.diagnostics.report as report_mod
from bcg import cli
from bcg.envs import tasks

CACHE = Path(jax.config.jax_compilation_cache_dir)  # the suite's cache (tests/conftest.py)
_JAX_OPTIONS = (
    "jax_enable_x64",
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
)

BROKEN_XML = "<mujoco><worldbody><body name='a'><geom type='sphere' size='0.1'/></worldbody>"

HINGE_PENDULUM = """
<mujoco model="pendulum">
  <worldbody>
    <body name="pole" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(autouse=True)
def _isolate_jax_config(monkeypatch):
    """cli._setup_jax changes global JAX options: point it at the tests' cache and restore them."""
    monkeypatch.setenv("BCG_JAX_CACHE", str(CACHE))
    saved = {k: jax.config.values[k] for k in _JAX_OPTIONS}
    yield
    for k, v in saved.items():
        jax.config.update(k, v)


@pytest.fixture
def no_compile(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("reached run_report (JAX compile) before the argument error")

    monkeypatch.setattr(report_mod, "run_report", fail)


def test_tasks_lists_all(capsys):
    assert cli.main(["tasks"]) == 0
    out = capsys.readouterr().out
    names = tasks.list_tasks()
    assert len(names) == 5
    for name in ("falling_mass", "bouncing_ball", "ball_wall", "hopper", "pogo"):
        assert name in names
        assert name in out
    from bcg.envs import POLICY_ENVS

    lines = out.strip().splitlines()
    assert lines[0].startswith("gradient-report tasks") and len(lines) == 2 + 5 + len(POLICY_ENVS)
    for name in POLICY_ENVS:  # the training tasks, after their heading
        assert any(ln.split()[0] == name for ln in lines[7:])


@pytest.mark.parametrize("platform", [None, "cpu"])
def test_platform_is_left_to_jax_and_the_device_line_printed(platform):
    """No JAX_PLATFORMS and no --platform: bcg leaves the backend to JAX (here the CPU is the
    only one) and names it on stderr; stdout holds only the command's output (mujoco.mjx
    prints import notices there)."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    env["BCG_JAX_CACHE"] = str(CACHE)
    argv = ["tasks"] + (["--platform", platform] if platform else [])
    code = "import os, sys; from bcg import cli; r = cli.main(sys.argv[1:]); " + (
        "print('JAX_PLATFORMS=' + os.environ.get('JAX_PLATFORMS', '<unset>'), file=sys.stderr);"
        " sys.exit(r)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    report = [ln.split()[0] for ln in lines[1 : 1 + len(tasks.list_tasks())]]
    assert lines[0].startswith("gradient-report tasks") and report == tasks.list_tasks()
    assert "[bcg] JAX " in proc.stderr and "backend cpu" in proc.stderr, proc.stderr
    assert f"JAX_PLATFORMS={platform or '<unset>'}" in proc.stderr


def test_platform_choices_are_checked(capsys):
    with pytest.raises(SystemExit):
        cli.main(["tasks", "--platform", "quantum"])
    assert "--platform" in capsys.readouterr().err


def _files(tmp_path):
    broken = tmp_path / "broken.xml"
    broken.write_text(BROKEN_XML)
    hinge = tmp_path / "pendulum.xml"
    hinge.write_text(HINGE_PENDULUM)
    return {"broken": str(broken), "hinge": str(hinge)}


ERROR_CASES = [
    (["--model", "/nonexistent.xml"], "not found"),
    (["--model", "{broken}"], "could not parse"),
    (["--estimators", "analytic,nope"], "unknown estimator"),
    (["--param", "bcg.sigma_p=-1"], "sigma_p"),
    (["--param", "bcg.num_branches=0"], "num_branches"),
    (["--param", "bcg.nope=1"], "no parameter"),
    (["--param", "nope.sigma=1"], "unknown estimator"),
    (["--param", "sigma_p=1"], "NAMESPACE.NAME=VALUE"),
    (["--batch", "1"], "batch"),
    (["--task", "falling_mass", "--batch", "1"], "batch"),
    (["--horizon", "0"], "horizon"),
    (["--task", "falling_mass", "--horizon", "51"], "horizon"),
    (["--task", "no_such_task"], "unknown task"),
    (["--stiffness", "squishy"], "stiffness"),
    (["--task", "falling_mass", "--sweep", "soft,squishy"], "stiffness"),
    (["--model", "{hinge}"], "free or slide"),
]


@pytest.mark.parametrize(
    ("argv", "message"), ERROR_CASES, ids=[" ".join(a) for a, _ in ERROR_CASES]
)
def test_grad_errors_fail_fast(argv, message, tmp_path, capsys, no_compile):
    files = _files(tmp_path)
    argv = [a.format(**files) for a in argv]
    code = cli.main(["grad", *argv, "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("[bcg] JAX "), err  # the device line, then the one error line
    lines = lines[1:]
    assert len(lines) == 1, err
    assert lines[0].startswith("bcg: error:")
    assert message.lower() in lines[0].lower(), lines[0]
    assert out == ""
    assert not (tmp_path / "out").exists()


def test_grad_end_to_end_json(tmp_path, capsys):
    argv = [
        "grad",
        "--task",
        "falling_mass",
        "--stiffness",
        "soft",
        "--estimators",
        "analytic",
        "--batch",
        "4",
        "--horizon",
        "8",
        "--json",
        "--out",
        str(tmp_path),
        "--quiet",
    ]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert err == cli.device_line() + "\n"  # --quiet: only the device line
    result = json.loads(out)
    assert result["model"] == "falling_mass"
    assert (result["batch"], result["horizon"]) == (4, 8)
    assert list(result["estimators"]) == ["analytic"]
    r = result["estimators"]["analytic"]
    for key in (
        "summed_variance",
        "cosine_to_reference",
        "triggered_fraction",
        "nan_count",
        "time_ratio_vs_analytic",
    ):
        assert key in r
    assert r["nan_count"] == 0
    assert r["time_ratio_vs_analytic"] == 1.0
    assert r["cosine_to_reference"] == pytest.approx(1.0, abs=1e-9)
    js = tmp_path / "grad_falling_mass.json"
    png = tmp_path / "grad_falling_mass.png"
    assert js.is_file() and png.is_file()
    assert json.loads(js.read_text()) == result
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
