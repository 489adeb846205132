"""``bcg pack``: the policy alone (run.json + policy.npz) acts exactly like the checkpoint it
came from, in load_policy and through the CLI, and a policy.npz that does not fit is an error."""

import json
import shutil
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from bcg import cli
from bcg.transfer.pack import POLICY_FILE, pack_policy
from bcg.transfer.policy import load_policy

sys.path.insert(0, str(Path(__file__).parent))
from hoppers import CommandSeeingHopper  # noqa: E402


def test_packed_policy_acts_like_its_checkpoint(hopper_run, tmp_path, restore_jax, capsys):
    run_dir, env, _, _ = hopper_run
    out = tmp_path / "packed"
    assert cli.main(["pack", str(run_dir / "checkpoints" / "1"), str(out)]) == 0
    assert "packed the policy" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == sorted(["run.json", POLICY_FILE])
    packed, full = load_policy(out), load_policy(run_dir)
    assert packed.iteration == 1 and packed.env_steps == 8
    obs = np.random.default_rng(0).normal(size=(16, env.observation_size)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(packed.fn(obs)), np.asarray(full.fn(obs)))
    assert cli.main(["eval", str(out), "--episodes", "2", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["returns"]) == 2


def test_a_policy_file_of_another_network_is_an_error(hopper_run, tmp_path):
    run_dir, _, _, _ = hopper_run
    out = pack_policy(run_dir, tmp_path / "packed")
    run = json.loads((out / "run.json").read_text())
    run["config"]["actor_hidden"] = [4]
    (out / "run.json").write_text(json.dumps(run))
    with pytest.raises(ValueError, match="does not fit the policy"):
        load_policy(out)
    with pytest.raises(ValueError, match="another folder"):
        pack_policy(run_dir, run_dir)


def test_packed_metrics_end_at_the_packed_iteration(hopper_run, tmp_path):
    run_dir, _, _, _ = hopper_run
    src = shutil.copytree(run_dir, tmp_path / "run")
    (src / "metrics.csv").write_text("iteration,env_steps\n1,8\n2,16\n3,24\n")
    out = pack_policy(src / "checkpoints" / "1", tmp_path / "packed")
    assert (out / "metrics.csv").read_text() == "iteration,env_steps\n1,8\n"


def test_a_policy_widens_to_features_appended_to_its_observation(hopper_run, tmp_path):
    """--init-from a packed policy into an env whose observation appends features: with
    ``widen_observation`` the new inputs get zero first-layer weights and the normaliser's
    prior, so the widened policy acts exactly as the packed one whatever the new features
    hold; without it the shapes are an error."""
    import jax.numpy as jnp

    from bcg.learners.shac import SHAC
    from bcg.transfer.pack import load_packed_params

    run_dir, env, learner, state = hopper_run
    out = pack_policy(run_dir, tmp_path / "packed")
    wide = SHAC(CommandSeeingHopper(sim=env.sim), learner.estimator, learner.cfg)
    n, nu = env.observation_size, env.sim.nu
    assert wide.env.observation_size == n + nu
    with pytest.raises(ValueError, match="does not fit the policy"):
        load_packed_params(out, wide)
    params = load_packed_params(out, wide, widen_observation=True)
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(16, n)).astype(np.float32)
    extra = 3.0 * rng.normal(size=(16, nu)).astype(np.float32)
    old = np.asarray(learner.policy(learner.policy_params(state), obs))
    new = np.asarray(wide.policy(params, np.concatenate([obs, extra], axis=1)))
    np.testing.assert_allclose(new, old, rtol=1e-6, atol=1e-6)

    # the new inputs are wired in: a non-zero weight on their (zero) rows changes the action
    def poke(x):
        x = np.asarray(x)
        if x.ndim == 2 and x.shape[0] == n + nu:
            assert not x[n:].any()
            x = x.copy()
            x[n:] = rng.normal(size=x[n:].shape)  # (a uniform row would cancel in LayerNorm)
        return jnp.asarray(x)

    poked = np.asarray(wide.policy(jax.tree_util.tree_map(poke, params), np.c_[obs, extra]))
    assert np.max(np.abs(poked - old)) > 1e-3


