"""G1 domain randomisation: every item switchable, ranges, native and MJX versions."""

import dataclasses
import warnings

import jax
import mujoco
import numpy as np
import pytest

from bcg.envs.g1 import model as gm
from bcg.envs.g1 import randomization as gr
from bcg.envs.g1 import tracking as g1
from bcg.transfer.config import TransferConfig
from bcg.transfer.randomizer import Randomizer

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx

FIELDS = (
    "geom_friction",
    "body_mass",
    "body_inertia",
    "body_ipos",
    "actuator_gainprm",
    "actuator_biasprm",
    "dof_armature",
    "dof_frictionloss",
)


@pytest.fixture(scope="module")
def m():
    return gm.mj_model(visuals=False)


def _changed(m0, m1):
    return {f for f in FIELDS if not np.array_equal(getattr(m0, f), getattr(m1, f))}


def test_none_is_identity_and_copy(m):
    before = {f: getattr(m, f).copy() for f in FIELDS}
    r = gr.randomize(m, 0, gr.Randomization.none())
    assert r is not m and not _changed(m, r)
    gr.randomize(m, 0, gr.Randomization.full())
    assert all(np.array_equal(before[f], getattr(m, f)) for f in FIELDS)  # original untouched


@pytest.mark.parametrize(
    "item,fields",
    [
        ("friction", {"geom_friction"}),
        ("base_mass", {"body_mass", "body_inertia"}),
        ("link_mass", {"body_mass", "body_inertia"}),
        ("com", {"body_ipos"}),
        ("kp", {"actuator_gainprm", "actuator_biasprm"}),
        ("kd", {"actuator_biasprm"}),
        ("armature", {"dof_armature"}),
        ("joint_friction", {"dof_frictionloss"}),
        ("joint_offset", {"actuator_biasprm"}),
    ],
)
def test_each_item_alone(m, item, fields):
    cfg = gr.Randomization.full().only(item)
    assert cfg.enabled == (item,)
    assert _changed(m, gr.randomize(m, 1, cfg)) == fields


def test_ranges(m):
    cfg = gr.Randomization.full()
    root = m.body("pelvis").id
    feet = gm.foot_geom_ids(m)
    dofs = gm.joint_dof_indices(m)
    for seed in range(20):
        r = gr.randomize(m, seed, cfg)
        mu = r.geom_friction[feet, 0]
        assert np.all(mu == r.geom_friction[m.geom("floor").id, 0]) and 0.3 <= mu[0] <= 1.2
        others = np.arange(2, m.nbody)
        ratio = r.body_mass[others] / m.body_mass[others]
        assert np.all((ratio >= 0.8) & (ratio <= 1.2))
        assert abs(r.body_mass[root] - m.body_mass[root]) <= 3.0
        assert np.all(np.abs(r.body_ipos[root] - m.body_ipos[root]) <= 0.03)
        kp = r.actuator_gainprm[:, 0] / m.actuator_gainprm[:, 0]
        assert np.all((kp >= 0.8) & (kp <= 1.2))
        np.testing.assert_allclose(r.actuator_biasprm[:, 1], -r.actuator_gainprm[:, 0])
        a = r.dof_armature[dofs] / m.dof_armature[dofs]
        assert np.all((a >= 0.75) & (a <= 1.25))
        f = r.dof_frictionloss[dofs] / m.dof_frictionloss[dofs]
        assert np.all((f >= 0.5) & (f <= 1.5))


def test_joint_offset_shifts_the_servo_equilibrium(m):
    """With the offset, the servo's force vanishes at target + offset (native actuator force)."""
    r = gr.randomize(m, 3, gr.Randomization.full().only("joint_offset", "kp"))
    off = r.actuator_biasprm[:, 0] / r.actuator_gainprm[:, 0]
    assert np.all(np.abs(off) <= 0.01) and np.any(np.abs(off) > 1e-4)
    d = mujoco.MjData(r)
    mujoco.mj_resetDataKeyframe(r, d, 0)
    target = r.key_ctrl[0]
    d.ctrl[:] = target
    d.act[:] = target
    d.qpos[gm.joint_qpos_indices(r)] = target + off
    mujoco.mj_forward(r, d)
    assert np.max(np.abs(d.actuator_force)) < 1e-9


def test_mjx_twin_ranges_and_vmap(m):
    mx = mjx.put_model(m)
    cfg = gr.Randomization.full()
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    batch = jax.vmap(lambda k: gr.randomize_mjx(mx, k, cfg, m))(keys)
    kp = np.asarray(batch.actuator_gainprm[:, :, 0]) / m.actuator_gainprm[:, 0]
    assert kp.shape == (4, 29) and np.all((kp >= 0.8) & (kp <= 1.2))
    assert len({round(float(x), 6) for x in kp[:, 0]}) == 4  # per-environment models
    mu = np.asarray(batch.geom_friction[:, gm.foot_geom_ids(m), 0])
    assert np.all((mu >= 0.3) & (mu <= 1.2))
    root = m.body("pelvis").id
    dm = np.asarray(batch.body_mass[:, root]) - m.body_mass[root]
    assert np.all(np.abs(dm) <= 3.0)
    np.testing.assert_allclose(np.asarray(batch.body_mass[:, 0]), 0.0)
    off = gr.randomize_mjx(mx, keys[0], cfg.only("friction"), m)
    np.testing.assert_array_equal(np.asarray(off.actuator_gainprm), m.actuator_gainprm)


