"""Legged BCG: contact groups, limb-only offsets (never the floating base), clamps, the group
trigger's loads, new groups mid-bundle, and agreement with the analytic step where they must."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import bcg.sim as bs
from bcg import estimators as E
from bcg.envs.g1 import model as g1m
from bcg.envs.tasks import HOPPER_XML
from bcg.estimators import offsets
from bcg.estimators.bcg import BCG
from bcg.estimators.trigger import Trigger, group_bodies

# a 3D biped: free-floating torso, two legs (hip, knee; actuated), a sphere foot each
BIPED = """<mujoco><option timestep="0.005"/>
<worldbody><geom name="floor" type="plane" size="5 5 .1"/>
 <body name="torso" pos="0 0 0.65"><freejoint/>
  <geom type="box" size="0.1 0.15 0.05" mass="4"/>
  <body name="lthigh" pos="0 0.1 -0.05"><joint name="lhip" type="hinge" axis="0 1 0"/>
   <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.03" mass="1" contype="0" conaffinity="0"/>
   <body name="lshin" pos="0 0 -0.25"><joint name="lknee" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.02" mass="0.5" contype="0"
     conaffinity="0"/>
    <geom name="lfoot" type="sphere" pos="0 0 -0.25" size="0.05" mass="0.2"/></body></body>
  <body name="rthigh" pos="0 -0.1 -0.05"><joint name="rhip" type="hinge" axis="0 1 0"/>
   <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.03" mass="1" contype="0" conaffinity="0"/>
   <body name="rshin" pos="0 0 -0.25"><joint name="rknee" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.02" mass="0.5" contype="0"
     conaffinity="0"/>
    <geom name="rfoot" type="sphere" pos="0 0 -0.25" size="0.05" mass="0.2"/></body></body>
 </body></worldbody>
