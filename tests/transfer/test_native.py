"""Native-MuJoCo transfer (bcg.transfer.native) on the hopper-jump checkpoint."""

import dataclasses
import json
import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg.envs.hopper_jump import HopperJump
from bcg.transfer import native
from bcg.transfer.policy import LoadedPolicy, load_policy, policy_from_learner

sys.path.insert(0, str(Path(__file__).parent))
from hoppers import ClockedHopper, CommandSeeingHopper  # noqa: E402
from pdbot import PDBOT_XML, pdbot_env  # noqa: E402


def test_native_bridge_observes_like_mjx(hopper_run):
    """The env's observation / reward on native data equal those on mjx.put_data of it."""
    from mujoco import mjx

    _, env, _, _ = hopper_run
    m, notes = native.native_model(env, "hopper_jump")
    assert m.opt.iterations == 100 and m.opt.ls_iterations == 50
    assert np.allclose(m.geom_solref[:, 0], 0.02)  # MuJoCo's default contact, not "stiff"
    assert env.sim.mj_model.geom_solref[0, 0] < 0.02
    bridge = native.NativeBridge(env, m)
    d = native.data_from_mjx(m, env.initial_data(jax.random.PRNGKey(3)))
    d0 = bridge.to_mjx(d)
    for _ in range(12):
        d.ctrl[:] = [0.3, -0.2]
        mujoco.mj_step(m, d)
    want = env.observe(mjx.put_data(m, d))
    np.testing.assert_allclose(bridge.observe(d), np.asarray(want), rtol=1e-6, atol=1e-6)
    a = jnp.array([0.1, -0.4])
    r = bridge.reward(d0, a, bridge.to_mjx(d))
    assert math.isclose(r, float(env.reward(d0, a, mjx.put_data(m, d))), rel_tol=1e-6)


def test_transfer_report_hopper(hopper_run, tmp_path):
    run_dir, env, _, _ = hopper_run
    pol = load_policy(run_dir)
    cfg = native.TransferConfig(runs=2, seconds=0.3, seed=1)
    rep = native.transfer(pol, cfg)
    json.dumps(rep)  # JSON-able
    assert rep["steps"] == 15
    for k in ("native", "training_sim"):
        s = rep[k]["summary"]
        assert s["runs"] == 2 and 0 <= s["falls"] <= 2
        assert len(rep[k]["runs"]) == 2
        assert math.isnan(s["tracking_error_cm"])  # hopper has no reference
        assert s["penetration_mm"] >= 0  # the hopper lands within 0.1 s: contact steps exist
    assert all(r["contact_steps"] > 0 for r in rep["native"]["runs"])
    for r in rep["native"]["runs"] + rep["training_sim"]["runs"]:  # flight within the run
        assert 0 <= r["airborne_s"] <= r["steps"] * rep["control_dt"] + 1e-9
        assert r["clearance_cm"] > -5 and (r["airborne_s"] == 0 or r["clearance_cm"] > 0)
    nat, tr = rep["native"]["summary"], rep["training_sim"]["summary"]
    assert rep["penetration_gap_mm"] == nat["penetration_mm"] - tr["penetration_mm"]
    text = native.format_report(rep)
    assert "native MuJoCo" in text and "training sim (MJX)" in text and "flight (s)" in text
    assert "fall: env.terminated() (the env declares no fell())" in text
    assert "foot geoms: named *foot*" in text
    assert "the env declares no randomize()" in text


@dataclasses.dataclass(frozen=True, eq=False)
class HookedHopper(HopperJump):
    """hopper_jump with the optional hooks of the declared env interface (as the G1 env has)."""

    fall_height: float = 0.7
    foot_geom_ids: tuple = (4,)

    def fell(self, data):
        return data.qpos[1] < self.fall_height  # the torso height

    def randomize(self, m, rng):
        m.geom_friction[:, 0] = rng.uniform(0.3, 1.2)
        return m

    def tracking_error(self, data):
        """Mean distance of the torso and the shin to a fixed reference."""
        ref = jnp.array([[0.0, 0.0, 0.74], [0.0, 0.0, 0.05]])
        return jnp.mean(jnp.linalg.norm(data.xpos[jnp.array([1, 3])] - ref, axis=-1))