def test_mjx_draws_reproduce_the_native_randomisation(m):
    """The MJX twin from ``rng.random(num_draws)`` equals native ``randomize`` with that seed
    (every item on): same draw order, same ranges."""
    cfg = gr.Randomization.full()
    for seed in (0, 3):
        native = gr.randomize(m, seed, cfg)
        draws = np.random.default_rng(seed).random(gr.num_draws(m))
        twin = gr.randomize_mjx_draws(mjx.put_model(m), draws, cfg, m)
        for f in FIELDS:
            np.testing.assert_allclose(
                np.asarray(getattr(twin, f)), getattr(native, f), rtol=2e-6, atol=1e-7, err_msg=f
            )


def test_per_environment_models_in_training():
    """With a model item on, each reset draws its environment's model into ``userdata`` and
    ``sim.model_for`` steps that state with it; a state without draws gets the nominal model;
    with only reset noise the model is shared as before."""
    env = g1.g1_jump(randomization="kp,friction,reset_noise")
    n = gr.num_draws(env.sim.mj_model)
    assert env.sim.mj_model.nuserdata == n + 1 and env.sim.model_at is not None
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    d = jax.vmap(env.initial_data)(keys)
    ud = np.asarray(d.userdata)
    assert np.all(ud[:, 0] == 1.0) and np.all((ud[:, 1:] >= 0) & (ud[:, 1:] < 1))
    models = jax.vmap(env.sim.model_for)(d)
    kp = np.asarray(models.actuator_gainprm[:, :, 0]) / env.sim.mj_model.actuator_gainprm[:, 0]
    assert np.all((kp >= 0.8 - 1e-6) & (kp <= 1.2 + 1e-6)) and np.ptp(kp[:, 0]) > 1e-3
    want = gr.randomize_mjx_draws(env.sim.mjx_model, ud[1, 1:], env.randomization, env.sim.mj_model)
    for f in FIELDS:
        np.testing.assert_allclose(np.asarray(getattr(models, f)[1]), getattr(want, f), rtol=1e-6)
    # items that are off keep the nominal values
    np.testing.assert_array_equal(np.asarray(models.body_mass[0]), env.sim.mj_model.body_mass)
    nominal = env.sim.model_for(jax.tree_util.tree_map(lambda x: x[0] * 0, d))
    np.testing.assert_array_equal(
        np.asarray(nominal.actuator_gainprm), env.sim.mj_model.actuator_gainprm
    )
    # latency {0, 1} control steps: by default a one-step hold of the previous control in the
    # envs that draw it; with latency_mode="lag" a servo-filter lag of 0 (nominal 1 ms) or 20 ms
    hold = g1.g1_jump(randomization="latency,kp")
    assert hold.sim.hold_at is not None
    ud = np.zeros(hold.sim.mj_model.nuserdata)
    lat = 1 + gr._block_start(hold.sim.mj_model, "latency")
    for flag, u, want in ((1.0, 0.7, True), (1.0, 0.2, False), (0.0, 0.7, False)):
        ud[0], ud[lat] = flag, u
        one = jax.tree_util.tree_map(lambda x: x[0], d).replace(userdata=jax.numpy.asarray(ud))
        assert bool(hold.sim.hold_at(one)) == want
    cfg = dataclasses.replace(gr.Randomization.parse("latency,kp"), latency_mode="lag")
    lag = g1.g1_jump(randomization=cfg)
    assert lag.sim.hold_at is None
    draws = np.zeros(gr.num_draws(lag.sim.mj_model))
    for u, want in ((0.2, gm.ACT_FILTER_TIMECONST), (0.7, 0.02)):
        draws[lat - 1] = u
        tw = gr.randomize_mjx_draws(lag.sim.mjx_model, draws, lag.randomization, lag.sim.mj_model)
        np.testing.assert_allclose(np.asarray(tw.actuator_dynprm[:, 0]), want, rtol=1e-6)
    shared = g1.g1_jump(randomization="reset_noise")
    assert shared.sim.model_at is None and shared.sim.mj_model.nuserdata == 0


def test_parse():
    R = gr.Randomization
    assert R.parse("none").enabled == () and R.parse(None).enabled == ()
    assert R.parse("all").enabled == gr.ITEMS
    assert R.parse("friction,kp").enabled == ("friction", "kp")
    assert "push" not in R.parse("all,-push,-latency").enabled
    with pytest.raises(ValueError, match="unknown randomisation item"):
        R.parse("friction,gravity")


