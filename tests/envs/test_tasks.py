"""Tests of the built-in contact tasks (bcg.envs.tasks).

MJX rollouts are jitted once per task: the jitted rollout takes the ``mjx.Model`` as an argument,
so the 'stiff' and 'soft' models (same shapes, different solref) share one compilation.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import bcg.sim as bs
from bcg.diagnostics.objective import default_objective
from bcg.envs import TASKS, Task, get, list_tasks
from bcg.sim.contact import ContactStiffness, resolve_stiffness

NAMES = ["falling_mass", "bouncing_ball", "ball_wall", "hopper", "pogo"]
STIFFNESS = ["stiff", "soft"]
PRIMITIVES = {
    int(mujoco.mjtGeom.mjGEOM_PLANE),
    int(mujoco.mjtGeom.mjGEOM_SPHERE),
    int(mujoco.mjtGeom.mjGEOM_CAPSULE),
    int(mujoco.mjtGeom.mjGEOM_BOX),
}
TOTAL_MASS = {
    "falling_mass": 1.0,
    "bouncing_ball": 1.0,
    "ball_wall": 1.0,
    "hopper": 4.0,
    "pogo": 2.3,
}
OBJECTIVE_BODY = {
    "falling_mass": "mass",
    "bouncing_ball": "ball",
    "ball_wall": "ball",
    "hopper": "torso",
    "pogo": "body",
}
# control step of the first contact at the nominal (keyframe) state, native MuJoCo
# J(x_0) = h + 0.1 s * v_z at the keyframe
INITIAL_OBJECTIVE = {
    "falling_mass": 0.5,
    "bouncing_ball": 0.2,
    "ball_wall": 0.8,
    "hopper": 0.79,
    "pogo": 0.29,
}
FIRST_CONTACT = {"falling_mass": 14, "bouncing_ball": 6, "ball_wall": 10, "hopper": 5, "pogo": 0}
# MJX (bcg.sim default: one Newton iteration per physics step) vs native MuJoCo (full solver):
# largest deviation (m) of the objective body's height over the nominal rollout. Measured:
# 0 for falling_mass and stiff bouncing_ball, < 1 cm for soft bouncing_ball, ball_wall and hopper.
MJX_TOL = {
    "falling_mass": 0.01,
    "bouncing_ball": 0.02,
    "ball_wall": 0.03,
    "hopper": 0.03,
    "pogo": 0.03,
}


# ----------------------------------------------------------------------------------- helpers


@functools.cache
def _sim(name: str, stiffness: str) -> bs.Sim:
    return get(name).load(stiffness)


def native_rollout(sim: bs.Sim, qpos, qvel, ctrl):
    """Native MuJoCo rollout: qpos (T, nq), qvel (T, nv), per-control-step largest normal
    force (T,), and the set of geom-name pairs that touched with positive normal force."""
    m = sim.mj_model
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    d.qvel[:] = qvel
    f6 = np.zeros(6)
    qs, vs, fmax, pairs = [], [], [], set()
    for t in range(ctrl.shape[0]):
        d.ctrl[:] = ctrl[t]
        fm = 0.0
        for _ in range(sim.substeps):
            mujoco.mj_step(m, d)
            for i in range(d.ncon):
                mujoco.mj_contactForce(m, d, i, f6)
                if f6[0] > 0:
                    fm = max(fm, float(f6[0]))
                    g = d.contact[i].geom
                    pairs.add(
                        frozenset(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, k) for k in g)
                    )
        qs.append(d.qpos.copy())
        vs.append(d.qvel.copy())
        fmax.append(fm)
    return np.array(qs), np.array(vs), np.array(fmax), pairs


@functools.cache
def _mjx_rollout_fn(name: str):
    """One jitted MJX rollout per task: (mjx_model, qpos, qvel, ctrl) -> (qpos, qvel, fmax)."""
    base = _sim(name, "stiff")

    @jax.jit
    def roll(mx, qpos, qvel, ctrl):
        sim = dataclasses.replace(base, mjx_model=mx)
        d0 = bs.make_data(sim, qpos, qvel)

        def body(d, u):
            d, f = bs.control_step(sim, d, u)
            return d, (d.qpos, d.qvel, jnp.max(f, initial=0.0))

        return jax.lax.scan(body, d0, ctrl)[1]

    return roll


def mjx_rollout(sim: bs.Sim, qpos, qvel, ctrl):
    out = _mjx_rollout_fn(sim.name)(sim.mjx_model, qpos, qvel, jnp.asarray(ctrl))
    return tuple(np.asarray(a) for a in out)


# ---------------------------------------------------------------------------------- registry


def test_registry_lists_the_builtin_tasks():
    assert list_tasks() == NAMES
    assert list(TASKS) == NAMES
    for name in NAMES:
        task = get(name)
        assert isinstance(task, Task)
        assert task.name == name
        assert task.description
        assert task.timestep == 0.005
        assert task.substeps == 4
        assert task.horizon > 0
        assert task.qpos_noise > 0 and task.qvel_noise > 0


def test_unknown_task_raises_with_valid_names():
    with pytest.raises(ValueError) as e:
        get("nope")
    msg = str(e.value)
    assert "nope" in msg
    for name in NAMES:
        assert name in msg


@pytest.mark.parametrize("name", NAMES)
def test_mjcf_is_small_self_contained_and_mjx_friendly(name):
    task = get(name)
    m = mujoco.MjModel.from_xml_string(task.xml)  # no files, no assets
    assert m.opt.timestep == 0.005
    assert m.nmesh == 0 and m.nhfield == 0
    assert set(int(t) for t in m.geom_type) <= PRIMITIVES
    assert np.all(np.isin(m.geom_condim, (1, 3)))  # frictionless (pogo) or 3-D friction
    assert mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "init") >= 0
    # every body that carries a geom has a sensible, explicit mass
    for b in range(1, m.nbody):
        assert m.body_mass[b] > 0.1, mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)
    assert np.sum(m.body_mass) == pytest.approx(TOTAL_MASS[name])


@pytest.mark.parametrize("stiffness", STIFFNESS)
@pytest.mark.parametrize("name", NAMES)
def test_load(name, stiffness):
    task = get(name)
    sim = task.load(stiffness)
    assert sim.name == name
    assert sim.substeps == task.substeps
    assert sim.physics_dt == task.timestep
    assert sim.control_dt == pytest.approx(0.02)
    tc = 2 * task.timestep if stiffness == "stiff" else 0.02
    np.testing.assert_allclose(sim.mj_model.geom_solref[:, 0], tc)
    np.testing.assert_allclose(sim.mj_model.geom_solref[:, 1], task.dampratio)
    assert sim.stiffness.dampratio == task.dampratio
    assert sim.mjx_model.geom_solref.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(sim.mjx_model.geom_solref), sim.mj_model.geom_solref)


def test_dampratio_plumbing_is_backward_compatible():
    # defaults unchanged
    assert resolve_stiffness("stiff", 0.005) == ContactStiffness(0.01, 1.0, "stiff")
    assert resolve_stiffness("soft", 0.005).dampratio == 1.0
    assert resolve_stiffness(0.03, 0.005).dampratio == 1.0
    # new optional argument
    assert resolve_stiffness("stiff", 0.005, 0.3).dampratio == 0.3
    assert resolve_stiffness(0.03, 0.005, dampratio=0.3) == ContactStiffness(0.03, 0.3, "tc=0.03")
    own = ContactStiffness(0.02, 0.7, "own")
    assert resolve_stiffness(own, 0.005, 0.3) is own
    with pytest.raises(ValueError, match="dampratio"):
        resolve_stiffness("stiff", 0.005, 0.0)

    ball = get("bouncing_ball")
    sim = bs.load(ball.xml, stiffness="stiff")  # bcg.sim.load default: critically damped
    np.testing.assert_allclose(sim.mj_model.geom_solref[:, 1], 1.0)
    sim = bs.load(ball.xml, stiffness="stiff", dampratio=0.3)
    np.testing.assert_allclose(sim.mj_model.geom_solref[:, 1], 0.3)
    sim = ball.load("stiff", dampratio=0.7)  # Task.load passes overrides through
    np.testing.assert_allclose(sim.mj_model.geom_solref[:, 1], 0.7)
    sim = ball.load("model")  # the MJCF's own solref
    np.testing.assert_allclose(sim.mj_model.geom_solref, [[0.01, 0.5]] * sim.mj_model.ngeom)


# ---------------------------------------------------------------- initial states and controls


@pytest.mark.parametrize("name", NAMES)
def test_initial_states(name):
    task = get(name)
    sim = _sim(name, "stiff")
    m = sim.mj_model
    q0, v0 = task.keyframe_state(sim)
    k = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "init")
    np.testing.assert_array_equal(q0, m.key_qpos[k])
    np.testing.assert_array_equal(v0, m.key_qvel[k])

    qpos, qvel = task.initial_states(sim, 7, seed=3)
    assert qpos.shape == (7, m.nq) and qvel.shape == (7, m.nv)
    assert qpos.dtype == np.float64 and qvel.dtype == np.float64
    q2, v2 = task.initial_states(sim, 7, seed=3)
    np.testing.assert_array_equal(qpos, q2)
    np.testing.assert_array_equal(qvel, v2)
    q3, _ = task.initial_states(sim, 7, seed=4)
    assert not np.allclose(qpos, q3)
    e0, f0 = task.initial_states(sim, 0, seed=0)
    assert e0.shape == (0, m.nq) and f0.shape == (0, m.nv)

    qpos, qvel = task.initial_states(sim, 4000, seed=0)
    quat = np.zeros(m.nq, bool)
    for j in range(m.njnt):
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            quat[m.jnt_qposadr[j] + 3 : m.jnt_qposadr[j] + 7] = True
    np.testing.assert_array_equal(qpos[:, quat], np.broadcast_to(q0[quat], (4000, quat.sum())))
    np.testing.assert_allclose(np.std(qpos[:, ~quat], axis=0), task.qpos_noise, rtol=0.1)
    np.testing.assert_allclose(np.mean(qpos, axis=0), q0, atol=5 * task.qpos_noise / 60)
    np.testing.assert_allclose(np.std(qvel, axis=0), task.qvel_noise, rtol=0.1)


@pytest.mark.parametrize("name", NAMES)
def test_nominal_controls(name):
    task = get(name)
    sim = _sim(name, "stiff")
    u = task.nominal_controls(sim)
    assert u.shape == (task.horizon, sim.nu)
    assert np.all(np.isfinite(u))
    if sim.nu == 0:
        assert u.size == 0
    else:
        lo, hi = sim.mj_model.actuator_ctrlrange.T
        assert np.all(u >= lo) and np.all(u <= hi)
        assert np.any(u != 0)


@pytest.mark.parametrize("name", NAMES)
def test_default_objective(name):
    task = get(name)
    sim = _sim(name, "stiff")
    obj = default_objective(sim.mj_model)
    assert obj.body_name == OBJECTIVE_BODY[name]
    assert len(obj.vel_dofs) >= 1
    q0, v0 = task.keyframe_state(sim)
    d = mujoco.MjData(sim.mj_model)
    d.qpos[:] = q0
    mujoco.mj_kinematics(sim.mj_model, d)
    # the height coordinate is the body's absolute height (slide joints use ref)
    assert q0 @ obj.c_qpos == pytest.approx(d.xpos[obj.body, 2])
    assert obj.value(q0, v0) == pytest.approx(INITIAL_OBJECTIVE[name])
    qpos, qvel = task.initial_states(sim, 5, seed=0)
    assert obj.value(qpos, qvel).shape == (5,)


# ----------------------------------------------------------------------- native MuJoCo rollouts


@pytest.mark.parametrize("stiffness", STIFFNESS)
@pytest.mark.parametrize("name", NAMES)
def test_native_rollout_makes_contact(name, stiffness):
    task = get(name)
    sim = _sim(name, stiffness)
    q0, v0 = task.keyframe_state(sim)
    ctrl = task.nominal_controls(sim)
    qs, vs, fmax, pairs = native_rollout(sim, q0, v0, ctrl)
    assert np.all(np.isfinite(qs)) and np.all(np.isfinite(vs))
    assert fmax.max() > 0
    first = int(np.argmax(fmax > 0))
    assert abs(first - FIRST_CONTACT[name]) <= 1
    assert first < task.horizon // 2
    assert fmax.max() > 3 * sim.total_weight()  # an impact, not just resting contact
    z = qs @ default_objective(sim.mj_model).c_qpos

    if name == "falling_mass":  # lands and settles on the floor
        assert z[-1] == pytest.approx(0.1, abs=0.005)
        assert np.all(np.abs(vs[-10:]) < 0.05)
    elif name == "bouncing_ball":  # leaves the floor again, without gaining energy
        after = fmax[first:]
        assert np.any(after == 0)
        energy_height = q0[2] + v0[2] ** 2 / (2 * 9.81)
        assert z.max() <= energy_height
        assert z[first:].max() > 0.1 + 0.005  # a visible bounce
    elif name == "ball_wall":  # hits the wall first, then the floor
        assert frozenset({"ball", "wall"}) in pairs
        assert frozenset({"ball", "floor"}) in pairs
        assert qs[:, 0].max() < 0.52  # wall face at x = 0.6, ball radius 0.1, soft penetration
    elif name == "hopper":  # lands on the foot and is still up at the end
        assert frozenset({"foot", "floor"}) in pairs
        assert z.min() > 0.5
    elif name == "pogo":  # stands on its foot, then the open-loop thrust makes it hop
        assert frozenset({"foot", "floor"}) in pairs
        assert z.max() > 0.3 + 0.08
        assert np.any(fmax[1:] == 0)  # airborne at some step


@pytest.mark.parametrize("stiffness", STIFFNESS)
def test_hopper_native_stable_under_zero_and_random_controls(stiffness):
    task = get("hopper")
    sim = _sim("hopper", stiffness)
    q0, v0 = task.keyframe_state(sim)
    rng = np.random.default_rng(0)
    ctrls = [np.zeros((task.horizon, sim.nu))]
    ctrls += [rng.uniform(-1, 1, (task.horizon, sim.nu)) for _ in range(5)]
    for ctrl in ctrls:
        qs, vs, fmax, pairs = native_rollout(sim, q0, v0, ctrl)
        assert np.all(np.isfinite(qs)) and np.all(np.isfinite(vs))
        assert np.abs(vs).max() < 50
        assert qs[:, 1].min() > 0.0 and qs[:, 1].max() < 1.0
        assert fmax.max() > 0


# -------------------------------------------------------------------------------- MJX rollouts


@pytest.mark.parametrize("name", NAMES)
def test_mjx_rollout_finite_and_tracks_native(name):
    task = get(name)
    for stiffness in STIFFNESS:
        sim = _sim(name, stiffness)
        obj = default_objective(sim.mj_model)
        q0, v0 = task.keyframe_state(sim)
        ctrl = task.nominal_controls(sim)
        qs, vs, fs = mjx_rollout(sim, q0, v0, ctrl)
        assert qs.shape == (task.horizon, sim.nq)
        assert np.all(np.isfinite(qs)) and np.all(np.isfinite(vs)), stiffness
        assert fs.max() > 0
        nq, _, nf, _ = native_rollout(sim, q0, v0, ctrl)
        # free flight is identical up to the first contact
        first = int(np.argmax(nf > 0))
        np.testing.assert_allclose(qs[:first], nq[:first], atol=1e-9)
        err = np.abs(qs @ obj.c_qpos - nq @ obj.c_qpos).max()
        assert err < MJX_TOL[name], (stiffness, err)
        if name == "falling_mass":
            assert qs[-1, 0] == pytest.approx(nq[-1, 0], abs=0.01)
            assert qs[-1, 0] == pytest.approx(0.1, abs=0.005)

        if name == "hopper":  # zero and random controls (same compiled function)
            rng = np.random.default_rng(1)
            for u in [np.zeros_like(ctrl), rng.uniform(-1, 1, ctrl.shape)]:
                qs, vs, fs = mjx_rollout(sim, q0, v0, u)
                assert np.all(np.isfinite(qs)) and np.all(np.isfinite(vs)), stiffness
                assert np.abs(vs).max() < 50
                assert qs[:, 1].min() > 0.0 and qs[:, 1].max() < 1.0
