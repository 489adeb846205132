"""PPO baseline through brax: the ContactEnv adapter, brax's wrappers on it, and train_ppo."""

import csv
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg.sim as bs
from bcg.envs import hopper_jump
from bcg.envs.base import ContactEnv
from bcg.learners.brax_env import to_brax

POGO_XML = """
<mujoco model="pogo">
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="mass" pos="0 0 0.3">
      <joint name="z" type="slide" axis="0 0 1" ref="0.3"/>
      <geom name="ball" type="sphere" size="0.1" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="z" gear="20" ctrlrange="-1 1"/></actuator>
  <keyframe><key name="init" qpos="0.3" qvel="0"/></keyframe>
</mujoco>
"""


@dataclasses.dataclass(frozen=True, eq=False)
class Pogo(ContactEnv):
    """1-DoF ball on a vertical slide with a motor: cheap to compile. Starts at a random
    height in [0.2, 0.5] m falling at 2 m/s (so it terminates at different steps or not at all
    within a few steps); reward = height; terminated below ``z_min``."""

    episode_length: int = 10
    z_min: float = 0.25

    def reset_state(self, key):
        return jax.random.uniform(key, (1,), minval=0.2, maxval=0.5), jnp.full(1, -2.0)

    def observe(self, data):
        return jnp.concatenate([data.qpos, 0.1 * data.qvel])

    def reward(self, data, action, next_data):
        return next_data.qpos[0] - 0.01 * jnp.sum(action**2)

    def terminated(self, data):
        return data.qpos[0] < self.z_min


@pytest.fixture(scope="module")
def pogo():
    return Pogo(sim=bs.load(POGO_XML, stiffness="stiff"))


def test_adapter_matches_plain_step_on_hopper():
    env = hopper_jump("stiff")
    benv = to_brax(env)
    assert benv.observation_size == env.observation_size == 9
    assert benv.action_size == env.action_size == 2
    assert benv.backend == "mjx"
    actions = jax.random.uniform(jax.random.PRNGKey(1), (4, 2), minval=-1, maxval=1)

    @jax.jit
    def both(key):
        def body(carry, a):
            s, d = carry
            s = benv.step(s, a)
            d, r, term = env.plain_step(d, a)
            got = (s.obs, s.pipeline_state.qpos, s.reward, s.done)
            return (s, d), (got, (env.observe(d), d.qpos, r, term))

        s, d = benv.reset(key), env.initial_data(key)
        np0 = ((s.obs, s.pipeline_state.qpos, s.reward, s.done), (env.observe(d), d.qpos))
        _, traj = jax.lax.scan(body, (s, d), actions)
        return np0, traj

    (got0, ref0), (got, ref) = both(jax.random.PRNGKey(0))
    np.testing.assert_allclose(got0[0], np.asarray(ref0[0], np.float32), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got0[1], ref0[1])
    assert float(got0[2]) == 0.0 and float(got0[3]) == 0.0
    obs, qpos, rew, done = got
    assert obs.dtype == jnp.float32
    np.testing.assert_allclose(obs, np.asarray(ref[0], np.float32), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(qpos, ref[1])
    np.testing.assert_allclose(rew, ref[2], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(done).astype(bool), np.asarray(ref[3]))
    # the hopper moved (the comparison is not trivially between two initial states)
    assert np.abs(qpos[-1] - got0[1]).max() > 1e-4


def test_brax_wrap_keeps_truncation_apart_from_termination(pogo):
    """vmap + EpisodeWrapper + AutoResetWrapper (brax.envs.wrappers.training.wrap) on the
    adapter: done = terminated or time limit, truncation = time limit and not terminated,
    auto-reset to the first state, step counter restarting, against an independent model."""
    from brax.envs.wrappers.training import wrap

    n, T, K = 16, 4, 9  # envs, episode length, wrapper steps (> 2 episodes)
    env = wrap(to_brax(pogo), episode_length=T)
    keys = jax.random.split(jax.random.PRNGKey(3), n)
    zero = jnp.zeros((n, 1))

    @jax.jit
    def run(keys):
        def body(s, _):
            s = env.step(s, zero)
            return s, (s.done, s.info["truncation"], s.info["steps"], s.obs)

        s = env.reset(keys)
        return s.obs, jax.lax.scan(body, s, None, K)[1]

    first, outs = run(keys)
    first = np.asarray(first)

    # independent reference: first termination time of each env from its initial state
    # (zero actions, so every episode of an env repeats the same trajectory)
    @jax.jit
    def terms(keys):
        def body(d, _):
            d, _, term = jax.vmap(lambda d: pogo.plain_step(d, jnp.zeros(1)))(d)
            return d, term

        return jax.lax.scan(body, jax.vmap(pogo.initial_data)(keys), None, T)[1]

    term = np.asarray(terms(keys))  # (T, n): terminated after c = 1..T plain steps
    first_term = np.where(term.any(0), term.argmax(0) + 1, 10**6)
    assert (first_term <= T).any() and (first_term > T).any(), "need both kinds of episode end"
    assert ((first_term > 1) & (first_term <= T)).any(), "need a termination after step 1"

    c = np.zeros(n, int)
    for k in range(K):
        done, trunc, steps, obs = (np.asarray(x[k]) for x in outs)
        c = c + 1
        term = c == first_term
        exp_done = term | (c >= T)
        exp_trunc = (c >= T) & ~term
        np.testing.assert_array_equal(done.astype(bool), exp_done, err_msg=f"step {k}")
        np.testing.assert_array_equal(trunc.astype(bool), exp_trunc, err_msg=f"step {k}")
        np.testing.assert_array_equal(steps, c)
        np.testing.assert_allclose(obs[exp_done], first[exp_done])  # auto-reset observation
        assert not np.allclose(obs[~exp_done], first[~exp_done]) or (~exp_done).sum() == 0
        c = np.where(exp_done, 0, c)


TINY = dict(
    num_envs=4,
    episode_length=8,
    batch_size=4,
    num_minibatches=2,
    unroll_length=4,
    num_updates_per_batch=1,
    num_evals=3,
    num_eval_envs=2,
    policy_hidden_layer_sizes=(8,),
    value_hidden_layer_sizes=(8,),
    progress=False,
)


def _count(normalizer) -> int:
    c = normalizer.count
    return int(c.to_numpy() if hasattr(c, "to_numpy") else np.asarray(c))


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_train_ppo_end_to_end_and_reload(pogo, tmp_path):
    from bcg.learners.ppo import evaluate, load_ppo_policy, make_deterministic_policy, train_ppo

    run = tmp_path / "run"
    make_policy, params, history = train_ppo(pogo, num_timesteps=128, seed=0, run_dir=run, **TINY)

    # metrics: one row per evaluation, increasing env steps, finite returns
    rows = _read(run / "metrics.csv")
    assert len(rows) == len(history) == 3
    assert {"iteration", "env_steps", "wall_time", "eval_return"} <= set(rows[0])
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3]
    assert (run / "training.png").stat().st_size > 1000
    steps = [int(r["env_steps"]) for r in rows]
    assert steps[0] == 0 and all(b > a for a, b in zip(steps, steps[1:], strict=False))
    assert steps == [0, 64, 128]  # 2 epochs x 2 updates x (4 x 2 trajectories x 4 steps)
    assert all(np.isfinite(float(r["eval_return"])) for r in rows)
    assert all(float(r["wall_time"]) > 0 for r in rows)
    assert list(run.glob("events.out.tfevents.*")), "no TensorBoard event file"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [f"{64:012d}", f"{128:012d}"]

    # the reloaded policy is the trained deterministic policy
    policy = load_ppo_policy(run, pogo)
    trained = make_deterministic_policy(make_policy, params)
    obs = jax.random.normal(jax.random.PRNGKey(5), (16, pogo.observation_size))
    a = np.asarray(policy(obs))
    assert a.shape == (16, 1) and np.all(np.abs(a) <= 1.0)
    np.testing.assert_array_equal(a, np.asarray(trained(obs)))
    # ... and it is not an untrained constant
    assert np.ptp(a) > 0
    # the last checkpoint holds the same parameters; the earlier one differs
    np.testing.assert_array_equal(np.asarray(load_ppo_policy(run, pogo, step=128)(obs)), a)
    assert not np.array_equal(np.asarray(load_ppo_policy(run, pogo, step=64)(obs)), a)

    mean, rets, lens = evaluate(pogo, policy, 3, jax.random.PRNGKey(0))
    assert rets.shape == (3,) and np.isfinite(mean)
    assert np.all((lens >= 1) & (lens <= pogo.episode_length))