def test_episode_sampling():
    cfg = gr.Randomization.full()
    lat = set()
    for seed in range(30):
        ep = gr.sample_episode(seed, cfg, 0.02, 500)  # 10 s
        lat.add(ep.latency)
        steps = [p.step for p in ep.pushes]
        assert 3 <= len(steps) <= 10
        gaps = np.diff(steps)
        assert 50 <= steps[0] <= 150 and np.all((gaps >= 49) & (gaps <= 151))
        for p in ep.pushes:
            assert np.all(np.abs(p.linear) <= [0.5, 0.5, 0.2])
            assert np.all(np.abs(p.angular) <= [0.52, 0.52, 0.78])
    assert lat == {0, 1}
    quiet = gr.sample_episode(0, gr.Randomization.none(), 0.02, 500)
    assert quiet.latency == 0 and quiet.pushes == ()
    v = gr.apply_push(np.zeros(35), gr.Push(0, np.array([0.1, 0, 0]), np.array([0, 0, 0.3])))
    assert v[0] == 0.1 and v[5] == 0.3 and not v[6:].any()


def test_push_schedule_in_training():
    """MJX pushes: the schedule from draws has the native episode's ranges (first push at
    1-3 s, then every 1-3 s; kicks within the table's bounds), and ``sim.push_at`` gives a
    state exactly its due kick (world linear velocity, root-frame angular velocity) at the due
    control step, nothing at other steps or without draws."""
    cfg = gr.Randomization.full()
    rng = np.random.default_rng(0)
    for _ in range(20):
        steps, lin, ang = gr.push_schedule(rng.random(7 * gr.MAX_PUSHES), cfg, 0.02)
        steps, gaps = np.asarray(steps), np.diff(np.asarray(steps))
        assert 50 <= steps[0] <= 150 and np.all((gaps >= 49) & (gaps <= 151))
        assert np.all(np.abs(np.asarray(lin)) <= np.asarray(cfg.push_linear) + 1e-6)
        assert np.all(np.abs(np.asarray(ang)) <= np.asarray(cfg.push_angular) + 1e-6)
    env = g1.g1_jump(randomization="push")
    sim = env.sim
    assert sim.push_at is not None and sim.model_at is not None
    assert sim.mj_model.nuserdata == 1 + gr.num_draws(sim.mj_model)
    ud = np.zeros(sim.mj_model.nuserdata)
    at = 1 + gr._block_start(sim.mj_model, "push")
    block = np.full((gr.MAX_PUSHES, 7), 0.5)
    block[0] = [0.25, 1.0, 0.0, 0.5, 0.75, 0.25, 1.0]  # t_1 = 1 + 2 * 0.25 = 1.5 s: step 75
    block[1] = [0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # t_2 = 1.5 + 2 s: step 175, largest kicks
    ud[0], ud[at : at + block.size] = 1.0, block.reshape(-1)
    d = env.initial_data(jax.random.PRNGKey(0))

    def kick(flag, step):
        u = ud.copy()
        u[0] = flag
        one = d.replace(userdata=jax.numpy.asarray(u, d.userdata.dtype), time=step * 0.02)
        return np.asarray(sim.push_at(one))

    want = np.zeros(sim.nv)
    want[0:3] = [0.5, -0.5, 0.0]
    want[3:6] = [0.26, -0.26, 0.78]
    np.testing.assert_allclose(kick(1.0, 75), want, atol=1e-6)
    assert not kick(1.0, 74).any() and not kick(1.0, 76).any() and not kick(0.0, 75).any()
    np.testing.assert_allclose(kick(1.0, 175)[:6], [0.5, 0.5, 0.2, 0.52, 0.52, 0.78], atol=1e-6)


def test_g1_transfer_runs_play_the_whole_clip():
    """Training resets at a random clip frame; transfer runs start at frame 0 (with the table's
    reset noise when randomised, nominal otherwise), so that every run passes the jump."""
    env = g1.g1_jump(randomization="reset_noise")
    keys = [jax.random.PRNGKey(i) for i in range(4)]
    assert len({float(env.initial_data(k).time) for k in keys}) > 1  # random frames
    m = env.sim.mj_model
    for randomize in (True, False):
        init = Randomizer(env, TransferConfig(randomize=randomize), m).init_env
        assert init.start == "first"
        d = [init.initial_data(k) for k in keys]
        assert all(float(x.time) == 0.0 for x in d)
        q0 = np.asarray(env.reference.qpos[0])
        spread = max(np.abs(np.asarray(x.qpos) - q0).max() for x in d)
        assert (spread > 1e-3) if randomize else (spread < 1e-9)
    with pytest.raises(ValueError, match="start must be"):
        g1.g1_jump(start="middle")
