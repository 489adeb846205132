"""ADD reward (bcg.envs.g1.add): discriminator math on random arrays, the SHAC plumbing (phi in
the learner state, constant in the actor loss, trained once per iteration, checkpointed) on a
contact-free toy env, one SHAC iteration on g1_jump(reward="add"), and clear errors."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg import cli
from bcg import estimators as E
from bcg.envs.base import ContactEnv
from bcg.envs.g1.add import ADDState, Discriminator, differential
from bcg.learners import harness, registry
from bcg.learners.shac import SHAC, SHACConfig
from bcg.sim import load

TINY = SHACConfig(
    num_envs=2,
    horizon=3,
    actor_hidden=(8,),
    critic_hidden=(8,),
    critic_iterations=1,
    critic_minibatches=1,
)

POINT_XML = """
<mujoco model="point">
  <option timestep="0.01"/>
  <worldbody>
    <body name="mass">
      <joint name="x" type="slide" axis="1 0 0"/>
      <geom type="sphere" size="0.05" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="x" gear="5" ctrlrange="-1 1" ctrllimited="true"/></actuator>
</mujoco>
"""


@dataclasses.dataclass(frozen=True, eq=False)
class PointADD(ContactEnv):
    """A point mass tracking x = 0.5 with an ADD reward on delta = (x - 0.5, v)."""

    episode_length: int = 10
    discriminator: Discriminator = Discriminator(hidden=(8,), lr=1e-2, n_features=2)

    def reset_state(self, key):
        return jax.random.uniform(key, (1,), minval=-0.1, maxval=0.1), jnp.zeros((1,))

    def observe(self, data):
        return jnp.concatenate([data.qpos, data.qvel])

    def reward_model_input(self, data):
        f = jnp.concatenate([data.qpos, data.qvel])
        return differential(f, jnp.array([0.5, 0.0]))

    @property
    def reward_model(self):
        return self.discriminator

    def reward(self, data, action, next_data, reward_params=None):
        if reward_params is None:
            raise ValueError("needs reward_params")
        return self.reward_model.reward(reward_params, self.reward_model_input(next_data))


@functools.cache
def point_env():
    return PointADD(sim=load(POINT_XML, stiffness="model", substeps=2, name="point"))


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _changed(a, b):
    return any(not np.array_equal(x, y) for x, y in zip(_leaves(a), _leaves(b), strict=True))


# ---------------------------------------------------------------------------- discriminator


@pytest.mark.parametrize("loss", ["logistic", "lsgan"])
def test_discriminator_update_lowers_loss_and_prefers_zero_delta(loss):
    disc = Discriminator(hidden=(16, 16), lr=1e-2, loss=loss, steps=40, n_features=6)
    neg = 1.5 * jax.random.normal(jax.random.PRNGKey(1), (64, 6)) + 1.0
    state = disc.init(jax.random.PRNGKey(0))
    loss0, _ = disc.loss_fn(state.params, neg)
    gap0 = disc.reward(state.params, jnp.zeros(6)) - disc.reward(state.params, 3.0 * jnp.ones(6))
    new, m = jax.jit(disc.update)(state, neg)
    loss1, aux = disc.loss_fn(new.params, neg)
    assert np.isfinite(float(loss1)) and float(loss1) < 0.5 * float(loss0)
    np.testing.assert_allclose(m["disc_loss"], loss0, rtol=1e-5)  # reported before the update
    assert int(m["disc_skipped"]) == 0
    assert float(aux["disc_logit_pos"]) > float(aux["disc_logit_neg"])
    gap1 = disc.reward(new.params, jnp.zeros(6)) - disc.reward(new.params, 3.0 * jnp.ones(6))
    assert float(gap1) > float(gap0) and float(gap1) > 0.1
    r = disc.reward(new.params, neg)
    cap = np.log(1e4) if loss == "logistic" else 1.0
    assert r.shape == (64,) and np.all(r >= 0) and np.all(r <= cap)


def test_discriminator_loss_equation_and_masking():
    """L = softplus(-D(0)) + weighted mean softplus(D(delta)) + lambda |grad D(0)|^2, and a
    diverged (non-finite, weight 0) row changes neither the loss nor the update."""
    disc = Discriminator(hidden=(4,), grad_penalty=2.0, n_features=3)
    p = disc.init_params(jax.random.PRNGKey(2))
    neg = jax.random.normal(jax.random.PRNGKey(3), (5, 3))
    w = jnp.array([1.0, 0.0, 2.0, 1.0, 1.0])
    z = jnp.zeros(3)
    g = jax.grad(disc.logits, argnums=1)(p, z)
    d = disc.logits(p, neg)
    want = (
        jax.nn.softplus(-disc.logits(p, z))
        + jnp.sum(w * jax.nn.softplus(d)) / jnp.sum(w)
        + 2.0 * jnp.sum(g**2)
    )
    np.testing.assert_allclose(disc.loss_fn(p, neg, w)[0], want, rtol=1e-6)
    st = ADDState(p, disc.tx.init(p))
    bad = neg.at[1].set(jnp.nan)
    a, _ = disc.update(st, bad, jnp.ones(5).at[1].set(0.0))
    b, _ = disc.update(st, neg.at[1].set(0.0), jnp.ones(5).at[1].set(0.0))
    for x, y in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-6)
        assert np.all(np.isfinite(x))


# ---------------------------------------------------------------------------- SHAC plumbing


def test_shac_phi_is_constant_in_actor_loss_and_trained_by_the_iteration():
    env = point_env()
    learner = SHAC(env, E.make("analytic"), TINY, iterations=5, reward_model=env.reward_model)
    state = learner.init(jax.random.PRNGKey(0))
    assert isinstance(state.reward_state, ADDState)
    key = jax.random.PRNGKey(4)

    # the reward's gradient w.r.t. the state is finite and non-zero
    d = env.initial_data(jax.random.PRNGKey(5))
    phi = state.reward_state.params
    gq = jax.grad(lambda q: env.reward(d, None, d.replace(qpos=q), phi))(d.qpos)
    assert np.all(np.isfinite(gq)) and np.any(gq != 0)

    # actor gradient non-zero, phi gradient through the actor loss exactly zero
    def loss_of(actor, phi):
        s = dataclasses.replace(state, reward_state=state.reward_state._replace(params=phi))
        return learner.actor_loss(actor, s, key)[0]

    g_actor, g_phi = jax.grad(loss_of, argnums=(0, 1))(state.actor, phi)
    assert any(np.any(x != 0) for x in _leaves(g_actor))
    assert all(np.all(x == 0) for x in _leaves(g_phi))

    new, m = jax.jit(learner.iteration)(state)
    assert _changed(state.reward_state.params, new.reward_state.params)
    assert _changed(state.actor, new.actor)
    for k in ("disc_loss", "disc_logit_pos", "disc_logit_neg", "actor_loss", "reward_mean"):
        assert np.isfinite(float(m[k])), k


def test_checkpoint_round_trip_keeps_phi(tmp_path):
    env = point_env()
    learner = SHAC(env, E.make("analytic"), TINY, iterations=5, reward_model=env.reward_model)
    template = learner.init(jax.random.PRNGKey(0))
    state, _ = jax.jit(learner.iteration)(template)
    assert _changed(template.reward_state, state.reward_state)
    mgr = harness._manager(tmp_path)
    harness.save_checkpoint(mgr, state, 1, 6, 0.5)
    mgr.close()
    restored, it, steps, _ = harness.restore_checkpoint(tmp_path, template)
    assert (it, steps) == (1, 6)
    for a, b in zip(_leaves(state.reward_state), _leaves(restored.reward_state), strict=True):
        np.testing.assert_array_equal(a, b)  # params and Adam moments


def test_fixed_reward_env_has_no_reward_state():
    """Without a reward_model nothing changes: no reward state, no discriminator metrics."""

    @dataclasses.dataclass(frozen=True, eq=False)
    class PointFixed(PointADD):
        reward_model = None

        def reward(self, data, action, next_data):
            return -jnp.sum(self.reward_model_input(next_data) ** 2)

    env = PointFixed(sim=point_env().sim)
    learner = SHAC(env, E.make("analytic"), TINY, iterations=5, reward_model=env.reward_model)
    state = learner.init(jax.random.PRNGKey(0))
    assert state.reward_state is None
    _, m = jax.jit(learner.iteration)(state)
    assert not any(k.startswith("disc_") for k in m)


# ---------------------------------------------------------------------------- errors


def test_bad_input_is_a_clear_value_error():
    from bcg.envs.g1.tracking import g1_jump

    with pytest.raises(ValueError, match="unknown G1 reward 'foo'"):
        g1_jump(reward="foo")
    with pytest.raises(ValueError, match="unknown ADD loss"):
        Discriminator(loss="wgan")
    with pytest.raises(ValueError, match="no setting"):
        g1_jump(reward="add", discriminator={"width": 3})
    run = dict(task="g1_jump", learner="bptt", estimator="analytic", env_params={"reward": "add"})
    with pytest.raises(ValueError, match="bptt cannot train"):
        registry.make_run_env(run)
    env = registry.make_run_env({**run, "learner": "shac"})
    with pytest.raises(ValueError, match="needs the discriminator parameters"):
        env.reward(None, None, None)  # what PPO / BPTT / plain_step would call
    assert env.evaluation_env.reward_type == "tracking" and env.evaluation_env.reward_model is None
    full = {**run, "learner": "shac", "num_envs": 2, "iterations": 1, "horizon": 2}
    eval_env, learner = registry.build(full)  # evaluates on the fixed reward, trains on ADD
    assert eval_env.reward_type == "tracking" and learner.env.reward_type == "add"
    with pytest.raises(ValueError, match="does not take env parameters"):
        registry.make_run_env({**run, "task": "hopper_jump", "learner": "shac"})


def test_cli_passes_env_params():
    args = cli.build_parser().parse_args(
        ["train", "--task", "g1_jump", "--param", "env.reward=add", "--param", "bcg.tau=600"]
    )
    run = cli._run_description(args)
    assert run["env_params"] == {"reward": "add"} and run["estimator_params"] == {"tau": 600}
    plain = cli._run_description(cli.build_parser().parse_args(["train", "--task", "g1_jump"]))
    assert "env_params" not in plain


# ---------------------------------------------------------------------------- G1


@pytest.mark.slow  # compiling a SHAC iteration through the G1 MJX step: ~5 min on 2 cores
def test_g1_jump_add_one_shac_iteration():
    """g1_jump(reward="add"): the reward's state gradient is finite and non-zero, and one
    SHAC iteration (2 envs x 2 steps) trains phi and returns finite numbers."""
    from bcg.envs.g1.tracking import g1_jump

    env = g1_jump(reward="add", discriminator={"hidden": [16]})
    assert (
        env.reward_model.n_features
        == env.reward_model_input(env.initial_data(jax.random.PRNGKey(0))).shape[0]
    )
    cfg = dataclasses.replace(TINY, horizon=2)
    learner = SHAC(env, E.make("analytic"), cfg, iterations=3, reward_model=env.reward_model)
    state = learner.init(jax.random.PRNGKey(0))
    d = env.initial_data(jax.random.PRNGKey(1))
    phi = state.reward_state.params
    gq = jax.jit(jax.grad(lambda q: env.reward(d, None, d.replace(qpos=q), phi)))(d.qpos)
    assert np.all(np.isfinite(gq)) and np.any(gq != 0)
    new, m = jax.jit(learner.iteration)(state)
    assert _changed(state.reward_state.params, new.reward_state.params)
    nan_ok = ("episode_return", "episode_length")  # nan before the first finished episode
    assert all(np.isfinite(float(v)) for k, v in m.items() if k not in nan_ok), m
    assert int(m["skipped_updates"]) == 0 and int(m["disc_skipped"]) == 0
