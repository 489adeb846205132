"""The shared episode sampler (latency, pushes): its documented draws, and that the G1 table and
the generic native transfer runs both draw through it."""

import dataclasses

import jax.numpy as jnp
import numpy as np

from bcg.envs.base import ContactEnv
from bcg.envs.episode_randomization import Push, apply_push, sample_episode
from bcg.envs.g1 import randomization as gr
from bcg.sim import load
from bcg.transfer.config import TransferConfig
from bcg.transfer.randomizer import Randomizer

DT, STEPS = 0.02, 500  # 10 s


def _by_hand(seed, latency, interval, lin, ang):
    """The module docstring's draws, written out: latency, then push times and kicks."""
    rng = np.random.default_rng(seed)
    lat = int(rng.integers(latency[0], latency[1] + 1)) if latency else 0
    out, t = [], rng.uniform(*interval) if interval else np.inf
    while t < STEPS * DT:
        kick = (rng.uniform(-1, 1, 3) * np.asarray(lin), rng.uniform(-1, 1, 3) * np.asarray(ang))
        out.append((int(round(t / DT)), *kick))
        t += rng.uniform(*interval)
    return lat, out


def test_sampler_draws_as_documented():
    for seed in range(5):
        for latency, interval in (((0, 1), (1.0, 3.0)), (None, (0.5, 1.0)), ((1, 3), None)):
            lin, ang = (0.3, 0.2, 0.1), (0.1, 0.2, 0.3)
            ep = sample_episode(
                seed,
                DT,
                STEPS,
                latency=latency,
                push_interval=interval,
                push_linear=lin,
                push_angular=ang,
            )
            lat, pushes = _by_hand(seed, latency, interval, lin, ang)
            assert ep.latency == lat and len(ep.pushes) == len(pushes)
            for p, (step, a, b) in zip(ep.pushes, pushes, strict=True):
                assert p.step == step
                np.testing.assert_array_equal(p.linear, a)
                np.testing.assert_array_equal(p.angular, b)
    v = apply_push(np.zeros(8), Push(0, np.array([0.1, 0, 0]), np.array([0, 0, 0.3])))
    assert v[0] == 0.1 and v[5] == 0.3 and not v[6:].any()


BOX = """<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
<body pos="0 0 .2"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/></body>
</worldbody></mujoco>"""


@dataclasses.dataclass(frozen=True, eq=False)
class _Box(ContactEnv):
    def reset_state(self, key):
        return jnp.asarray(self.sim.mj_model.qpos0), jnp.zeros(6)

    def observe(self, data):
        return data.qpos

    def reward(self, data, action, next_data):
        return 0.0


def test_g1_table_and_generic_transfer_runs_draw_alike():
    """The G1's full table and a generic free-root env's transfer runs use the same ranges:
    with one seed they draw the same latency and pushes."""
    env = _Box(sim=load(BOX, stiffness="soft", name="box"))
    rand = Randomizer(env, TransferConfig(), env.sim.mj_model)
    assert rand.own is None  # the generic path
    for seed in range(5):
        lat, pushes = rand.episode(np.random.default_rng(seed), STEPS, DT)
        ep = gr.sample_episode(seed, gr.Randomization.full(), DT, STEPS)
        assert lat == ep.latency and sorted(pushes) == [p.step for p in ep.pushes]
        for p in ep.pushes:
            np.testing.assert_array_equal(pushes[p.step][0], p.linear)
            np.testing.assert_array_equal(pushes[p.step][1], p.angular)
    quiet = Randomizer(env, TransferConfig(latency=False, pushes=False), env.sim.mj_model)
    assert quiet.episode(np.random.default_rng(0), STEPS, DT) == (0, {})


@dataclasses.dataclass(frozen=True)
class _Table:
    """An env's own transfer table (as the G1's): latency 1 and two pushes, drawn from rng."""

    init_env: object
    notes: tuple = ("own table",)

    def model(self, m, rng):
        return m

    def episode(self, rng, steps, control_dt):
        ep = sample_episode(rng, control_dt, steps, latency=(1, 1), push_interval=(1.0, 3.0))
        return ep.latency, {p.step: (p.linear, p.angular) for p in ep.pushes}


@dataclasses.dataclass(frozen=True, eq=False)
class _OwnTable(_Box):
    def native_randomization(self, spec):
        return _Table(self)


def test_an_env_s_own_table_honours_latency_and_pushes_off():
    """The held-out G1 protocol's "model" condition (no pushes) on an env with its own table:
    the pushes are drawn and dropped, the latency kept; and the other way round."""
    env = _OwnTable(sim=load(BOX, stiffness="soft", name="box"))
    m = env.sim.mj_model

    def episode(**kw):
        return Randomizer(env, TransferConfig(**kw), m).episode(np.random.default_rng(3), STEPS, DT)

    lat, pushes = episode()
    assert lat == 1 and len(pushes) >= 3
    assert episode(pushes=False) == (1, {})
    lat0, pushes0 = episode(latency=False)
    assert lat0 == 0 and sorted(pushes0) == sorted(pushes)
    assert "pushes off" in Randomizer(env, TransferConfig(pushes=False), m).notes
