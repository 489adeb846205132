"""Recipes (:mod:`bcg.learners.recipe`) and schedules (:mod:`bcg.learners.schedule`): one file
holds every setting, the command line overrides it (recorded), a schedule changes settings
in the same process, a killed run resumes to the same result, and a bad recipe is rejected
before anything is compiled, naming the key."""

import functools
import json
from pathlib import Path

import jax
import pytest

from bcg import cli
from bcg.learners import harness, registry
from bcg.learners.recipe import read_recipe, recipe_options
from bcg.learners.record import sim_settings
from bcg.learners.run_config import prepare_run
from bcg.learners.schedule import run_at

TOY = """
[recipe]
name = "toy with a schedule"
[run]
task = "toy:toy_task"
iterations = 4
num_envs = 2
horizon = 4
float64 = true
[env]
episode_length = 6
[learner]
name = "shac"
[learner.shac]
actor_hidden = [8]
critic_hidden = [8]
actor_lr = 0.01
[learner.ppo]
learning_rate = 1e-3
[estimator]
name = "analytic"
env_clip = 5.0
[estimator.bcg]
num_branches = 4
[[schedule]]
from = 2
env = { limit = 0.5 }
learner = { actor_lr = 0.002 }
"""


@pytest.fixture
def toy_recipe(tmp_path, monkeypatch):
    path = tmp_path / "toy.toml"
    path.write_text(TOY)
    yield path
    jax.config.update("jax_enable_x64", True)  # bcg train sets the run's precision


def _rows(run_dir):
    lines = (Path(run_dir) / "metrics.csv").read_text().splitlines()
    head = lines[0].split(",")
    keep = [i for i, h in enumerate(head) if h != "wall_time"]
    return [[r.split(",")[i] for i in keep] for r in lines[1:]]


def _train(recipe, run_dir, *extra):
    argv = ["train", "--recipe", str(recipe), "--run-dir", str(run_dir), "--quiet"]
    argv += ["--eval-episodes", "0", *extra]
    assert cli.main(argv) == 0


def test_recipe_with_a_schedule_resumes_after_a_kill_to_the_same_result(
    toy_recipe, tmp_path, monkeypatch
):
    ref, run = tmp_path / "ref", tmp_path / "run"
    _train(toy_recipe, ref, "--checkpoint-every", "2")
    stored = json.loads((ref / "run.json").read_text())
    # the recipe and every phase's settings are recorded; the phase after 2 iterations was
    # built with its own values
    assert stored["recipe"]["contents"] == read_recipe(toy_recipe)
    assert stored["recipe"]["overrides"] == {}
    assert stored["resolved"]["learner"]["actor_lr"] == 0.01
    assert stored["resolved"]["env"]["limit"] == 1.0
    phase = stored["schedule"][0]
    assert phase["from"] == 2 and phase["resolved"]["learner"]["actor_lr"] == 0.002
    assert phase["resolved"]["env"]["limit"] == 0.5
    assert stored["resolved"]["estimator"]["env_clip"] == 5.0
    # eval / transfer / export build the final phase
    env, learner = registry.build(stored)
    assert env.limit == 0.5 and learner.cfg.actor_lr == 0.002
    env0, learner0 = registry.build(run_at(stored, 0))
    assert env0.limit == 1.0 and learner0.cfg.actor_lr == 0.01

    class Killed(Exception):
        pass

    def kill_at_3(it, m):
        if it == 3:  # the newest checkpoint is iteration 2's: the phase boundary
            raise Killed

    monkeypatch.setattr(harness, "train", functools.partial(harness.train, on_iteration=kill_at_3))
    with pytest.raises(Killed):
        _train(toy_recipe, run, "--checkpoint-every", "2")
    monkeypatch.undo()
    assert len(_rows(run)) == 3 and harness.latest_step(run) == 2
    _train(toy_recipe, run, "--checkpoint-every", "2", "--resume")
    assert _rows(run) == _rows(ref)
    # control: without the schedule the first phase is the same and the second is not
    flat = tmp_path / "flat.toml"
    flat.write_text(TOY.split("[[schedule]]")[0])
    _train(flat, tmp_path / "flat", "--checkpoint-every", "2")
    rows, ref_rows = _rows(tmp_path / "flat"), _rows(ref)
    assert rows[:2] == ref_rows[:2] and rows[2] != ref_rows[2] and rows[3] != ref_rows[3]