def test_a_wider_action_range_keeps_the_unsaturated_actions(
    hopper_run, tmp_path, restore_jax, capsys
):
    """``bcg pack --action-range env.NAME=S1``: the packed run builds its env at S1 and its
    pre-squash mean is s0 / s1 times the checkpoint's (exactly), so the commands agree to
    first order where the actions are small; a parameter the env lacks, a value that makes a
    scale 0, or a malformed value is an error that names it."""
    from bcg.learners import harness, registry

    hop_dir, _, _, _ = hopper_run
    run = json.loads((hop_dir / "run.json").read_text())
    run.update(task="scaled_hopper", task_factory="hoppers:scaled_hopper")
    run["env_params"] = {"action_scale": 0.5}
    src = tmp_path / "run"
    src.mkdir()
    (src / "run.json").write_text(json.dumps(run))
    env, learner = registry.build(run)
    mgr = harness._manager(src)
    harness.save_checkpoint(mgr, learner.init(jax.random.PRNGKey(0)), 1, 8, 0.0)
    mgr.close()

    out = tmp_path / "wide"
    args = ["pack", str(src), str(out), "--action-range", "env.action_scale=2.0"]
    assert cli.main(args) == 0
    old, new = load_policy(src), load_policy(out)
    assert new.env.action_scale == 2.0
    back = pack_policy(out, tmp_path / "back", action_range=("env.action_scale", 0.5))
    obs0 = np.random.default_rng(3).normal(size=(8, env.observation_size)).astype(np.float32)
    np.testing.assert_allclose(load_policy(back).fn(obs0), old.fn(obs0), rtol=1e-5, atol=1e-6)
    assert json.loads((out / "run.json").read_text())["packed"]["action_range"]["from"] == 0.5
    obs = np.random.default_rng(2).normal(size=(64, env.observation_size)).astype(np.float32)
    a_old, a_new = np.asarray(old.fn(obs), np.float64), np.asarray(new.fn(obs), np.float64)
    np.testing.assert_allclose(np.arctanh(a_new), 0.25 * np.arctanh(a_old), rtol=1e-4, atol=1e-6)
    small = np.abs(a_old) < 0.2
    assert small.any()
    cmd_old, cmd_new = 0.5 * a_old[small], 2.0 * a_new[small]
    np.testing.assert_allclose(cmd_new, cmd_old, atol=0.5 * 0.2**3)
    assert np.max(np.abs(cmd_new - cmd_old)) > 0  # not the same policy: first order only

    with pytest.raises(ValueError, match="no parameter 'nope'"):
        pack_policy(src, tmp_path / "bad", action_range=("env.nope", 1.0))
    with pytest.raises(ValueError, match="env.NAME"):
        pack_policy(src, tmp_path / "bad", action_range=("action_scale", 1.0))
    with pytest.raises(ValueError, match="finite and > 0"):
        pack_policy(src, tmp_path / "bad", action_range=("env.action_scale", 0.0))
    capsys.readouterr()
    bad = ["pack", str(src), str(tmp_path / "bad"), "--action-range", "env.action_scale"]
    assert cli.main(bad) != 0
    assert "env.NAME=NUMBER" in capsys.readouterr().err


def test_std_scale_changes_only_the_exploration_noise(hopper_run, tmp_path, restore_jax):
    """``bcg pack --std-scale F``: log_std + log F in the packed policy, the deterministic policy
    (the mean) unchanged; the factor lands in run.json; F <= 0 is an error that names it."""
    hop_dir, _, _, _ = hopper_run
    out = tmp_path / "calm"
    assert cli.main(["pack", str(hop_dir), str(out), "--std-scale", "0.5"]) == 0
    plain = pack_policy(hop_dir, tmp_path / "plain")
    obs = np.random.default_rng(0).normal(size=(16, load_policy(out).env.observation_size))
    obs = obs.astype(np.float32)
    np.testing.assert_array_equal(load_policy(out).fn(obs), load_policy(plain).fn(obs))
    a, b = np.load(plain / POLICY_FILE), np.load(out / POLICY_FILE)
    changed = [k for k in a.files if not np.array_equal(a[k], b[k])]
    assert len(changed) == 1  # the log_std vector alone
    np.testing.assert_allclose(b[changed[0]] - a[changed[0]], np.log(0.5), rtol=1e-6)
    assert json.loads((out / "run.json").read_text())["packed"]["std_scale"] == 0.5
    with pytest.raises(ValueError, match="std scale"):
        pack_policy(hop_dir, tmp_path / "bad", std_scale=0.0)
