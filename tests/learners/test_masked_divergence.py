"""A diverged environment is dropped from the window, not allowed to poison the batch.

``BlowUp`` is the toy slide with a reward term that overflows to -Inf once the mass is past
x = 70.9 (1e-6 exp(10 x)); its backward pass there multiplies a zero loss weight by an infinite
derivative, the NaN that used to skip the whole update. One environment is started at
x = 70.5 moving at +10 m/s, so it overflows two control steps into the window; the others never
come near. The update must be applied, and must equal the gradient of the other environments
alone (per-environment gradients of a run where no environment diverges)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from toy import Toy, toy_env

from bcg import estimators as E
from bcg.learners import normalization as rms
from bcg.learners.bptt import BPTT, BPTTConfig
from bcg.learners.rollout import masked_env_sum, zero_nonfinite_cotangents
from bcg.learners.shac import SHAC, SHACConfig

CFG = SHACConfig(
    num_envs=4,
    horizon=6,
    actor_hidden=(8,),
    critic_hidden=(8,),
    critic_iterations=2,
    critic_minibatches=2,
)
BAD = 1  # the environment that diverges


@dataclasses.dataclass(frozen=True, eq=False)
class BlowUp(Toy):
    limit: float = 1e9  # no termination: only the overflow ends the bad environment

    def reward(self, data, action, next_data):
        base = super().reward(data, action, next_data)
        return base - 1e-6 * jnp.exp(10.0 * next_data.qpos[0])


def _env():
    return BlowUp(sim=toy_env().sim, episode_length=50)


def _with_bad_env(state):
    d = state.env.carry
    d = d.replace(qpos=d.qpos.at[BAD, 0].set(70.5), qvel=d.qvel.at[BAD, 0].set(10.0))
    return dataclasses.replace(state, env=state.env._replace(carry=d))


def _leaves(t):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(t)]


# a SHAC compile (~100 s cold); BPTT's masking and the shared guard are tested fast
@pytest.mark.slow
def test_shac_drops_the_diverged_environment_and_applies_the_others_gradient():
    env = _env()
    learner = SHAC(env, E.make("analytic"), CFG, iterations=10)
    good = learner.init(jax.random.PRNGKey(0))
    bad = _with_bad_env(good)
    _, k_roll, _ = jax.random.split(bad.key, 3)  # the iteration's rollout key

    # the actor gradient: finite, and that of the other environments alone
    (_, (_, traj, _)), g_bad = jax.value_and_grad(learner.actor_loss, has_aux=True)(
        bad.actor, bad, k_roll
    )
    div = np.asarray(traj.diverged)
    assert div[:, BAD].any() and not div[0, BAD], "the bad env must diverge inside the window"
    assert not np.delete(div, BAD, axis=1).any()
    per_env = learner.per_env_actor_gradients(good, k_roll)  # nothing diverges in `good`
    n = CFG.num_envs
    others = [e for e in range(n) if e != BAD]
    ref = jax.tree_util.tree_map(lambda j: j[jnp.array(others)].sum(0) * n / (n - 1), per_env)
    for a, b in zip(_leaves(g_bad), _leaves(ref), strict=True):
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)  # float32 networks
    assert max(np.abs(x).max() for x in _leaves(g_bad)) > 1e-6  # not a zero gradient

    # the iteration applies it, reports the masked env-steps, keeps the normaliser clean
    new, m = jax.jit(learner.iteration)(bad)
    assert int(m["actor_skipped"]) == 0 and int(m["skipped_updates"]) == 0
    assert np.isfinite(float(m["actor_grad_norm"]))
    assert float(m["masked_fraction"]) == pytest.approx(1 / n)
    pairs = zip(_leaves(new.actor), _leaves(bad.actor), strict=True)
    assert all(not np.array_equal(a, b) for a, b in pairs)
    obs = np.asarray(traj.obs)[:, others].reshape(-1, 2)
    expect = rms.update(bad.obs_rms, obs)
    np.testing.assert_allclose(np.asarray(new.obs_rms.mean), np.asarray(expect.mean), rtol=1e-9)
    assert np.all(np.isfinite(_leaves(new.critic)[0]))


@dataclasses.dataclass(frozen=True, eq=False)
class BlowUpStart(BlowUp):
    """Fresh episodes start in the blow-up region with probability 1/2."""

    def reset_state(self, key):
        q, v = super().reset_state(key)
        far = jax.random.bernoulli(jax.random.fold_in(key, 7))
        return jnp.where(far, 70.5, q), jnp.where(far, 10.0, v)


def test_bptt_drops_diverged_environments():
    env = BlowUpStart(sim=toy_env().sim, episode_length=6)
    learner = BPTT(env, E.make("analytic"), BPTTConfig(num_envs=8, actor_hidden=(8,)))
    state = learner.init(jax.random.PRNGKey(2))
    new, m = jax.jit(learner.iteration)(state)
    assert 0 < float(m["masked_fraction"]) < 1
    assert int(m["actor_skipped"]) == 0 and np.isfinite(float(m["actor_grad_norm"]))
    pairs = zip(_leaves(new.actor), _leaves(state.actor), strict=True)
    assert any(not np.array_equal(a, b) for a, b in pairs)


def test_zeroed_cotangents_are_per_environment_and_counted():
    """The guard zeroes exactly the environments whose cotangent is non-finite and reports
    them through the probe; a masked sum selects (never multiplies) the dropped terms."""

    def f(x, probe):
        y = zero_nonfinite_cotangents(x, probe)
        per_env = jnp.sum(jnp.log(y) * jnp.array([1.0, 0.0, 2.0])[:, None], axis=1)
        return masked_env_sum(per_env, jnp.array([True, False, True]))

    x = jnp.array([[1.0, 2.0], [0.0, 1.0], [3.0, 4.0]])  # log(0) = -inf in env 1
    gx, gp = jax.grad(f, argnums=(0, 1))(x, jnp.zeros(3, jnp.float32))
    np.testing.assert_allclose(np.asarray(gx), [[1.5, 0.75], [0.0, 0.0], [1.0, 0.75]])
    np.testing.assert_array_equal(np.asarray(gp), [0.0, 1.0, 0.0])