def test_command_line_options_override_the_recipe_and_are_recorded(toy_recipe, tmp_path):
    opts = recipe_options(
        toy_recipe, estimator="bcg", seed=3, params=("shac.actor_lr=0.05", "bcg.tau=40")
    )
    run, run_dir = prepare_run(opts)
    assert run["seed"] == 3 and run["estimator"] == "bcg" and run["num_envs"] == 2
    # the shared estimator table and the chosen estimator's own table, under the command line
    assert run["estimator_params"] == {"env_clip": 5.0, "num_branches": 4, "tau": 40}
    # --param wins in every phase: the phase keeps only what the command line does not set
    assert run["config"]["actor_lr"] == 0.05 and run["schedule"] == [
        {"from": 2, "env_params": {"limit": 0.5}}
    ]
    assert run["recipe"]["overrides"] == {
        "estimator": "bcg",
        "seed": 3,
        "params": ["shac.actor_lr=0.05", "bcg.tau=40"],
    }
    assert run_dir.name.endswith("bcg_stiff_s3")
    # PPO takes [learner.ppo], no estimator, and the final phase's env (brax trains one env)
    ppo, _ = prepare_run(recipe_options(toy_recipe, learner="ppo"))
    assert ppo["estimator"] is None and ppo["config"] == {"learning_rate": 1e-3}
    assert ppo["env_params"] == {"episode_length": 6, "limit": 0.5} and "schedule" not in ppo


@pytest.mark.parametrize(
    "edit, names",
    [
        (("iterations = 4", "iteratons = 4"), "run.iteratons"),
        (("num_envs = 2", 'num_envs = "2"'), "run.num_envs"),
        (("actor_lr = 0.01", "actr_lr = 0.01"), "shac.actr_lr"),
        (("learning_rate = 1e-3", "learning_rate = true"), "learning_rate"),
        (("num_branches = 4", "num_brances = 4"), "estimator.bcg"),
        (("[estimator.bcg]", "[estimator.bgc]"), "estimator.bgc"),
        (("from = 2", "from = 9"), "from = 9"),
        (("env = { limit = 0.5 }", "env = { limt = 0.5 }"), "env.limt"),
        (("learner = { actor_lr = 0.002 }", "learner = { actor_hidden = [4] }"), "actor_hidden"),
        (("[[schedule]]", "[[schedul]]"), "[schedul]"),
    ],
)
def test_a_bad_recipe_is_rejected_before_compiling_naming_the_key(toy_recipe, edit, names):
    toy_recipe.write_text(TOY.replace(*edit))
    with pytest.raises(ValueError, match=__import__("re").escape(names)):
        prepare_run(recipe_options(toy_recipe))


def test_a_missing_recipe_is_named(tmp_path, capsys):
    assert cli.main(["train", "--recipe", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    "arm",
    [
        {},
        {"estimator": "analytic"},
        {"estimator": "analytic", "stiffness": "soft"},
        {"learner": "ppo"},
    ],
    ids=["stiff-bcg", "stiff-analytic", "soft-analytic", "ppo"],
)
def test_the_g1_jump_recipe_describes_every_arm(arm):
    """Every arm of recipes/g1_jump.toml passes every check and builds its env (no compile)."""
    root = Path(__file__).resolve().parents[2]
    run, _ = prepare_run(recipe_options(root / "recipes" / "g1_jump.toml", **arm))
    env = registry.make_run_env(run)  # an env key the factory does not take: ValueError
    assert sim_settings(env)["solver_iterations"] == 4
    assert run["num_envs"] == 64 and run["recipe"]["overrides"] == arm