def test_transfer_uses_env_hooks(hopper_run):
    _, env, learner, state = hopper_run
    henv = HookedHopper(sim=env.sim)
    pol = dataclasses.replace(
        policy_from_learner(learner, state, run={"task": "hopper_jump"}), env=henv
    )
    cfg = native.TransferConfig(runs=2, seconds=0.6, training_sim=False)
    rep = native.transfer(pol, cfg)
    text = native.format_report(rep)
    assert "fall: env.fell()" in text
    assert "model randomisation: env.randomize" in text
    assert "foot geoms: env.foot_geom_ids (1)" in text
    assert "tracking error: env.tracking_error" in text
    runs = rep["native"]["runs"]
    assert all(r["tracking_error_cm"] > 0 for r in runs)

    # the tracking error is the mean distance of the tracked bodies to the reference
    m, _ = native.native_model(henv, "hopper_jump")
    bridge = native.NativeBridge(henv, m)
    d = native.data_from_mjx(m, henv.initial_data(jax.random.PRNGKey(0)))
    s = mujoco.MjData(m)
    s.qpos[:] = d.qpos
    mujoco.mj_kinematics(m, s)
    ref = np.array([[0.0, 0.0, 0.74], [0.0, 0.0, 0.05]])
    want = np.mean(np.linalg.norm(s.xpos[[1, 3]] - ref, axis=1))
    assert math.isclose(bridge.tracking_error(d), want, rel_tol=1e-5)


def test_fall_is_root_height_below_fall_height(hopper_run):
    _, env, learner, state = hopper_run
    henv = HookedHopper(sim=env.sim, fall_height=0.85)  # above the 0.79 m start: falls at once
    pol = dataclasses.replace(
        policy_from_learner(learner, state, run={"task": "hopper_jump"}), env=henv
    )
    rep = native.transfer(pol, native.TransferConfig(runs=1, seconds=0.2, training_sim=False))
    (r,) = rep["native"]["runs"]
    assert r["fell"] and r["steps"] == 1 and math.isclose(r["fall_time"], 0.02)


class _LatencyOnly:
    """A randomizer with the nominal model, one control step of latency and no pushes."""

    notes = ()

    def __init__(self, env):
        self.init_env = env

    def model(self, m, rng):
        return m

    def episode(self, rng, steps, control_dt):
        return 1, {}


def _delayed_return(env, m, pol, key, steps, delay_command=True, observe_sent=False):
    """Return of one nominal native run with one step of latency applied to the command
    (``delay_command``) or to the action (re-timed to the current state); the observed state's
    ctrl is the last command sent (``observe_sent``) or the one the servos just applied."""
    bridge = native.NativeBridge(env, m)
    d = native.data_from_mjx(m, env.initial_data(key))
    prev = seen = bridge.to_mjx(d)
    a_prev, c_prev, ret = None, d.ctrl.copy(), 0.0
    for _ in range(steps):
        a = np.asarray(pol.fn(np.asarray(bridge._observe(seen))[None]))[0]
        c = bridge.ctrl(a, d)
        applied = a if a_prev is None else a_prev
        if delay_command:
            d.ctrl[:] = c_prev
        else:
            d.ctrl[:] = bridge.ctrl(applied, d)
        a_prev, c_prev = a, c
        for _ in range(env.sim.substeps):
            mujoco.mj_step(m, d)
        cur = bridge.to_mjx(d)
        ret += bridge.reward(prev, applied, cur)
        prev = cur
        seen = cur.replace(ctrl=jnp.asarray(c, cur.ctrl.dtype)) if observe_sent else cur
    return ret


