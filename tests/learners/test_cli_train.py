"""``bcg train`` / ``bcg eval`` end to end on tiny settings (a toy task registered for the
fast test; the real hopper-jump task with BCG in the slow one)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from toy import toy_env

from bcg import cli
from bcg.envs import POLICY_ENVS
from bcg.transfer.policy import load_state

TINY = ["--num-envs", "2", "--horizon", "4", "--actor-hidden", "8", "--critic-hidden", "8"]


@pytest.fixture
def toy_task(monkeypatch, tmp_path):
    monkeypatch.setitem(POLICY_ENVS, "toy", lambda stiffness="stiff": toy_env(episode_length=6))
    cache = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("BCG_JAX_CACHE", str(cache))  # keep the test cache
    yield
    jax.config.update("jax_enable_x64", True)  # the CLI sets precision for the process
    jax.config.update("jax_compilation_cache_dir", cache)


def _check_run_dir(run):
    assert (run / "run.json").exists()
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("iteration,env_steps,wall_time") and len(rows) == 3
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.isdigit()) == [
        "1",
        "2",
    ]
    assert (run / "training.png").stat().st_size > 1000
    ev = json.loads((run / "eval.json").read_text())
    assert set(ev) == {"initial", "final"}


def _train_toy(run):
    """``bcg train`` of the toy task: 2 iterations, a checkpoint each; returns the argv."""
    argv = ["train", "--task", "toy", "--learner", "shac", "--estimator", "analytic"]
    argv += [*TINY, "--iterations", "2", "--checkpoint-every", "1", "--run-dir", str(run)]
    argv += ["--eval-episodes", "2", "--float64", "--quiet"]
    assert cli.main(argv) == 0
    return argv


def test_cli_train_and_eval_toy(toy_task, tmp_path, capsys):
    run = tmp_path / "run"
    argv = _train_toy(run)
    _check_run_dir(run)
    out = capsys.readouterr().out
    assert "eval final" in out and "iteration 2" in out

    assert cli.main(["eval", str(run), "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("episode ") >= 3 and "mean return" in out
    assert cli.main(["eval", str(run / "checkpoints" / "1"), "--episodes", "2", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["returns"]) == 2

    # extend the finished run by one iteration with --resume: the CSV continues
    assert (
        cli.main(
            [
                *argv[:-6],
                "--iterations",
                "3",
                "--checkpoint-every",
                "1",
                "--run-dir",
                str(run),
                "--eval-episodes",
                "0",
                "--float64",
                "--quiet",
                "--resume",
            ]
        )
        == 0
    )
    rows = (run / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2", "3"]

    # only the environment states differ in shape (e.g. the env now carries per-environment
    # draws): everything else comes from the checkpoint, the environments are the template's
    import dataclasses

    from bcg.learners.harness import restore_checkpoint

    saved = load_state(run / "checkpoints" / "2")[2]
    E = saved.env.step.shape[0]
    env = saved.env._replace(step=saved.env.step + 100, episode_return=jnp.full((E, 2), 7.0))
    zero_actor = jax.tree_util.tree_map(jnp.zeros_like, saved.actor)
    tmpl = dataclasses.replace(saved, actor=zero_actor, env=env)
    got = restore_checkpoint(run, tmpl, 2, strict=True)[0]
    pairs = zip(
        jax.tree_util.tree_leaves(got.actor), jax.tree_util.tree_leaves(saved.actor), strict=True
    )
    for a, b in pairs:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(got.env.step), np.asarray(saved.env.step) + 100)
    assert got.env.episode_return.shape == (E, 2)
    # the same on --resume (not strict); with equal shapes the environments are restored
    got = restore_checkpoint(run, tmpl, 2)[0]
    np.testing.assert_array_equal(np.asarray(got.env.step), np.asarray(saved.env.step) + 100)
    for a, b in zip(*(jax.tree_util.tree_leaves(x.actor) for x in (got, saved)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    same = dataclasses.replace(saved, actor=zero_actor, env=saved.env._replace(step=env.step))
    got = restore_checkpoint(run, same, 2)[0]
    np.testing.assert_array_equal(np.asarray(got.env.step), np.asarray(saved.env.step))


# four trainings in a chain (~150 s cold); one training, eval and --resume are tested fast above
@pytest.mark.slow
def test_cli_stages_start_from_a_checkpoint_or_a_packed_policy(toy_task, tmp_path, capsys):
    run = tmp_path / "run"
    argv = _train_toy(run)
    capsys.readouterr()
    rows = (run / "metrics.csv").read_text().splitlines()
    # a second stage from checkpoint 2: starts from that state (its deterministic evaluation
    # with the same seed is the first stage's final one) and continues the env-step count
    stage = tmp_path / "stage2"
    argv2 = [*argv[:-6], "--iterations", "1", "--run-dir", str(stage), "--eval-episodes", "2"]
    argv2 += ["--float64", "--quiet", "--init-from", str(run / "checkpoints" / "2")]
    assert cli.main(argv2) == 0
    assert json.loads((stage / "run.json").read_text())["init_from"].endswith("checkpoints/2")
    first = json.loads((run / "eval.json").read_text())["final"]
    second = json.loads((stage / "eval.json").read_text())["initial"]
    assert second["mean_return"] == pytest.approx(first["mean_return"], rel=1e-12)
    steps = [int(r.split(",")[1]) for r in rows[1:]]
    row = (stage / "metrics.csv").read_text().splitlines()[1].split(",")
    assert row[0] == "1" and int(row[1]) == steps[1] + (steps[1] - steps[0])
    # the stage runs its own learning-rate schedule from its start (not the rest of the
    # source's: 2 of 3 iterations done there, more than this stage's 1)
    header = (run / "metrics.csv").read_text().splitlines()[0].split(",")
    lr = header.index("actor_lr")
    assert float(row[lr]) == pytest.approx(float(rows[1].split(",")[lr]), rel=1e-6)
    assert float(row[lr]) > float(rows[2].split(",")[lr])
    # a stage from the *packed* checkpoint 2 (actor + normaliser only): same starting policy,
    # env steps continue, and with critic_warmup=1 its one iteration leaves the actor as it was
    packed = tmp_path / "packed"
    assert cli.main(["pack", str(run / "checkpoints" / "2"), str(packed)]) == 0
    stage_p = tmp_path / "stage_packed"
    argv3 = [*argv2[:-1], str(packed), "--run-dir", str(stage_p)]
    assert cli.main([*argv3, "--param", "shac.critic_warmup=1"]) == 0
    ev = json.loads((stage_p / "eval.json").read_text())
    assert ev["initial"]["mean_return"] == pytest.approx(second["mean_return"], rel=1e-12)
    row = (stage_p / "metrics.csv").read_text().splitlines()[1].split(",")
    assert row[0] == "1" and int(row[1]) == steps[1] + (steps[1] - steps[0])
    # the actor is held through the warm-up (the normaliser still learns); without it, it moves
    stage_q = tmp_path / "stage_packed_nowarmup"
    assert cli.main([*argv2[:-1], str(packed), "--run-dir", str(stage_q)]) == 0
    start = jax.tree_util.tree_leaves(load_state(run / "checkpoints" / "2")[2].actor)
    held = jax.tree_util.tree_leaves(load_state(stage_p)[2].actor)
    moved = jax.tree_util.tree_leaves(load_state(stage_q)[2].actor)
    assert all(np.array_equal(a, b) for a, b in zip(start, held, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(start, moved, strict=True))
    # another network size is not the same learner state: a clear error, nothing trained
    bad = [*argv2[:-1], str(run), "--run-dir", str(tmp_path / "bad"), "--actor-hidden", "4"]
    assert cli.main(bad) == 2
    assert "holds a different learner state" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["train", "--task", "nope"], "unknown task"),
        (["train", "--learner", "sac"], "unknown learner"),
        (["train", "--estimator", "magic"], "unknown estimator"),
        (["train", "--estimator", "zeroth-order"], "step-level estimator"),
        (["train", "--iterations", "0"], "--iterations must be >= 1"),
        (["train", "--resume", "--run-dir", "/nonexistent/run"], "no run in"),
        (["train", "--task", "toy", "--init-from", "/nonexistent/run"], "no such run directory"),
        (["eval", "/nonexistent/run"], "no such run directory"),
        # --param: every namespace and key is checked, and named in the error
        (["train", "--task", "toy", "--param", "shac.gammma=0.9"], "shac.gammma"),
        (["train", "--task", "toy", "--estimator", "analytic", "--param", "bcg.tau=1"], "bcg.tau"),
        (["train", "--task", "toy", "--learner", "bptt", "--param", "shac.lam=0.9"], "shac.lam"),
        (["train", "--task", "toy", "--param", "shac.gamma=fast"], "shac.gamma='fast'"),
        (["train", "--task", "toy", "--param", "shac.actor_hidden=8"], "expects a list"),
        (["train", "--task", "toy", "--param", "shac.num_envs=4"], "--num-envs"),
        (["train", "--task", "toy", "--param", "bcg.taux=4"], "taux"),
        (["train", "--task", "toy", "--param", "env.nope=1"], "env.nope"),
        (["train", "--task", "toy", "--learner", "ppo", "--param", "ppo.lr=1"], "ppo.lr"),
        (["train", "--task", "toy", "--learner", "ppo", "--estimator", "bcg"], "no --estimator"),
        (["train", "--task", "toy", "--estimator", "analytic", "--capacity", "4"], "--capacity"),
    ],
)
def test_cli_bad_input_is_a_clear_error(toy_task, argv, msg, capsys, monkeypatch):
    from bcg.learners import harness, ppo

    def fail(*a, **k):
        raise AssertionError("reached training before the argument error")

    monkeypatch.setattr(harness, "train", fail)
    monkeypatch.setattr(ppo, "train_ppo", fail)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"bcg: error: {msg}" in err or msg in err
    assert "Traceback" not in err


def test_cli_learner_params_reach_the_learner(toy_task, tmp_path, monkeypatch):
    """``--param shac.NAME=VALUE`` lands in run.json's config and in the built learner."""
    from bcg.learners import harness, registry

    seen = {}

    def fake_train(learner, run_dir, **kw):
        seen["learner"], seen["run"] = learner, kw["run_config"]
        raise SystemExit(0)

    monkeypatch.setattr(harness, "train", fake_train)
    argv = ["train", "--task", "toy", "--estimator", "analytic", *TINY, "--quiet"]
    argv += ["--param", "shac.gamma=0.5", "--param", "shac.betas=[0.9,0.99]"]
    with pytest.raises(SystemExit):
        cli.main([*argv, "--run-dir", str(tmp_path / "r")])
    assert seen["run"]["config"]["gamma"] == 0.5
    assert seen["learner"].cfg.gamma == 0.5 and seen["learner"].cfg.betas == (0.9, 0.99)
    _, rebuilt = registry.build(seen["run"])
    assert rebuilt.cfg.gamma == 0.5


def test_cli_eval_without_checkpoint(tmp_path, capsys):
    (tmp_path / "run.json").write_text(json.dumps({"learner": "shac"}))
    assert cli.main(["eval", str(tmp_path)]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    jax.config.update("jax_enable_x64", True)


@pytest.mark.slow
def test_cli_train_hopper_bcg(tmp_path, capsys, monkeypatch):
    """The real task: 2 iterations of SHAC + BCG on hopper-jump, stiff contact."""
    monkeypatch.setenv("BCG_JAX_CACHE", str(jax.config.jax_compilation_cache_dir))
    run = tmp_path / "hop"
    argv = ["train", "--task", "hopper_jump", "--learner", "shac", "--estimator", "bcg", *TINY]
    argv += ["--iterations", "2", "--checkpoint-every", "1", "--run-dir", str(run)]
    argv += ["--eval-episodes", "2", "--quiet"]
    try:
        assert cli.main(argv) == 0
        _check_run_dir(run)
        assert cli.main(["eval", str(run), "--episodes", "2"]) == 0
        assert "torso_height" in capsys.readouterr().out
    finally:
        jax.config.update("jax_enable_x64", True)