<actuator><position joint="lhip" kp="50"/><position joint="lknee" kp="50"/>
 <position joint="rhip" kp="50"/><position joint="rknee" kp="50"/></actuator></mujoco>"""

ARM = """<mujoco><worldbody><geom name="floor" type="plane" size="2 2 .1"/>
 <body name="upper" pos="0 0 1"><joint name="shoulder" type="hinge" axis="0 1 0"/>
  <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
  <body name="fore" pos="0.4 0 0"><joint name="elbow" type="hinge" axis="0 1 0"/>
   <geom name="tip" type="sphere" pos="0.4 0 0" size="0.04"/></body></body></worldbody>
 <actuator><motor joint="shoulder"/><motor joint="elbow"/></actuator></mujoco>"""

FLOATING = slice(0, 6)  # the biped's free joint dofs
LEFT, RIGHT = slice(6, 8), slice(8, 10)


def _names(m, ids):
    return [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(b)) for b in ids]


def _dofs(m, cols):
    return [
        mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
        for j in range(m.njnt)
        if cols[int(m.jnt_dofadr[j])]
    ]


def test_groups_and_limbs_on_g1_hopper_and_arm():
    g1 = g1m.mj_model()
    assert _names(g1, group_bodies(g1)) == ["left_ankle_roll_link", "right_ankle_roll_link"]
    for side, cols in zip(("left", "right"), offsets.limb_columns(g1), strict=True):
        assert len(_dofs(g1, cols)) == 6 and all(n.startswith(side) for n in _dofs(g1, cols))
        assert not cols[:6].any()  # never the floating base
    hop = mujoco.MjModel.from_xml_string(HOPPER_XML)
    assert _names(hop, group_bodies(hop)) == ["torso", "thigh", "shin"]
    cols = offsets.limb_columns(hop)
    assert _dofs(hop, cols[2]) == ["hip", "knee"]
    # the torso is the unactuated root: no limb, so its group perturbs its whole chain
    assert _dofs(hop, cols[0]) == ["rootx", "rootz", "rooty", "hip", "knee"]
    arm = mujoco.MjModel.from_xml_string(ARM)
    assert _names(arm, group_bodies(arm)) == ["upper", "fore"]
    assert [_dofs(arm, c) for c in offsets.limb_columns(arm)] == [
        ["shoulder"],
        ["shoulder", "elbow"],
    ]


@pytest.fixture(scope="module")
def biped():
    return bs.load(BIPED, stiffness="stiff", name="biped")


def _standing(sim, lift_right=0.0, vz=0.0):
    """Legs straight, feet 1 mm into the floor; ``lift_right`` = a bends the right leg (hip a,
    knee -2a), raising its foot."""
    d = bs.make_data(sim)
    q = np.array(sim.mj_model.qpos0)
    q[2] = 0.599  # torso - thigh (0.05) - shin (0.25 + 0.25) - foot radius (0.05) = -1 mm
    q[9], q[10] = lift_right, -2.0 * lift_right
    return d.replace(qpos=jnp.asarray(q), qvel=jnp.zeros(sim.nv).at[2].set(vz))


@pytest.fixture(scope="module")
def stepped(biped):
    """The biped after one control step, both feet on the floor, and its per-substep forces."""
    f = jax.jit(lambda d: bs.control_step(biped, d, jnp.zeros(4), per_substep=True))
    return f(_standing(biped, vz=-0.3))


def test_group_jacobian_matches_native_finite_differences(biped, stepped):
    """The group-centre Jacobian, restricted to the limb, equals central differences of the same
    body-fixed point under native MuJoCo kinematics (columns outside the limb are zero)."""
    from mujoco import mjx

    d = jax.jit(lambda d: mjx.forward(biped.mjx_model, d))(stepped[0])  # kinematics at d.qpos
    J = np.asarray(jax.jit(lambda d: offsets.group_jacobians(biped, d))(d))  # (3, 3, nv)
    m = biped.mj_model
    assert _names(m, group_bodies(m)) == ["torso", "lshin", "rshin"]
    md = mujoco.MjData(m)
    md.qpos[:] = np.asarray(d.qpos)
    mujoco.mj_kinematics(m, md)
    pos = np.asarray(d._impl.contact.pos)
    geom = np.asarray(d._impl.contact.geom)
    for g, b in enumerate(group_bodies(m)):
        if g == 0:
            continue  # the torso does not touch the floor: no contact slot centre
        mine = np.any(m.geom_bodyid[geom] == b, axis=1)
        centre = pos[mine].mean(0)
        local = md.xmat[b].reshape(3, 3).T @ (centre - md.xpos[b])
        fd = np.zeros((3, m.nv))
        for k in range(m.nv):
            pts = []
            for s in (1e-6, -1e-6):
                q = np.array(md.qpos)
                dq = np.zeros(m.nv)
                dq[k] = s
                mujoco.mj_integratePos(m, q, dq, 1.0)
                dd = mujoco.MjData(m)
                dd.qpos[:] = q
                mujoco.mj_kinematics(m, dd)
                pts.append(dd.xpos[b] + dd.xmat[b].reshape(3, 3) @ local)
            fd[:, k] = (pts[0] - pts[1]) / 2e-6
        fd[:, offsets.limb_columns(m)[g] == 0] = 0.0
        np.testing.assert_allclose(J[g], fd, atol=1e-6)
    assert np.all(J[1:, :, FLOATING] == 0) and np.all(J[1][:, RIGHT] == 0)


KW = dict(num_branches=64, damping=1e-4, antithetic=False)


def test_limb_offsets_never_move_the_base_or_cold_limbs(biped, stepped):
    d, _ = stepped
    fn = jax.jit(
        lambda d, g: offsets.limb_offsets(
            biped,
            d,
            g,
            jax.random.PRNGKey(0),
            sigma_p=0.01,
            sigma_v=0.02,
            max_dq=0.1,
            max_dqd=0.5,
            **KW,
        )
    )
    both = fn(d, jnp.array([False, True, True]))
    assert np.all(np.asarray(both.dq)[:, FLOATING] == 0)
    assert np.all(np.asarray(both.dqd)[:, FLOATING] == 0)
    assert np.std(np.asarray(both.dq)[:, LEFT]) > 1e-3
    assert np.std(np.asarray(both.dq)[:, RIGHT]) > 1e-3
    left = fn(d, jnp.array([False, True, False]))
    assert np.all(np.asarray(left.dq)[:, RIGHT] == 0) and np.all(
        np.asarray(left.dqd)[:, RIGHT] == 0
    )
    assert np.std(np.asarray(left.dq)[:, LEFT]) > 1e-3
    # whole-chain offsets (the paper's text) do move the base
    chain = jax.jit(
        lambda d: offsets.chain_offsets(
            biped,
            d,
            jnp.ones(d._impl.contact.pos.shape[0], bool),
            jax.random.PRNGKey(0),
            sigma_p=0.01,
            sigma_v=0.02,
            max_dq=None,
            max_dqd=None,
            **KW,
        )
    )(d)
    assert np.std(np.asarray(chain.dq)[:, FLOATING]) > 1e-4


def _bent(biped, d):
    """``d`` with the knees bent and the feet still 1 mm into the floor (a foot can then move
    along z), kinematics and contacts recomputed."""
    from mujoco import mjx

    q = np.array(d.qpos)
    q[:7] = [0, 0, 0.559, 1, 0, 0, 0]  # 0.05 + 2 x 0.25 cos 0.4 + 0.05 - 0.001
    q[7:11] = [0.4, -0.8, 0.4, -0.8]
    return jax.jit(lambda d: mjx.forward(biped.mjx_model, d))(d.replace(qpos=jnp.asarray(q)))


def test_normal_scale_scales_only_the_normal_offset(biped, stepped):
    """normal_scale s: the position noise of a hot foot keeps its tangential components and
    has s times its component along the foot's contact normal (the floor's z); the foot centre
    then moves (J dq) in the tangent plane only at s = 0, and along z at s = 1."""
    d, _ = stepped
    feet = jnp.array([False, True, True])

    def offs_at(d, scale):
        return jax.jit(
            lambda d: offsets.limb_offsets(
                biped,
                d,
                feet,
                jax.random.PRNGKey(3),
                sigma_p=0.01,
                sigma_v=0.02,
                max_dq=None,
                max_dqd=None,
                normal_scale=scale,
                **KW,
            )
        )(d)

    def offs(scale):
        return offs_at(d, scale)

    n = np.asarray(jax.jit(lambda d: offsets.group_normals(biped, d))(d))
    np.testing.assert_allclose(np.abs(n[1:]), [[0, 0, 1], [0, 0, 1]], atol=1e-9)
    iso, half, flat = offs(1.0), offs(0.5), offs(0.0)
    dp1, dph, dp0 = (np.asarray(o.dp).reshape(64, 3, 3) for o in (iso, half, flat))
    np.testing.assert_allclose(dp0[..., :2], dp1[..., :2], rtol=1e-12)  # tangential kept
    np.testing.assert_allclose(dph[..., 2], 0.5 * dp1[..., 2], rtol=1e-12)
    assert np.all(dp0[:, 1:, 2] == 0) and np.std(dp1[:, 1:, 2]) > 5e-3
    bent = _bent(biped, d)
    J = np.asarray(jax.jit(lambda d: offsets.group_jacobians(biped, d))(bent))
    for g, cols in ((1, LEFT), (2, RIGHT)):
        assert np.linalg.matrix_rank(J[g][[0, 2]][:, cols]) == 2
    flat, iso = offs_at(bent, 0.0), offs_at(bent, 1.0)
    for g in (1, 2):
        move0 = np.asarray(flat.dq) @ J[g].T  # (B, 3) foot-centre displacement
        move1 = np.asarray(iso.dq) @ J[g].T
        # up to the damped pseudo-inverse's cross-talk (lambda 1e-4 on a bent leg)
        assert np.max(np.abs(move0[:, 2])) < 0.1 * np.max(np.abs(move0[:, 0]))
        assert np.std(move1[:, 2]) > 5e-3


def test_damping_realises_each_direction_at_its_damped_gain(biped, stepped):
    """Unclamped, the realised foot-centre offset J dq along each left singular vector u_k of
    the limb Jacobian (singular value s_k) is s_k^2 / (s_k^2 + lambda) times the requested
    u_k^T dp (the damped pseudo-inverse; bcg.BCG's ``damping`` docstring)."""
    d = _bent(biped, stepped[0])
    J = np.asarray(jax.jit(lambda d: offsets.group_jacobians(biped, d))(d))[1]  # left foot
    feet = jnp.array([False, True, False])
    U, sv, _ = np.linalg.svd(J)
    # a planar leg: two nonzero singular values far apart (0.43 and 0.09), so the gains differ
    assert 0.05 < sv[1] < 0.5 * sv[0] and sv[2] < 1e-9
    for lam in (1e-4, 0.1):
        o = jax.jit(
            lambda d, lam=lam: offsets.limb_offsets(
                biped,
                d,
                feet,
                jax.random.PRNGKey(4),
                num_branches=64,
                sigma_p=0.01,
                sigma_v=0.02,
                damping=lam,
                antithetic=False,
                max_dq=None,
                max_dqd=None,
            )
        )(d)
        requested = np.asarray(o.dp).reshape(64, 3, 3)[:, 1] @ U  # (B, 3) along u_k
        realised = np.asarray(o.dq) @ J.T @ U
        np.testing.assert_allclose(realised, requested * sv**2 / (sv**2 + lam), atol=1e-12)


def test_clamps_hold(biped, stepped):
    d, _ = stepped
    offs = jax.jit(
        lambda d: offsets.limb_offsets(
            biped,
            d,
            jnp.array([False, True, True]),
            jax.random.PRNGKey(1),
            sigma_p=1.0,
            sigma_v=5.0,
            max_dq=0.1,
            max_dqd=0.5,
            **KW,
        )
    )(d)
    dq, dqd = np.abs(np.asarray(offs.dq)), np.abs(np.asarray(offs.dqd))
    assert dq.max() <= 0.1 + 1e-15 and dqd.max() <= 0.5 + 1e-15
    assert np.mean(dq[:, 6:] == 0.1) > 0.3 and np.mean(dqd[:, 6:] == 0.5) > 0.3  # they bind


def test_group_mean_load_is_the_weight_at_rest(biped):
    """Standing at rest (settled in native MuJoCo), the feet's mean loads over a control step
    add up to the robot's weight, each foot carrying about half; the trigger fires between."""
    m = biped.mj_model
    md = mujoco.MjData(m)
    md.qpos[:] = np.asarray(_standing(biped).qpos)
    md.ctrl[:] = 0.0
    for _ in range(400):  # 2 s
        mujoco.mj_step(m, md)
    d = bs.make_data(biped, qpos=md.qpos, qvel=md.qvel)
    out, forces = jax.jit(lambda d: bs.control_step(biped, d, jnp.zeros(4), per_substep=True))(d)
    weight = biped.total_weight()
    rule = Trigger(tau=0.0, mode="group-mean")
    groups, _ = rule.loads(biped, out, forces)
    assert float(groups[0]) == 0.0  # the torso
    assert float(jnp.sum(groups)) == pytest.approx(weight, rel=0.02)
    assert float(jnp.min(groups[1:])) > 0.3 * weight
    peak, _ = Trigger(mode="group-peak").loads(biped, out, forces)
    assert np.all(np.asarray(peak) >= np.asarray(groups) - 1e-9)
    assert np.asarray(Trigger(tau=0.2 * weight)(biped, out, forces).groups).tolist() == [
        False,
        True,
        True,
    ]
    assert not bool(Trigger(tau=0.8 * weight)(biped, out, forces).groups.any())
    # the load a trigger reports (the blend weight's L) is the hottest group's / contact's
    assert float(rule(biped, out, forces).load) == pytest.approx(float(jnp.max(groups)))
    contact = Trigger(tau=0.0, mode="contact")
    per_contact = contact.loads(biped, out, forces)[1]
    assert float(contact(biped, out, forces).load) == pytest.approx(float(jnp.max(per_contact)))
    assert not bool(
        Trigger(tau=0.2 * weight, stiff_timeconst=1e-4)(biped, out, forces).groups.any()
    )


def _grad_fn(sim, est, T=4):
    def loss(dv, d0, key):
        d = d0.replace(qvel=d0.qvel + dv)
        ctrl = jnp.tile(jnp.array([0.2, -0.4, 0.2, -0.4]), (T, d0.qpos.shape[0], 1))
        dT, st = E.rollout(sim, est, d, ctrl, key)
        return jnp.sum(dT.qpos[:, 2] + 0.1 * dT.qvel[:, 0] + dT.qpos[:, 7]), st

    return jax.jit(jax.value_and_grad(loss, has_aux=True))


@pytest.mark.slow  # three biped rollout compiles: ~400 s cold on the 2-core machine
def test_one_branch_at_zero_sigma_is_the_analytic_step(biped):
    """With B = 1 and sigma = 0 every bundle is the plain step: values and gradients of the limb
    (with new groups) and chain variants equal the analytic rollout's, while bundles run."""
    d1 = _standing(biped, vz=-0.5)
    d0 = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), d1, _standing(biped, 0.2, -0.5))
    dv = jnp.zeros_like(d0.qvel)
    key = jax.random.PRNGKey(0)
    (va, _), ga = _grad_fn(biped, E.make("analytic"))(dv, d0, key)
    zero = dict(num_branches=1, sigma_p=0.0, sigma_v=0.0, tau=0.0)
    for est in (BCG(**zero), BCG(**zero, perturb="chain", trigger="contact")):
        (vb, st), gb = _grad_fn(biped, est)(dv, d0, key)
        assert int(np.sum(st.bundled)) >= 4
        np.testing.assert_allclose(float(vb), float(va), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(gb), np.asarray(ga), rtol=1e-6, atol=1e-8)