def test_train_ppo_resume_continues_from_the_last_checkpoint(pogo, tmp_path):
    from bcg.learners.ppo import latest_checkpoint, train_ppo

    run = tmp_path / "run"
    _, params1, _ = train_ppo(pogo, num_timesteps=128, seed=0, run_dir=run, **TINY)
    assert latest_checkpoint(run)[1] == 128
    _, params2, hist = train_ppo(pogo, num_timesteps=256, seed=0, run_dir=run, resume=True, **TINY)
    # the resumed part starts from the checkpoint (its env steps continue, no step-0 row)
    assert [r["env_steps"] for r in hist] == [192, 256]
    rows = _read(run / "metrics.csv")
    assert [int(r["env_steps"]) for r in rows] == [0, 64, 128, 192, 256]
    times = [float(r["wall_time"]) for r in rows]
    assert times == sorted(times)
    assert latest_checkpoint(run)[1] == 256
    # the normaliser kept counting from the restored state (not restarted at 0)
    assert _count(params2[0]) > _count(params1[0]) > 0
    # resuming a finished run trains nothing
    _, params3, hist3 = train_ppo(pogo, num_timesteps=256, seed=0, run_dir=run, resume=True, **TINY)
    assert hist3 == []
    np.testing.assert_array_equal(params3[0].mean, params2[0].mean)


def test_adapter_ends_a_diverged_episode_with_finite_values(pogo):
    """A non-finite next state is a termination with reward 0 and observation 0 (brax then
    resets it); a finite one is untouched."""
    benv = to_brax(pogo)
    s0 = benv.reset(jax.random.PRNGKey(0))
    ok = jax.jit(benv.step)(s0, jnp.zeros(1))
    assert float(ok.done) == 0.0 and np.all(np.isfinite(np.asarray(ok.obs)))
    bad_state = s0.replace(pipeline_state=s0.pipeline_state.replace(qvel=jnp.full((1,), jnp.inf)))
    bad = jax.jit(benv.step)(bad_state, jnp.zeros(1))
    assert not np.all(np.isfinite(np.asarray(bad.pipeline_state.qpos)))  # it did diverge
    assert float(bad.done) == 1.0 and float(bad.reward) == 0.0
    np.testing.assert_array_equal(np.asarray(bad.obs), 0.0)
