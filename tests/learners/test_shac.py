"""SHAC / BPTT on the contact-free toy environment: gradient cut at resets, exact actor
gradient (finite differences), NaN guard at the learner level, checkpoint / resume."""

import csv
import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from toy import Toy, toy_env

from bcg import estimators as E
from bcg.learners import harness
from bcg.learners.bptt import BPTT, BPTTConfig
from bcg.learners.rollout import reset, rollout
from bcg.learners.shac import SHAC, SHACConfig

TINY = SHACConfig(
    num_envs=2,
    horizon=8,
    actor_hidden=(8,),
    critic_hidden=(8,),
    critic_iterations=2,
    critic_minibatches=2,
)


def _reward4_gradient(checkpoint=True):
    """Episodes of 3 steps, a closed-loop table policy over a 6-step window of 2 envs: the
    gradient of the reward at window step 4 w.r.t. the table, and the trajectory."""
    env = toy_env(episode_length=3)
    est = E.make("analytic")
    s0 = reset(env, est, jax.random.PRNGKey(0), 2)

    def policy(table, obs, t, k):
        return table[t] + 0.1 * obs[:, :1]  # closed loop: the state feeds back too

    def r4(table):
        _, traj = rollout(
            env, est, policy, table, s0, jax.random.PRNGKey(1), 6, checkpoint=checkpoint
        )
        assert traj.truncated.shape == (6, 2)
        return jnp.sum(traj.rewards[4]), traj

    return jax.grad(r4, has_aux=True)(0.3 * jnp.ones((6, 2, 1)))


def test_gradient_is_cut_at_reset():
    """The reward at window step 4 (second episode) has exactly zero derivative w.r.t. the
    actions of steps 0-2 (first episode), and a non-zero one w.r.t. step 3 (same episode)."""
    g, traj = _reward4_gradient()
    assert bool(traj.truncated[2].all()) and not bool(traj.truncated[3].any())
    np.testing.assert_array_equal(g[:3], 0.0)
    assert np.all(np.abs(g[3:5]) > 1e-8)


@pytest.mark.slow  # a second rollout gradient compile; the default checkpointing is tested fast
def test_a_checkpoint_policy_changes_the_program_only():
    """What the backward pass stores (here: a checkpoint policy) leaves the gradient as it is."""
    save_dots = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    g, _ = _reward4_gradient()
    g_dots, _ = _reward4_gradient(save_dots)
    np.testing.assert_allclose(g_dots, g, rtol=1e-12, atol=1e-15)


def test_shac_actor_gradient_matches_finite_differences():
    env = toy_env(episode_length=5)  # a truncation (reset) inside the 8-step window
    learner = SHAC(env, E.make("analytic"), TINY, iterations=10)
    state = learner.init(jax.random.PRNGKey(3))
    state = dataclasses.replace(  # non-trivial normalisers
        state,
        obs_rms=state.obs_rms._replace(mean=jnp.array([0.1, -0.2]), var=jnp.array([0.5, 2.0])),
        ret_rms=state.ret_rms._replace(var=jnp.asarray(4.0)),
    )
    actor = jax.tree_util.tree_map(lambda x: x.astype(jnp.float64), state.actor)
    key = jax.random.PRNGKey(4)

    loss = jax.jit(lambda p: learner.actor_loss(p, state, key)[0])  # one program, not op by op
    g = jax.jit(jax.grad(loss))(actor)
    rng = np.random.default_rng(0)
    d = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.normal(size=x.shape)), actor)
    eps = 1e-5
    shift = lambda s: jax.tree_util.tree_map(lambda a, b: a + s * b, actor, d)  # noqa: E731
    fd = (loss(shift(eps)) - loss(shift(-eps))) / (2 * eps)
    an = sum(
        jnp.vdot(a, b)
        for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(d), strict=True)
    )
    assert abs(float(an)) > 1e-4
    np.testing.assert_allclose(float(an), float(fd), rtol=1e-5)


