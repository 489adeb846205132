"""G1 model: structure, gains, contact filtering, MJX loadability, standing (native MuJoCo)."""

import mujoco
import numpy as np
import pytest

from bcg.envs.g1 import model as gm
from bcg.sim.contact import ContactStiffness


@pytest.fixture(scope="module")
def m():
    return gm.mj_model()


def test_structure(m):
    assert (m.nq, m.nv, m.nu) == (36, 35, 29)
    assert m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert [m.joint(i + 1).name for i in range(29)] == list(gm.JOINT_NAMES)
    assert [m.actuator(i).name for i in range(29)] == list(gm.JOINT_NAMES)
    assert list(gm.joint_qpos_indices(m)) == list(range(7, 36))
    # Playground / Menagerie G1 29-DoF mass (the paper's "33 kg humanoid")
    assert m.body_mass.sum() == pytest.approx(33.34, abs=0.01)
    assert m.opt.timestep == 0.005
    assert m.nmesh == 0  # no mesh file needed


def test_only_foot_spheres_touch_the_floor(m):
    feet = set(gm.foot_geom_ids(m).tolist())
    floor = m.geom("floor").id
    assert len(feet) == 8
    for i in feet:
        assert m.geom_type[i] == mujoco.mjtGeom.mjGEOM_SPHERE
        assert m.geom_bodyid[i] in (
            m.body("left_ankle_roll_link").id,
            m.body("right_ankle_roll_link").id,
        )
    # MuJoCo's filter: pair collides iff (ct1 & ca2) or (ct2 & ca1); no explicit pairs
    assert m.npair == 0 and m.nexclude == 0
    ct, ca = m.geom_contype, m.geom_conaffinity
    for i in range(m.ngeom):
        for j in range(i + 1, m.ngeom):
            can = bool((ct[i] & ca[j]) or (ct[j] & ca[i]))
            expected = (i == floor and j in feet) or (j == floor and i in feet)
            assert can == expected, (m.geom(i).name, m.geom(j).name)


def test_pd_gains_match_beyondmimic_table(m):
    # mjlab g1_constants: kp = armature (2 pi 10)^2, kd = 2 * 2 * armature * 2 pi 10
    expected = {
        "left_hip_pitch_joint": (40.18, 2.558),  # 7520-14
        "left_knee_joint": (99.10, 6.309),  # 7520-22
        "left_hip_roll_joint": (99.10, 6.309),
        "left_ankle_pitch_joint": (28.50, 1.814),  # 2 x 5020
        "waist_pitch_joint": (28.50, 1.814),
        "left_elbow_joint": (14.25, 0.907),  # 5020
        "left_wrist_yaw_joint": (16.78, 1.068),  # 4010
    }
    for name, (kp, kd) in expected.items():
        a = m.actuator(name).id
        assert m.actuator_gainprm[a, 0] == pytest.approx(kp, rel=2e-3)
        assert -m.actuator_biasprm[a, 1] == pytest.approx(kp, rel=2e-3)
        assert -m.actuator_biasprm[a, 2] == pytest.approx(kd, rel=2e-3)
    j = m.joint("left_knee_joint").id
    assert np.allclose(m.actuator_ctrlrange[m.actuator("left_knee_joint").id], m.jnt_range[j])


def test_kp_scale_stiffens_every_servo_at_the_same_damping_ratio(m):
    from bcg.envs.g1.tracking import g1_tracking

    stiff = gm.mj_model(kp_scale=2.5)
    np.testing.assert_allclose(stiff.actuator_gainprm[:, 0], 2.5 * m.actuator_gainprm[:, 0])
    np.testing.assert_allclose(stiff.actuator_biasprm[:, 1], 2.5 * m.actuator_biasprm[:, 1])
    np.testing.assert_allclose(stiff.actuator_biasprm[:, 2], 2.5**0.5 * m.actuator_biasprm[:, 2])
    env = g1_tracking("jump", config={"kp_scale": 2.5})  # --param 'env.config={...}'
    np.testing.assert_allclose(env.sim.mj_model.actuator_gainprm, stiff.actuator_gainprm)
    with pytest.raises(ValueError, match="kp_scal"):
        g1_tracking("jump", config={"kp_scal": 2.5})
    with pytest.raises(ValueError, match="kp_scale must be > 0"):
        gm.mj_model(kp_scale=0.0)


def test_leg_kp_scale_stiffens_only_the_leg_servos(m):
    from bcg.envs.g1.tracking import g1_tracking

    legs = np.array([any(p in n for p in ("hip", "knee", "ankle")) for n in gm.JOINT_NAMES])
    assert legs.sum() == 12
    env = g1_tracking("jump", config={"leg_kp_scale": 2.0})  # --param 'env.config={...}'
    mixed = env.sim.mj_model
    scale = np.where(legs, 2.0, 1.0)
    ids = [mixed.actuator(n).id for n in gm.JOINT_NAMES]
    np.testing.assert_allclose(mixed.actuator_gainprm[ids, 0], scale * m.actuator_gainprm[ids, 0])
    np.testing.assert_allclose(
        mixed.actuator_biasprm[ids, 2], scale**0.5 * m.actuator_biasprm[ids, 2]
    )
    with pytest.raises(ValueError, match="leg_kp_scale must be > 0"):
        gm.mj_model(leg_kp_scale=-1.0)


