"""A user's own task, from outside the repository: ``bcg train --task module:factory`` with its
own MJCF and reward, then ``bcg eval`` and ``bcg export`` rebuild it from run.json; and a task
registered by name from Python (:func:`bcg.envs.register_env`), rebuilt in a process that never
registered it (run.json's ``task_factory``)."""

import json
import textwrap
from pathlib import Path

import jax
import pytest

from bcg import cli
from bcg import estimators as E
from bcg.envs import POLICY_ENVS, env_factory, factory_path, make_env, register_env

USER_MODULE = textwrap.dedent(
    '''
    import dataclasses
    import jax.numpy as jnp
    from bcg.envs import ContactEnv
    from bcg.sim import load

    XML = """<mujoco><option timestep="0.01"/><worldbody>
      <geom type="plane" size="5 5 .1"/>
      <body name="ball" pos="0 0 .3"><joint name="z" type="slide" axis="0 0 1"/>
        <geom type="sphere" size=".05" mass="1"/></body></worldbody>
      <actuator><motor joint="z" gear="20" ctrlrange="-1 1"/></actuator></mujoco>"""

    @dataclasses.dataclass(frozen=True, eq=False)
    class Bouncer(ContactEnv):
        target: float = 0.3
        def reset_state(self, key):
            return jnp.array([0.1]), jnp.zeros(1)
        def observe(self, data):
            return jnp.concatenate([data.qpos, data.qvel])
        def reward(self, data, action, next_data):
            return -((next_data.qpos[0] - self.target) ** 2)

    def make_env(stiffness="stiff", target=0.3):
        return Bouncer(load(XML, stiffness=stiffness, substeps=2), episode_length=8, target=target)
    '''
)