def test_latency_delays_the_command_not_the_action(hopper_run):
    """With one step of latency the servos receive the previous step's ctrl (the command as
    sent, its time-dependent part included; the first step the initial ctrl), not the
    previous action turned into a command at the current time."""
    from bcg.transfer.runs import run_key, run_native

    _, env, learner, state = hopper_run
    cenv = ClockedHopper(sim=env.sim)
    pol = dataclasses.replace(
        policy_from_learner(learner, state, run={"task": "hopper_jump"}), env=cenv
    )
    cfg = native.TransferConfig(runs=1, seconds=0.2, training_sim=False, seed=2)
    m, _ = native.native_model(cenv, "hopper_jump")
    (run,), _, _ = run_native(pol, cfg, m, randomizer=_LatencyOnly(cenv))
    assert run["latency_steps"] == 1 and not run["fell"]
    key = run_key(cfg.seed, 0)
    want = _delayed_return(cenv, m, pol, key, run["steps"], delay_command=True)
    other = _delayed_return(cenv, m, pol, key, run["steps"], delay_command=False)
    assert math.isclose(run["return"], want, rel_tol=1e-9, abs_tol=1e-9)
    assert not math.isclose(run["return"], other, rel_tol=1e-4)  # the test can tell them apart


def test_a_delayed_run_observes_the_command_in_flight(hopper_run):
    """With one step of latency, the state a native run observes holds the last command sent
    (still in flight, as MJX training's hold keeps it in ``data.ctrl``), not the one the
    servos just applied."""
    from bcg.transfer.runs import run_key, run_native

    _, env, learner, state = hopper_run
    cenv = CommandSeeingHopper(sim=env.sim)
    nu = env.sim.nu

    def fn(obs):  # a policy that acts on the observed command
        return jnp.tanh(2.0 * obs[:, -nu:] + 0.5 * obs[:, :nu] + 0.2)

    pol = dataclasses.replace(
        policy_from_learner(learner, state, run={"task": "hopper_jump"}), env=cenv, fn=fn
    )
    cfg = native.TransferConfig(runs=1, seconds=0.2, training_sim=False, seed=2)
    m, _ = native.native_model(cenv, "hopper_jump")
    (run,), _, _ = run_native(pol, cfg, m, randomizer=_LatencyOnly(cenv))
    assert run["latency_steps"] == 1 and not run["fell"]
    key = run_key(cfg.seed, 0)
    want = _delayed_return(cenv, m, pol, key, run["steps"], observe_sent=True)
    other = _delayed_return(cenv, m, pol, key, run["steps"], observe_sent=False)
    assert math.isclose(run["return"], want, rel_tol=1e-6)
    assert not math.isclose(run["return"], other, rel_tol=1e-4)  # the test can tell them apart


def test_a_native_blow_up_counts_as_diverged_and_fallen(hopper_run):
    """MuJoCo resets the data when its state blows up (bad qpos / qvel / qacc) and only warns:
    the run must stop there as diverged and fallen, not go on from the reset state."""
    from bcg.transfer.measures import native_unstable
    from bcg.transfer.runs import run_native

    _, env, learner, state = hopper_run
    pol = policy_from_learner(learner, state, run={"task": "hopper_jump"})
    cfg = native.TransferConfig(runs=2, seconds=0.2, training_sim=False, seed=1)
    m, _ = native.native_model(env, "hopper_jump")

    def blow_up(i, t, mi, d):
        assert not native_unstable(d)
        if i == 0 and t == 2:
            d.qvel[:] = 1e11  # beyond mjMAXVAL: the next mj_step resets the data

    runs, _, _ = run_native(pol, cfg, m, on_step=blow_up)
    assert runs[0]["diverged"] and runs[0]["fell"] and runs[0]["steps"] == 4
    assert math.isnan(runs[0]["clearance_cm"]) and math.isnan(runs[0]["airborne_s"])
    assert not runs[1]["diverged"] and runs[1]["steps"] > 4


def test_root_speed_bound_flags_unflagged_blow_ups():
    """A free root faster than the bound is a blow-up even when MuJoCo's own checks pass;
    without a root dof or a bound only MuJoCo's checks count."""
    from bcg.transfer.measures import native_unstable

    m = mujoco.MjModel.from_xml_string(PDBOT_XML)
    d = mujoco.MjData(m)
    d.qvel[0:3] = [6.0, 0.0, 7.0]  # 9.2 m/s
    assert not native_unstable(d, 0, 10.0)
    d.qvel[2] = 9.0  # 10.8 m/s
    assert native_unstable(d, 0, 10.0)
    assert not native_unstable(d, 0, None) and not native_unstable(d)
    d.qvel[:] = 0.0
    d.qvel[3:6] = 50.0  # a fast spin is not a root speed
    assert not native_unstable(d, 0, 10.0)


