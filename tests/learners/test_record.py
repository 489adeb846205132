"""Run records (:mod:`bcg.learners.record`): run.json holds every resolved setting, a run made
before a default changed is resumed and evaluated with its own settings, and an older record is
completed from the defaults of its time."""

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import jax
import pytest
from toy import toy_env

from bcg import cli
from bcg.envs import POLICY_ENVS
from bcg.estimators import registry as est_registry
from bcg.learners import record, shac
from bcg.transfer.policy import load_state

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--num-envs", "2", "--horizon", "4", "--actor-hidden", "8", "--critic-hidden", "8"]


@pytest.fixture
def toy_task(monkeypatch):
    monkeypatch.setitem(POLICY_ENVS, "toy", lambda stiffness="stiff": toy_env(episode_length=6))
    cache = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("BCG_JAX_CACHE", str(cache))
    yield
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_compilation_cache_dir", cache)


def _train(run_dir, iterations, *extra):
    argv = ["train", "--task", "toy", "--learner", "shac", "--estimator", "analytic", *TINY]
    argv += ["--iterations", str(iterations), "--checkpoint-every", "1", "--run-dir", str(run_dir)]
    argv += ["--eval-episodes", "0", "--float64", "--quiet", *extra]
    assert cli.main(argv) == 0


def _rows(run_dir):
    lines = (Path(run_dir) / "metrics.csv").read_text().splitlines()
    head = lines[0].split(",")
    keep = [i for i, h in enumerate(head) if h != "wall_time"]
    return [[r.split(",")[i] for i in keep] for r in lines[1:]]