def test_leg_kp_window_stiffens_the_legs_only_inside_it(m):
    """``leg_kp_window=(a, b)``: MJX steps control steps [a, b) with the ``leg_kp_scale``
    model's gains and the others with the ``kp_scale`` model's; native runs get the same
    factors from ``sim.servo_scale_at``."""
    import jax
    import jax.numpy as jnp

    from bcg.sim.step import make_data

    cfg = gm.G1Config(leg_kp_scale=2.0, leg_kp_window=[55, 85])  # a JSON list from --param
    assert cfg.leg_kp_window == (55, 85)
    sim = gm.load_g1("stiff", config=cfg)
    stiff = gm.load_g1("stiff", config=gm.G1Config(leg_kp_scale=2.0)).mj_model
    np.testing.assert_allclose(sim.mj_model.actuator_gainprm, m.actuator_gainprm)
    model_for = jax.jit(sim.model_for)
    for frame, want in ((54, m), (55, stiff), (84, stiff), (85, m)):
        t = frame * sim.control_dt
        mx = model_for(make_data(sim).replace(time=jnp.asarray(t)))
        np.testing.assert_allclose(mx.actuator_gainprm, want.actuator_gainprm, rtol=1e-12)
        np.testing.assert_allclose(mx.actuator_biasprm, want.actuator_biasprm, rtol=1e-12)
        f_kp, f_kd = sim.servo_scale_at(t)  # the native side: numpy factors
        np.testing.assert_allclose(f_kp * m.actuator_gainprm[:, 0], want.actuator_gainprm[:, 0])
        np.testing.assert_allclose(f_kd * m.actuator_biasprm[:, 2], want.actuator_biasprm[:, 2])
    with pytest.raises(ValueError, match="needs leg_kp_scale"):
        gm.G1Config(leg_kp_window=(55, 85))
    with pytest.raises(ValueError, match="0 <= a < b"):
        gm.G1Config(leg_kp_scale=2.0, leg_kp_window=(85, 55))


def test_action_memory_act_follows_ctrl_within_a_physics_step(m):
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    d.ctrl[:] = d.act + 0.1
    mujoco.mj_step(m, d)
    assert np.allclose(d.act, d.ctrl, atol=0.1 * np.exp(-5) + 1e-9)


def test_load_g1_is_mjx_ready_and_timed():
    sim = gm.load_g1("stiff")
    assert sim.physics_dt == 0.005 and sim.substeps == 4
    assert sim.control_dt == pytest.approx(0.02)
    assert sim.stiffness.timeconst == pytest.approx(0.01)
    assert int(sim.mjx_model.opt.iterations) == 1
    assert int(sim.mj_model.opt.iterations) == 10
    soft = gm.load_g1(ContactStiffness(0.02, 1.0, "soft"))
    assert soft.mj_model.geom_solref[0, 0] == pytest.approx(0.02)


def test_crouch_keyframe_touches_floor(m):
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    assert gm.lowest_sphere_z(m, d) == pytest.approx(0.0, abs=1e-9)
    assert 0.70 < d.qpos[2] < 0.80  # Playground's knees_bent key has the pelvis at 0.755 m


def _stand(m, steps, controller):
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    feet = gm.foot_geom_ids(m)
    x0 = d.geom_xpos[feet, :2].copy()
    zmin, worst_pen = np.inf, 0.0
    for _ in range(steps):
        d.ctrl[:] = controller(d)
        mujoco.mj_step(m, d)
        zmin = min(zmin, d.qpos[2])
        worst_pen = max(worst_pen, -gm.lowest_sphere_z(m, d))
    slide = np.max(np.linalg.norm(d.geom_xpos[feet, :2] - x0, axis=1))
    return d, zmin, worst_pen, slide


def test_stands_in_crouch_for_two_seconds(m):
    target = m.key_ctrl[0].copy()
    d, zmin, pen, slide = _stand(m, 400, lambda d: gm.balance_ctrl(m, d, target))
    assert zmin > 0.72  # crouch pelvis height 0.757 m
    up = np.array([0, 0, 1.0])
    R = d.xmat[m.body("pelvis").id].reshape(3, 3)
    assert R[:, 2] @ up > np.cos(0.15)
    assert pen < 0.003  # stiff-ish default contact keeps penetration to mm
    assert slide < 0.01
    contacts = {int(d.contact[i].geom[1]) for i in range(d.ncon)}
    assert set(gm.foot_geom_ids(m).tolist()) <= contacts  # all 8 spheres on the floor


def test_fixed_target_pd_alone_tips_over(m):
    """Documents the measured fact in balance_ctrl's docstring: ankles too soft for m g h."""
    target = m.key_ctrl[0].copy()
    d, zmin, _, _ = _stand(m, 400, lambda d: target)
    assert zmin < 0.3