def test_a_group_that_lands_mid_bundle_is_perturbed(biped):
    """The right foot, raised (native MuJoCo: it lands at the 9th physics step, in the third
    control step), touches down during a bundle started by the left foot: with ``new_groups``
    the branches mark it as perturbed and their right-leg states spread more than without."""
    d = jax.tree_util.tree_map(lambda x: x[None], _standing(biped, 0.18))
    ctrl = jnp.zeros((1, 4))
    out = {}
    for flag in (True, False):
        est = BCG(
            num_branches=8,
            horizon=4,
            tau=0.05 * biped.total_weight(),
            new_groups=flag,
            antithetic=False,  # the draws this test's landing count was set with
            forward="mean",
        )

        step = jax.jit(lambda c, k, est=est: est.step(biped, c, ctrl, k))  # compiled once
        c = est.init(biped, d)
        trig = []
        for k in range(3):
            c, s = step(c, jax.random.PRNGKey(k))
            trig.append(int(s.triggered))
            if k == 0:
                start = c.perturbed
        out[flag] = (c, start, trig)
    c_on, start, trig = out[True]
    assert trig == [1, 0, 0]  # one bundle, started by the left foot
    assert np.asarray(start)[0, :, 1].all() and not np.asarray(start)[0, :, 2].any()
    assert np.mean(np.asarray(c_on.perturbed)[0, :, 2]) >= 0.5  # the right foot landed
    assert not np.asarray(out[False][0].perturbed)[0, :, 2].any()

    def spread(c):  # right hip and knee positions across branches
        return np.std(np.asarray(c.branches.qpos)[0, :, 9:11], axis=0)

    assert np.all(spread(c_on) > 2 * spread(out[False][0]) + 1e-6)