@jax.custom_vjp
def _nan_grad(x):
    return jnp.zeros_like(x)


_nan_grad.defvjp(lambda x: (jnp.zeros_like(x), None), lambda _, g: (jnp.full_like(g, jnp.nan),))


@dataclasses.dataclass(frozen=True, eq=False)
class NanToy(Toy):
    """Finite forward values, NaN gradient through the reward."""

    def reward(self, data, action, next_data):
        return super().reward(data, action, next_data) + _nan_grad(next_data.qpos[0])


@pytest.mark.parametrize("kind", ["shac", "bptt"])
def test_nan_gradient_update_is_skipped(kind):
    env = NanToy(sim=toy_env().sim, episode_length=5)
    if kind == "shac":
        learner = SHAC(env, E.make("analytic"), TINY, iterations=10)
    else:
        learner = BPTT(env, E.make("analytic"), BPTTConfig(num_envs=2, actor_hidden=(8,)))
    state = learner.init(jax.random.PRNGKey(0))
    new, m = jax.jit(learner.iteration)(state)
    assert not np.isfinite(float(m["actor_grad_norm"]))
    assert int(m["skipped_updates"]) == 1 and int(new.skipped_updates) == 1
    for a, b in zip(
        jax.tree_util.tree_leaves(new.actor), jax.tree_util.tree_leaves(state.actor), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    if kind == "shac":  # the critic (finite targets) still learns
        assert not np.allclose(
            new.critic["params"]["MLP_0"]["Dense_0"]["kernel"],
            state.critic["params"]["MLP_0"]["Dense_0"]["kernel"],
        )


@jax.custom_vjp
def _huge_grad(x):
    return jnp.zeros_like(x)


# a finite cotangent whose square overflows float32 (the networks' dtype): the actor gradient's
# entries stay finite, its global norm is infinite
_huge_grad.defvjp(lambda x: (jnp.zeros_like(x), None), lambda _, g: (jnp.full_like(g, 1e25),))


@dataclasses.dataclass(frozen=True, eq=False)
class HugeToy(Toy):
    """Finite forward values, a gradient through the reward with an infinite float32 norm."""

    def reward(self, data, action, next_data):
        return super().reward(data, action, next_data) + _huge_grad(next_data.qpos[0])


def test_infinite_gradient_norm_is_a_counted_skip(tmp_path):
    """Clipping an infinite norm would zero the gradient and Adam would move on its momentum;
    the update is skipped instead and ``metrics.csv`` counts it."""
    env = HugeToy(sim=toy_env().sim, episode_length=5)
    learner = SHAC(env, E.make("analytic"), TINY, iterations=1)
    state = learner.init(jax.random.split(jax.random.PRNGKey(0))[0])  # train's, at seed 0
    assert jax.tree_util.tree_leaves(state.actor)[0].dtype == jnp.float32
    harness.train(learner, tmp_path, checkpoint_every=1, progress=False, eval_episodes=0)
    (row,) = _rows(tmp_path)
    assert not np.isfinite(float(row["actor_grad_norm"]))
    assert float(row["actor_skipped"]) == 1 and float(row["skipped_updates"]) >= 1
    new, _, _, _ = harness.restore_checkpoint(tmp_path, state)
    for a, b in zip(
        jax.tree_util.tree_leaves(new.actor), jax.tree_util.tree_leaves(state.actor), strict=True
    ):
        np.testing.assert_array_equal(a, b)


class _Kill(Exception):
    pass


def _rows(run_dir):
    with open(run_dir / harness.CSV_FILE) as f:
        return [{k: v for k, v in r.items() if k != "wall_time"} for r in csv.DictReader(f)]


def test_checkpoint_kill_resume_matches_uninterrupted(tmp_path):
    env = toy_env(episode_length=5)

    def learner():
        return SHAC(env, E.make("analytic"), TINY, iterations=4)

    kw = dict(seed=7, checkpoint_every=2, progress=False, eval_episodes=0)
    ref = harness.train(learner(), tmp_path / "a", **kw)

    def kill_at_3(it, m):
        if it == 3:  # row 3 is written, the newest checkpoint is iteration 2
            raise _Kill

    with pytest.raises(_Kill):
        harness.train(learner(), tmp_path / "b", on_iteration=kill_at_3, **kw)
    assert len(_rows(tmp_path / "b")) == 3 and harness.latest_step(tmp_path / "b") == 2
    out = harness.train(learner(), tmp_path / "b", resume=True, **kw)

    ra, rb = _rows(tmp_path / "a"), _rows(tmp_path / "b")
    assert [r["iteration"] for r in rb] == ["1", "2", "3", "4"]
    assert ra == rb
    for a, b in zip(
        jax.tree_util.tree_leaves(ref["state"]),
        jax.tree_util.tree_leaves(out["state"]),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    assert (tmp_path / "b" / harness.PLOT_FILE).exists()
    harness.write_run(tmp_path / "b", {"the": "first run"})
    with pytest.raises(ValueError, match="already holds checkpoints"):
        harness.train(learner(), tmp_path / "b", run_config={"a": "new run"}, **kw)
    stored = json.loads((tmp_path / "b" / harness.RUN_FILE).read_text())
    assert stored == {"the": "first run"}  # the refused run did not overwrite run.json
    with pytest.raises(FileNotFoundError):
        harness.train(learner(), tmp_path / "c", resume=True, **kw)


def test_bptt_learns_on_toy():
    """A few BPTT iterations raise the return of the smooth toy task (the learner can fail)."""
    env = toy_env(episode_length=20)
    learner = BPTT(
        env,
        E.make("analytic"),
        BPTTConfig(num_envs=4, actor_hidden=(16,), actor_lr=1e-2),
        iterations=30,
    )
    state = jax.device_put(learner.init(jax.random.PRNGKey(0)), jax.devices()[0])
    step = jax.jit(learner.iteration)
    rets = []
    for _ in range(30):
        state, m = step(state)
        rets.append(float(m["episode_return"]))
    assert np.mean(rets[-5:]) > np.mean(rets[:5]) + 0.5, rets


def test_per_env_actor_gradients_sum_to_the_actor_gradient():
    """sum_e dL_e/dtheta = dL/dtheta (float32 networks), and the environments' gradients
    differ."""
    env = toy_env(episode_length=5)
    learner = SHAC(env, E.make("analytic"), TINY, iterations=10)
    state = learner.init(jax.random.PRNGKey(3))
    key = jax.random.PRNGKey(4)
    per_env = jax.jit(learner.per_env_actor_gradients)(state, key)
    full = jax.jit(jax.grad(lambda p: learner.actor_loss(p, state, key)[0]))(state.actor)
    summed = jax.tree_util.tree_map(lambda x: x.sum(0), per_env)
    leaves_sum, leaves_full = jax.tree_util.tree_leaves(summed), jax.tree_util.tree_leaves(full)
    for a, b in zip(leaves_sum, leaves_full, strict=True):  # float32 networks
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
    leaves = jax.tree_util.tree_leaves(per_env)
    assert all(x.shape[0] == TINY.num_envs for x in leaves)
    assert not all(np.allclose(x[0], x[1]) for x in leaves)  # different environments differ
    # one reverse pass with stacked parameters == E reverse passes (jax.jacrev)
    by_jacobian, stats = jax.jit(
        lambda s, k: learner.per_env_actor_gradients(s, k, method="jacobian", return_stats=True)
    )(state, key)
    for a, b in zip(leaves, jax.tree_util.tree_leaves(by_jacobian), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
    assert stats.bundled.shape == () and int(stats.overflow) == 0  # summed over the window