def test_a_root_flung_faster_than_the_bound_stops_the_run():
    """``run_native`` stops a run whose free root exceeds ``cfg.max_root_speed`` as diverged
    and fallen with NaN flight measures; ``max_root_speed=None`` lets the same run go on."""
    from bcg.transfer.runs import run_native

    env = pdbot_env()
    m, _ = native.native_model(env, None)
    zero = jax.jit(lambda obs: jnp.zeros((obs.shape[0], env.action_size)))
    pol = LoadedPolicy(zero, env, {}, Path("."), None, None, "none")

    def fling(i, t, mi, d):
        if i == 0 and t == 2:
            d.qvel[2] = 30.0  # upwards: nothing stops it within a control step

    for bound, stopped in ((10.0, True), (None, False)):
        cfg = native.TransferConfig(
            runs=2, seconds=0.2, training_sim=False, randomize=False, max_root_speed=bound
        )
        runs, _, _ = run_native(pol, cfg, m, on_step=fling)
        assert runs[0]["diverged"] is stopped
        if stopped:
            assert runs[0]["fell"] and runs[0]["steps"] == 4
            assert math.isnan(runs[0]["clearance_cm"])
        else:
            assert runs[0]["steps"] == 10 and runs[0]["clearance_cm"] > 5.0
        assert not runs[1]["diverged"] and runs[1]["steps"] == 10


def _double_first_servo(dt, window=(2, 5)):
    """A gain schedule: actuator 0 twice as stiff (kd x sqrt 2) in control steps [a, b)."""

    def at(time):
        k = round(time / dt)
        f = np.ones(4)
        f[0] = 2.0 if window[0] <= k < window[1] else 1.0
        return f, np.sqrt(f)

    return at


def test_native_runs_follow_the_gain_schedule():
    """``run_native`` steps every control step with the gains ``sim.servo_scale_at`` gives for
    its start time, on top of the run's own (randomised) gains, without compounding them."""
    from bcg.transfer.runs import run_native

    env = pdbot_env()
    env = dataclasses.replace(
        env, sim=dataclasses.replace(env.sim, servo_scale_at=_double_first_servo(0.02))
    )
    m, _ = native.native_model(env, None)
    zero = jax.jit(lambda obs: jnp.zeros((obs.shape[0], env.action_size)))
    pol = LoadedPolicy(zero, env, {}, Path("."), None, None, "none")
    kp = m.actuator_gainprm[:, 0].copy()
    # without randomisation every run steps the nominal model itself; run 0 ends inside the
    # window, so its scaled gains must not become run 1's own
    seen = []
    cfg = native.TransferConfig(runs=2, seconds=0.08, training_sim=False, randomize=False)
    run_native(
        pol, cfg, m, on_step=lambda i, t, mi, d: seen.append((i, t, mi.actuator_gainprm.copy()))
    )
    assert len(seen) == 8
    for i, t, g in seen:
        want = kp * np.where(np.arange(4) == 0, 2.0 if 2 <= t < 5 else 1.0, 1.0)
        np.testing.assert_allclose(g[:, 0], want, err_msg=f"run {i}, control step {t}")
    np.testing.assert_allclose(m.actuator_gainprm[:, 0], kp)


def test_on_step_sees_every_control_step(hopper_run):
    """``run_native(on_step=...)`` is called once per control step of every run, with the run
    index, the step and the state after that step's physics."""
    from bcg.transfer.runs import run_native

    _, env, learner, state = hopper_run
    pol = policy_from_learner(learner, state, run={"task": "hopper_jump"})
    cfg = native.TransferConfig(runs=2, seconds=0.1, training_sim=False, seed=1)
    m, _ = native.native_model(env, "hopper_jump")
    seen = []
    runs, _, _ = run_native(pol, cfg, m, on_step=lambda i, t, mi, d: seen.append((i, t, d.time)))
    for i, run in enumerate(runs):
        mine = [(t, time) for j, t, time in seen if j == i]
        assert [t for t, _ in mine] == list(range(run["steps"]))
        np.testing.assert_allclose(
            [time for _, time in mine], env.sim.control_dt * np.arange(1, run["steps"] + 1)
        )