def _eval(run_dir, capsys):
    capsys.readouterr()
    assert cli.main(["eval", str(run_dir), "--episodes", "2", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@dataclasses.dataclass(frozen=True)
class _ChangedSHAC(shac.SHACConfig):
    """SHAC's settings after a (pretend) change of its defaults."""

    actor_lr: float = 0.05
    critic_iterations: int = 3


def test_record_holds_every_setting_and_changed_defaults_do_not_move_a_run(
    toy_task, tmp_path, monkeypatch, capsys
):
    ref, run = tmp_path / "ref", tmp_path / "run"
    _train(ref, 2)  # the reference: made, then resumed to 3 iterations with nothing changed
    _train(ref, 3, "--resume")
    ref_eval = _eval(ref, capsys)
    _train(run, 2)
    rec = json.loads((run / "run.json").read_text())
    assert rec["record_version"] == record.RECORD_VERSION
    res = rec["resolved"]
    assert res["estimator"] == {"env_clip": None, "backward_armature": None}
    shac_fields = {f.name for f in dataclasses.fields(shac.SHACConfig)}
    assert set(res["learner"]) == shac_fields
    assert res["learner"]["actor_lr"] == shac.SHACConfig.actor_lr
    assert res["env"] == {"episode_length": 6, "limit": 1.0}
    assert res["sim"]["substeps"] == 2
    assert {"bcg", "git_commit", "jax", "jaxlib", "mujoco", "mujoco-mjx"} <= set(rec["versions"])

    # today's defaults change: the learner's, the estimator's and the env factory's
    old = shac.SHACConfig
    monkeypatch.setattr(shac, "SHACConfig", _ChangedSHAC)
    monkeypatch.setitem(est_registry.DEFAULTS, "analytic", {"env_clip": 1.0})
    monkeypatch.setitem(
        POLICY_ENVS, "toy", lambda stiffness="stiff": toy_env(episode_length=6, limit=0.3)
    )
    # the record wins: resumed to 3 iterations, the run matches the reference
    _train(run, 3, "--resume")
    assert _rows(run) == _rows(ref)
    assert _eval(run, capsys) == ref_eval
    _, learner, _, _, _ = load_state(run)
    assert learner.cfg.actor_lr == old.actor_lr
    assert learner.cfg.critic_iterations == 16
    assert getattr(learner.estimator, "env_clip", None) is None and learner.env.limit == 1.0
    # the control: a new run is built with the changed defaults
    new = record.with_resolved(
        {"learner": "shac", "num_envs": 2, "estimator": "analytic", "config": {}},
        toy_env(limit=0.3),
        None,
        est_registry.make("analytic"),
    )
    assert new["resolved"]["learner"]["actor_lr"] == 0.05
    assert new["resolved"]["estimator"]["env_clip"] == 1.0


def test_bcg_record_names_every_parameter():
    """A BCG run records all of BCG's parameters (forward mode and offsets included)."""
    run = {"learner": "shac", "num_envs": 2, "estimator": "bcg", "estimator_params": {"tau": 9}}
    rec = record.with_resolved(run, toy_env(), None, est_registry.make("bcg", tau=9))
    fields = {f.name for f in dataclasses.fields(est_registry.BCG)} - {"name"} | {"env_clip"}
    assert set(rec["resolved"]["estimator"]) == fields
    est = rec["resolved"]["estimator"]
    assert est["forward"] == "plain" and est["antithetic"] is True and est["tau"] == 9


def _legacy(tmp_path, committed: str | None) -> Path:
    """An older run.json (no resolved settings) of a BCG run in a git checkout, committed at
    ``committed`` (None: not committed)."""
    repo = tmp_path / "repo"
    (repo / "run").mkdir(parents=True)
    legacy = {
        "task": "toy",
        "stiffness": "stiff",
        "learner": "shac",
        "estimator": "bcg",
        "estimator_params": {"tau": 50.0},
        "iterations": 2,
        "num_envs": 2,
        "horizon": 4,
        "seed": 0,
        "float64": True,
        "config": {"actor_lr": 0.001},
    }
    (repo / "run" / "run.json").write_text(json.dumps(legacy))
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    if committed is not None:
        env = {**os.environ, "GIT_COMMITTER_DATE": committed, "GIT_AUTHOR_DATE": committed}
        subprocess.run([*git, "add", "run/run.json"], check=True)
        subprocess.run([*git, "commit", "-qm", "run"], check=True, env=env)
    return repo / "run"


def test_older_record_takes_the_defaults_of_its_time(tmp_path):
    run_dir = _legacy(tmp_path, "2026-12-05T12:00:00+00:00")
    with pytest.warns(record.RecordWarning) as w:
        run = record.read(run_dir)
    (msg,) = [str(x.message) for x in w]
    assert "forward='mean'" in msg and "antithetic=False" in msg
    assert "bcg.num_branches" in msg and "shac.gamma" in msg  # named: from today's defaults
    assert "bcg.forward" not in msg.split("today's defaults")[1]
    assert "shac.actor_lr" not in msg  # given in the record
    est = record.effective(run, "estimator")
    assert est["forward"] == "mean" and est["antithetic"] is False and est["tau"] == 50.0
    assert record.effective(run, "learner")["actor_lr"] == 0.001
    assert "forward='mean'" in record.describe(run)
    # written back (pack, resume) it is a complete record that keeps where it came from
    back = record.to_write(run)
    assert back["record_version"] == record.RECORD_VERSION and "completed_from" in back
    again = record.complete(json.loads(json.dumps(back)))
    assert record.effective(again, "estimator")["forward"] == "mean"


@pytest.mark.parametrize("committed", [None, "2026-12-06T12:00:00+00:00"])
def test_older_record_of_unknown_or_later_date_takes_todays_defaults(tmp_path, committed):
    run_dir = _legacy(tmp_path, committed)
    with pytest.warns(record.RecordWarning, match="bcg.forward") as w:
        run = record.read(run_dir)
    assert len(w) == 1
    assert record.effective(run, "estimator")["forward"] == "plain"


def test_committed_jump_policy_rebuilds_with_its_training_estimator():
    """The G1 jump policy was trained before BCG's defaults changed (mean forward, independent
    offsets): it is rebuilt with those, not today's."""
    run_dir = ROOT / "results" / "g1" / "A_stage29_ff1"
    if record.made_before(run_dir / "run.json") is None:
        pytest.skip("needs the git history of the repository (not a shallow clone)")
    with pytest.warns(record.RecordWarning):
        run = record.read(run_dir)
    est = record.effective(run, "estimator")
    assert est["forward"] == "mean" and est["antithetic"] is False
    assert est["tau"] == 817.69 and est["capacity"] == 20


def test_a_setting_recorded_on_its_own_is_applied_inside_the_mapping_that_now_holds_it():
    """A record made when the G1 reward's weights were env fields of their own (``w_flight``)
    rebuilds an env that keeps them in one ``scales`` mapping with the recorded value; a
    record of the mapping itself is compared as a whole."""

    @dataclasses.dataclass(frozen=True)
    class Env:
        scales: dict
        limit: float = 1.0

    env = Env(scales={"w_flight": 0.0, "w_tuck": 0.0})
    old = {"resolved": {"env": {"w_flight": 40.0, "w_tuck": 0.0, "limit": 1.0, "gone": 3}}}
    assert record.env_differences(old, env) == {
        "scales": ({"w_flight": 40.0, "w_tuck": 0.0}, {"w_flight": 0.0, "w_tuck": 0.0})
    }
    assert record.apply_env_record(old, env).scales == {"w_flight": 40.0, "w_tuck": 0.0}
    new = {"resolved": {"env": {"scales": {"w_flight": 2.0, "w_tuck": 1.0}, "w_flight": 9.0}}}
    assert record.apply_env_record(new, env).scales == {"w_flight": 2.0, "w_tuck": 1.0}
    assert record.env_differences({"resolved": {"env": {"limit": 1.0}}}, env) == {}