TINY = ["--num-envs", "2", "--horizon", "4", "--actor-hidden", "8", "--critic-hidden", "8"]


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """A directory outside the repository holding ``userbot.py``, on the import path (what
    ``PYTHONPATH=.`` does for the CLI) and the working directory."""
    (tmp_path / "userbot.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    cache = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("BCG_JAX_CACHE", str(cache))
    yield tmp_path
    jax.config.update("jax_enable_x64", True)  # the CLI sets precision for the process
    jax.config.update("jax_compilation_cache_dir", cache)


def test_import_path_task_trains_evaluates_and_exports(user_dir, capsys):
    pytest.importorskip("jax2onnx")
    argv = ["train", "--task", "userbot:make_env", "--param", "env.target=0.25"]
    # analytic: BCG's training compile is tested by tests/learners/test_example.py
    argv += ["--learner", "shac", "--estimator", "analytic", *TINY, "--iterations", "2"]
    argv += ["--run-dir", "run", "--eval-episodes", "0", "--quiet"]
    assert cli.main(argv) == 0
    capsys.readouterr()
    run = json.loads((user_dir / "run" / "run.json").read_text())
    assert run["task"] == "userbot:make_env" and run["env_params"] == {"target": 0.25}
    assert run["task_factory"] == "userbot:make_env"
    assert len((user_dir / "run" / "metrics.csv").read_text().splitlines()) == 3

    assert cli.main(["eval", "run", "--episodes", "2", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["returns"]) == 2
    assert cli.main(["export", "run", "--onnx", "x.onnx"]) == 0
    assert (user_dir / "x.onnx").stat().st_size > 0


def test_registered_name_is_rebuilt_from_run_json(user_dir, monkeypatch):
    import userbot

    monkeypatch.delitem(POLICY_ENVS, "bouncer", raising=False)
    register_env("bouncer", userbot.make_env)
    with pytest.raises(ValueError, match="already registered"):
        register_env("bouncer", lambda stiffness="stiff": None)
    assert env_factory("bouncer") is userbot.make_env
    assert factory_path(userbot.make_env) == "userbot:make_env"
    env = make_env("bouncer", stiffness="soft", target=0.4)
    assert env.target == 0.4

    del POLICY_ENVS["bouncer"]  # a new process: the name is unknown, the import path is not
    with pytest.raises(ValueError, match="unknown task 'bouncer'"):
        make_env("bouncer")
    env = make_env("bouncer", task_factory="userbot:make_env", target=0.2)
    assert env.target == 0.2


@pytest.mark.parametrize(
    "task, msg",
    [
        ("userbot:nope", "has no attribute 'nope'"),
        ("no_such_module_xyz:make_env", "cannot import module"),
        ("userbot:XML", "is not callable"),
    ],
)
def test_bad_task_paths_are_clear_errors(user_dir, task, msg, capsys):
    assert cli.main(["train", "--task", task, "--iterations", "1", "--quiet"]) == 2
    assert msg in capsys.readouterr().err


def test_factory_must_return_a_contact_env(user_dir):
    register_env("not_an_env", lambda stiffness="stiff": object(), overwrite=True)
    try:
        with pytest.raises(TypeError, match="not a bcg.envs.ContactEnv"):
            make_env("not_an_env")
        assert factory_path(POLICY_ENVS["not_an_env"]) is None  # a lambda has no import path
    finally:
        del POLICY_ENVS["not_an_env"]


@pytest.fixture
def user_estimator(monkeypatch):
    """tests/estimators/user_estimator.py (ClippedStep) importable, as a user's module is."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "estimators"))
    import user_estimator

    E.register_estimator("clipped", user_estimator.make_clipped)
    yield user_estimator
    E.unregister_estimator("clipped")


def test_user_estimator_runs_in_grad_and_train(user_dir, user_estimator, capsys):
    """A registered estimator (by name) in ``bcg grad``, an import path in ``bcg train`` (a new
    process knows no registered name), both with a parameter."""
    argv = ["grad", "--task", "falling_mass", "--stiffness", "soft", "--estimators"]
    argv += ["analytic,clipped", "--param", "clipped.max_norm=5", "--batch", "4"]
    argv += ["--horizon", "8", "--json", "--out", "grad", "--quiet", "--sweep", ""]
    assert cli.main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    a, c = res["estimators"]["analytic"], res["estimators"]["clipped"]
    # falling mass (soft contact): every state cotangent stays below the clip, the same gradient
    assert c["summed_variance"] == pytest.approx(a["summed_variance"], rel=1e-9)

    argv = ["train", "--task", "userbot:make_env", "--estimator", "user_estimator:make_clipped"]
    argv += ["--param", "user_estimator:make_clipped.max_norm=3", *TINY, "--iterations", "2"]
    argv += ["--run-dir", "run2", "--eval-episodes", "0", "--quiet"]
    assert cli.main(argv) == 0
    run = json.loads((user_dir / "run2" / "run.json").read_text())
    assert run["estimator"] == "user_estimator:make_clipped"
    assert run["estimator_params"] == {"max_norm": 3}
    assert len((user_dir / "run2" / "metrics.csv").read_text().splitlines()) == 3


def test_estimator_registry_errors(user_estimator):
    with pytest.raises(ValueError, match="already registered"):
        E.register_estimator("clipped", lambda: None)
    with pytest.raises(ValueError, match="no parameter"):
        E.make("clipped", max_nrom=1.0)
    E.register_estimator("not-an-estimator", lambda: object())
    try:
        with pytest.raises(TypeError, match="neither"):
            E.make("not-an-estimator")
    finally:
        E.unregister_estimator("not-an-estimator")
    with pytest.raises(ValueError, match="built-in"):
        E.unregister_estimator("bcg")


def test_transfer_resets_the_contact_of_an_import_path_task(user_dir):
    """A task given as an import path (or a name registered in another process, rebuilt from
    run.json's task_factory) transfers at its MJCF's own contact, not at its training contact."""
    from bcg.transfer.model import native_model

    env = make_env("userbot:make_env", stiffness=0.05)  # 0.02 s is its stiff and default
    trained = env.sim.mj_model.geom_solref[:, 0]
    own = make_env("userbot:make_env", stiffness="model").sim.mj_model.geom_solref[:, 0]
    assert not (trained == own).all()
    for task, factory in (("userbot:make_env", None), ("bouncer_elsewhere", "userbot:make_env")):
        m, notes = native_model(env, task, task_factory=factory)
        assert (m.geom_solref[:, 0] == own).all(), task
        assert "own MJCF contact" in notes[0]
    m, notes = native_model(env, "bouncer_elsewhere")  # nothing to rebuild it from
    assert (m.geom_solref[:, 0] == trained).all() and "NOT reset" in notes[0]
