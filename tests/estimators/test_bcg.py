"""BCG rollout step: trigger, chain perturbation, mean state, compaction, validation."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg.sim as bs
from bcg import estimators as E
from bcg.estimators.bcg import BCG

# a 1 kg sphere on a vertical slide (qpos = height): the cheapest contact model to compile
BALL = """<mujoco><option timestep="0.005"/><worldbody><geom type="plane" size="50 50 .1"/>
<body><joint name="z" type="slide" axis="0 0 1"/><geom type="sphere" size=".1" mass="1"/></body>
</worldbody></mujoco>"""


@pytest.fixture(scope="module")
def sim():
    return bs.load(BALL, stiffness="stiff", name="ball")


def _batch(sim, z, vz):
    n = len(z)
    tmpl = bs.make_data(sim)
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tmpl)
    qpos = np.asarray(z, float).reshape(n, 1)
    qvel = np.asarray(vz, float).reshape(n, 1)
    return d.replace(qpos=jnp.asarray(qpos), qvel=jnp.asarray(qvel))


# the paper's aggregation: the bundle mean is the rollout's state, independent offsets
PAPER = dict(forward="mean", antithetic=False)

# envs 0-2 hit the floor in the first control steps, envs 3, 4 fly high above it
Z = [0.13, 0.15, 0.16, 3.0, 3.0]
VZ = [-1.5, -1.5, -1.5, 1.0, 1.0]
T = 6


def _grad_fn(sim, est):
    def loss(dv, d0, key):
        d = d0.replace(qvel=d0.qvel + dv)
        dT, st = E.rollout(sim, est, d, jnp.zeros((T, d0.qpos.shape[0], 0)), key)
        return jnp.sum(dT.qpos[:, 0] + 0.1 * dT.qvel[:, 0]), (dT.qpos, st)

    return jax.jit(jax.value_and_grad(loss, has_aux=True))


CONFIGS = {
    "analytic": E.make("analytic"),
    "naive": BCG(**PAPER),
    "compact": BCG(capacity=3, remat=True, **PAPER),  # bundle recomputed backward
    "four-slots": BCG(capacity=4, **PAPER),  # 40 branch states: up to 8 phases of 5
    "tight-stein": BCG(capacity=2, gradient="stein", antithetic=True, forward="mean"),
    "plain-forward": BCG(),  # the defaults: forward="plain", antithetic offsets
}


@pytest.fixture(scope="module")
def results(sim):
    """{label: rollout value, states, stats and gradient of ``CONFIGS[label]``}, each compiled
    once, when a test first asks for it (tests run with --full only compile theirs)."""
    d0 = _batch(sim, Z, VZ)
    dv = jnp.zeros_like(d0.qvel)
    key = jax.random.PRNGKey(3)

    class Lazy(dict):
        def __missing__(self, label):
            (v, (qpos, st)), g = _grad_fn(sim, CONFIGS[label])(dv, d0, key)
            self[label] = dict(value=float(v), qpos=np.asarray(qpos), stats=st, grad=np.asarray(g))
            return self[label]

    return Lazy()


def test_free_flight_envs_are_untouched(results):
    """Envs that never touch the floor never trigger: BCG equals analytic on them exactly."""
    a = results["analytic"]
    for r in (results["naive"], results["tight-stein"]):
        np.testing.assert_allclose(r["qpos"][3:], a["qpos"][3:], rtol=0, atol=1e-12)
        np.testing.assert_allclose(r["grad"][3:], a["grad"][3:], rtol=1e-12, atol=1e-12)


def test_contact_envs_trigger_and_bundle(results):
    st = results["naive"]["stats"]
    assert int(np.sum(st.triggered)) >= 3  # every hitting env starts a bundle
    assert int(np.sum(st.bundled)) >= 2 * int(np.sum(st.triggered)) - 3  # each lasts H = 2
    # the bundle changes the gradient of the hitting envs (the mean of branch sensitivities)
    assert not np.allclose(results["naive"]["grad"][:3], results["analytic"]["grad"][:3])
    assert np.all(np.isfinite(results["naive"]["grad"]))
    assert np.all(np.isfinite(results["tight-stein"]["grad"]))


def test_compaction_equals_naive_when_capacity_suffices(results):
    """Compaction into 3 slots (with the bundle rematerialised) is the naive bundle exactly."""
    n, c = results["naive"], results["compact"]
    assert int(np.sum(c["stats"].overflow)) == 0
    np.testing.assert_allclose(c["qpos"], n["qpos"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c["grad"], n["grad"], rtol=1e-8, atol=1e-10)


@pytest.mark.slow  # one more BCG rollout compile; compaction is tested fast just above
def test_slot_layouts_equal_naive(results):
    """4 slots of 10 branches in 8 phases of 5 states equal the naive bundle (5 slots)."""
    n, b = results["naive"], results["four-slots"]
    assert int(np.sum(b["stats"].overflow)) == 0
    np.testing.assert_allclose(b["qpos"], n["qpos"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b["grad"], n["grad"], rtol=1e-8, atol=1e-10)


def test_phased_runs_only_the_phases_in_use():
    """slots.phased: phase 0 steps the batch, then only the ceil(n / E) phases holding used
    states run (counted by a host callback inside the step); value and gradient equal stepping
    the states directly."""
    from bcg.estimators import slots

    calls = []
    E, P = 4, 3

    def physics(x):
        jax.debug.callback(lambda: calls.append(1))
        return 2.0 * jnp.sin(x)

    def built_states(y):
        return jnp.concatenate([y, y + 1.0, y + 2.0])  # P x E = 12 states

    def run(x, n):
        first, out, aux = slots.phased(
            physics, x, lambda y: (built_states(y), n, jnp.sum(y)), P, lambda z: z
        )
        return jnp.sum(first) + jnp.sum(out[:n]) + aux

    def direct(x, n):
        y = 2.0 * jnp.sin(x)
        return 2.0 * jnp.sum(y) + jnp.sum(2.0 * jnp.sin(built_states(y))[:n])

    x = jnp.linspace(0.1, 0.4, E)
    for n, phases in ((0, 1), (3, 2), (5, 3), (12, 4)):
        v, g = jax.value_and_grad(run)(x, n)
        v_ref, g_ref = jax.value_and_grad(direct)(x, n)
        np.testing.assert_allclose(v, v_ref, rtol=1e-12)
        np.testing.assert_allclose(g, g_ref, rtol=1e-12)
        calls.clear()
        jax.block_until_ready(jax.jit(run, static_argnums=1)(x, n))
        jax.effects_barrier()
        assert len(calls) == phases, (n, len(calls))


def test_plain_forward_keeps_the_analytic_rollout(results):
    """``forward="plain"`` (the default): every state of the rollout is the analytic one bit
    for bit, while the bundles (the same triggers as the naive BCG's) change the hitting envs'
    gradient and leave the free-flying envs' exactly analytic."""
    a, p, n = results["analytic"], results["plain-forward"], results["naive"]
    assert np.array_equal(p["qpos"], a["qpos"]) and p["value"] == a["value"]
    assert not np.allclose(n["qpos"][:, :3], a["qpos"][:, :3])  # the mean forward differs
    assert int(np.sum(p["stats"].triggered)) >= 3
    assert not np.allclose(p["grad"][:3], a["grad"][:3], rtol=1e-3)
    np.testing.assert_allclose(p["grad"][3:], a["grad"][3:], rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(p["grad"]))


def test_antithetic_noise_pairs_each_draw_with_its_negative():
    """B even: rows B/2.. are the negated rows ..B/2 (mean exactly 0); B odd: the middle draw
    is unpaired; B = 1: one plain draw."""
    from bcg.estimators.offsets import branch_noise

    key = jax.random.PRNGKey(1)
    for B in (1, 4, 5):
        dp, dv = branch_noise(key, B, 3, 0.01, 0.02, True, jnp.float64)
        assert dp.shape == dv.shape == (B, 3)
        n = (B + 1) // 2
        np.testing.assert_array_equal(dp[n:], -dp[: B - n])
        np.testing.assert_array_equal(dv[n:], -dv[: B - n])
        assert np.all(np.abs(np.asarray(dp[:n])) > 0)
    dp4, _ = branch_noise(key, 4, 3, 0.01, 0.02, True, jnp.float64)
    np.testing.assert_allclose(np.sum(dp4, 0), 0.0, atol=1e-18)
    BCG(antithetic=True, num_branches=3)  # odd B is allowed


def test_overflow_is_counted(results):
    st = results["tight-stein"]["stats"]
    per_step_need = np.asarray(st.bundled) + np.asarray(st.overflow)
    assert int(np.sum(st.overflow)) > 0  # three envs hit at once, two slots
    assert np.all(np.asarray(st.bundled) <= 2)
    assert np.all(per_step_need <= 3)


_KEY0 = jax.random.PRNGKey(0)


def _one_step(sim, est, x):
    """One BCG control step of the ball from x = (z, vz): (z', vz') of the bundle mean and the
    trigger count."""
    d0 = _batch(sim, [0.0], [0.0])
    carry = est.init(sim, d0.replace(qpos=x[None, :1], qvel=x[None, 1:]))
    new, stats = est.step(sim, carry, jnp.zeros((1, 0)), _KEY0)
    return jnp.concatenate([new.data.qpos[0], new.data.qvel[0]]), stats.triggered


def _plain_step(sim, x):
    """The ball's plain control step from x = (z, vz): (z', vz')."""
    d = jax.tree_util.tree_map(lambda a: a[0], _batch(sim, [0.0], [0.0]))
    out = bs.control_step(sim, d.replace(qpos=x[:1], qvel=x[1:]), jnp.zeros(0))[0]
    return jnp.concatenate([out.qpos, out.qvel])


def _branches(sim, est, x):
    """The B branch steps of :func:`_one_step` by hand: (B, 2) outputs and the offsets dp, dv."""
    d = jax.tree_util.tree_map(lambda a: a[0], _batch(sim, [0.0], [0.0]))
    d = d.replace(qpos=x[:1], qvel=x[1:])
    u = jnp.zeros(0)
    plain, forces = bs.control_step(sim, d, u, per_substep=True)
    k = jax.random.split(jax.random.split(_KEY0, 1)[0])[0]  # the env's key, then its start key
    dq, dqd, dp, dv, _ = est.offsets(sim, plain, est.trigger_rule(sim, plain, forces), k)

    def branch(dq_i, dqd_i):
        db = d.replace(qpos=bs.integrate_qpos(sim, d.qpos, dq_i), qvel=d.qvel + dqd_i)
        out = bs.control_step(sim, db, u)[0]
        return jnp.concatenate([out.qpos, out.qvel])

    return jax.vmap(branch)(dq[: est.num_branches], dqd[: est.num_branches]), dp, dv


@pytest.fixture(scope="module")
def step(sim):
    """``step(est, x) -> ((z', vz'), triggered, d(z', vz')/dx)`` of :func:`_one_step`, compiled
    once per estimator configuration and shared by the single-step tests below."""
    compiled = {}

    def run(est, x):
        if est not in compiled:
            f = functools.partial(_one_step, sim, est)
            compiled[est] = jax.jit(lambda x: (*f(x), jax.jacrev(lambda x: f(x)[0])(x)))
        return compiled[est](x)

    return run


@pytest.fixture(scope="module")
def plain(sim):
    """``plain(x) -> ((z', vz'), d(z', vz')/dx)`` of the ball's plain control step."""
    f = functools.partial(_plain_step, sim)
    return jax.jit(lambda x: (f(x), jax.jacrev(f)(x)))


# one triggered bundle step of 4 branches from a state just above the floor
X0 = jnp.array([0.102, -1.0])
BUNDLE = BCG(num_branches=4, horizon=1, tau=0.0, **PAPER)


@pytest.fixture(scope="module")
def branches(sim):
    """The branches of ``BUNDLE``'s step from ``X0`` by hand: (B, 2) outputs, the offsets
    dp, dv and each branch's Jacobian (B, 2, 2)."""
    f = functools.partial(_branches, sim, BUNDLE)
    Y, dp, dv = jax.jit(f)(X0)
    J_i = jax.jit(jax.jacrev(lambda x: f(x)[0]))(X0)
    return tuple(np.asarray(a) for a in (Y, dp, dv, J_i))


def test_bundle_step_is_the_mean_of_branches(step, branches):
    """One triggered step equals the hand-computed mean of B perturbed branch steps; its
    first-order Jacobian is the mean of branch Jacobians (Z_bar = (1/B) sum_i F_x Z^(i)) and its
    Stein Jacobian is (1/B) sum_i (y_i - y_bar) [dp_i / sigma_p^2, dv_i / sigma_v^2] (here the
    slide is the whole chain: M M^+ = I, so the Stein term is the entire state sensitivity)."""
    Y, dp, dv, J_i = branches
    out, trig, J_fo = step(BUNDLE, X0)
    assert int(trig) == 1
    np.testing.assert_allclose(out, Y.mean(0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(J_fo, J_i.mean(0), rtol=1e-8, atol=1e-10)

    st = dataclasses.replace(BUNDLE, gradient="stein", stein_velocity=True)
    out_st, _, J_st = step(st, X0)
    np.testing.assert_allclose(out_st, out, rtol=1e-12, atol=1e-12)  # same forward value
    dY = Y - Y.mean(0)
    # the ball's group Jacobian is the z row of a (3, 1) Jacobian: s = (z, vz)
    zrow = 2
    stein = np.stack([dY.T @ dp[:, zrow] / 0.01**2, dY.T @ dv[:, zrow] / 0.02**2], 1) / 4
    np.testing.assert_allclose(J_st, stein, rtol=1e-4, atol=1e-8)
    assert not np.allclose(J_st, np.asarray(J_fo), rtol=1e-2)


def test_blend_weights_plain_step_and_bundle_mean(sim, step, plain):
    """``blend=b``: a triggered step returns x_plain + w (x_bar - x_plain) with
    w = clip((L / tau - 1) / b, 0, 1) from the step's load L (here strictly between 0 and 1),
    and its Jacobian is (1 - w) F_x + w J_bar (w a constant); below tau nothing bundles."""
    d = jax.tree_util.tree_map(lambda a: a[0], _batch(sim, [0.0], [0.0]))
    d = d.replace(qpos=X0[:1], qvel=X0[1:])
    plain_d, forces = jax.jit(lambda d: bs.control_step(sim, d, jnp.zeros(0), per_substep=True))(d)
    load = float(jnp.max(BCG().trigger_rule.loads(sim, plain_d, forces)[0]))
    tau, b = 0.6 * load, 1.0
    w = (load / tau - 1.0) / b
    assert 0.2 < w < 0.9
    # a triggered step's bundle mean does not depend on tau: BUNDLE (tau = 0) stands for the
    # sharp step at this tau
    soft = dataclasses.replace(BUNDLE, tau=tau, blend=b)

    mean, _, J_mean = step(BUNDLE, X0)
    x_plain, J_plain = plain(X0)
    out, trig, J_soft = step(soft, X0)
    assert int(trig) == 1
    np.testing.assert_allclose(out, x_plain + w * (mean - x_plain), rtol=1e-9)
    np.testing.assert_allclose(J_soft, (1 - w) * J_plain + w * J_mean, rtol=1e-7, atol=1e-9)
    assert not np.allclose(J_mean, J_plain, rtol=1e-2)  # the blend is not trivially either
    # the default carry has no weight leaf: checkpoints of runs without a blend keep their layout
    batch = _batch(sim, [0.5], [0.0])
    assert BUNDLE.init(sim, batch).weight is None and soft.init(sim, batch).weight.shape == (1,)
    cold = dataclasses.replace(soft, tau=1.01 * load)
    out_cold, trig_cold, _ = step(cold, X0)
    assert int(trig_cold) == 0
    np.testing.assert_allclose(out_cold, x_plain, rtol=1e-12)


def test_plain_forward_step_has_the_plain_value_and_the_bundle_jacobian(step, plain):
    """One triggered step with ``forward="plain"`` returns F(x) (the plain step) and has the
    Jacobian of the bundle mean, (1/B) sum_i F_x(x + dx_i) (from ``forward="mean"``)."""
    x_plain, J_plain = plain(X0)
    out, trig, J_plain_fwd = step(dataclasses.replace(BUNDLE, forward="plain"), X0)
    assert int(trig) == 1
    assert np.array_equal(out, x_plain)
    J_mean = step(BUNDLE, X0)[2]
    np.testing.assert_allclose(J_plain_fwd, J_mean, rtol=1e-10, atol=1e-12)
    assert not np.allclose(J_mean, J_plain, rtol=1e-2)
    with pytest.raises(ValueError, match="forward"):
        BCG(forward="bundle")


def test_clip_branch_cotangents_is_the_identity_forward_and_clips_rows_backward():
    """The transform behind ``branch_clip=c``: identity forward; backward, each branch's row
    (all leaves together) scaled to at most c times the median row norm."""
    from bcg.estimators.aggregation import clip_branch_cotangents

    t = (jnp.arange(8.0).reshape(4, 2), jnp.ones((4, 1)))
    out, back = jax.vjp(lambda t: clip_branch_cotangents(t, 2.0), t)
    assert all(np.array_equal(a, b) for a, b in zip(out, t, strict=True))
    g = (jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [30.0, 40.0]]), jnp.zeros((4, 1)))
    ((ga, gb),) = back(g)
    np.testing.assert_allclose(ga[3], [1.2, 1.6])  # norm 50 -> 2 x median 1
    np.testing.assert_allclose(ga[:3], g[0][:3])
    assert np.array_equal(gb, g[1])


@pytest.mark.slow  # two more BCG step compiles for an option no recipe uses; the transform is fast
def test_branch_clip_scales_outlier_branches(sim, step, branches):
    """``branch_clip=c``: the vector-Jacobian product of a bundle step is
    sum_i clip_c(J_i^T w / B), each branch's start-state cotangent scaled to at most c times the
    median over branches (J_i by hand from the branch steps); a loose bound changes nothing."""
    w = jnp.array([1.0, 0.05])

    def vjp(est):
        return jax.jit(jax.grad(lambda x: _one_step(sim, est, x)[0] @ w))(X0)

    J_i = branches[3]  # (B, 2, 2)
    rows = np.einsum("bij,i->bj", J_i, np.asarray(w)) / 4  # each branch's cotangent J_i^T w / B
    norms = np.linalg.norm(rows, axis=1)
    bound = 1.0 * np.median(norms)
    assert np.sum(norms > bound * 1.01) >= 1  # the bound acts on this bundle
    expected = (rows * np.minimum(1.0, bound / norms)[:, None]).sum(0)
    unclipped = np.asarray(step(BUNDLE, X0)[2]).T @ np.asarray(w)
    np.testing.assert_allclose(unclipped, rows.sum(0), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(
        vjp(dataclasses.replace(BUNDLE, branch_clip=1.0)), expected, rtol=1e-8
    )
    loose = vjp(dataclasses.replace(BUNDLE, branch_clip=1e6))
    np.testing.assert_allclose(loose, unclipped, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("perturb", ["limb", "chain"])
def test_offsets_follow_the_contact_chain(sim, perturb):
    """dq = J^T (J J^T + lambda I)^-1 dp: the Cartesian offsets of the contact point are
    reproduced (J dq ~ dp) and offsets are zero for contacts that did not trigger. The ball's
    only joint is an unactuated root slide: its limb is its whole chain."""
    from bcg.estimators.trigger import Hot

    est = BCG(num_branches=64, sigma_p=0.01, sigma_v=0.02, perturb=perturb)
    d = jax.tree_util.tree_map(lambda x: x[0], _batch(sim, [0.099], [0.0]))
    d, fmax = jax.jit(lambda d: bs.control_step(sim, d, jnp.zeros(0)))(d)
    J = np.asarray(bs.contact_jacobians(sim.mjx_model, d))[0]  # (3, nv)
    np.testing.assert_allclose(np.abs(J[:, 0]), [0.0, 0.0, 1.0], atol=1e-12)  # slide along z
    on = Hot(jnp.ones((1,), bool), jnp.ones_like(fmax, bool))
    dq, dqd = est.offsets(sim, d, on, jax.random.PRNGKey(1))[:2]
    dp = np.asarray(dq) @ J.T  # Cartesian offsets realised at the contact point (z only)
    assert abs(np.std(dp[:, 2]) - 0.01) < 0.003
    assert abs(np.std((np.asarray(dqd) @ J.T)[:, 2]) - 0.02) < 0.006
    off = Hot(jnp.zeros((1,), bool), jnp.zeros_like(fmax, bool))
    z = est.offsets(sim, d, off, jax.random.PRNGKey(1))[0]
    assert np.all(np.asarray(z) == 0)
    # the slide moves the ball along the contact normal only: without the normal component
    # (normal_scale=0) no position offset is left, the velocity offsets are unchanged
    flat = dataclasses.replace(est, normal_scale=0.0).offsets(sim, d, on, jax.random.PRNGKey(1))
    assert np.max(np.abs(np.asarray(flat.dq))) < 1e-12
    np.testing.assert_allclose(np.asarray(flat.dqd), np.asarray(dqd), rtol=1e-12)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"num_branches": 0}, "num_branches"),
        ({"num_branches": 2.5}, "num_branches"),
        ({"horizon": 0}, "horizon"),
        ({"sigma_p": -0.01}, "sigma_p"),
        ({"sigma_v": float("nan")}, "sigma_v"),
        ({"tau": -1.0}, "tau"),
        ({"stiff_timeconst": -0.01}, "stiff_timeconst"),
        ({"stiff_timeconst": "stiff"}, "stiff_timeconst"),
        ({"damping": 0.0}, "damping"),
        ({"capacity": 0}, "capacity"),
        ({"capacity": 1.5}, "capacity"),
        ({"gradient": "magic"}, "gradient"),
        ({"gradient": "stein", "num_branches": 1}, "num_branches"),
        ({"perturb": "base"}, "perturb"),
        ({"trigger": "impulse"}, "trigger mode"),
        ({"max_dq": 0.0}, "max_dq"),
        ({"max_dqd": -1.0}, "max_dqd"),
        ({"new_groups": 1}, "new_groups"),
        ({"branch_clip": 0.0}, "branch_clip"),
        ({"blend": 0.0}, "blend"),
        ({"normal_scale": 1.5}, "normal_scale"),
    ],
)
def test_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        BCG(**kw)


def test_registry_errors():
    with pytest.raises(ValueError, match="unknown estimator"):
        E.make("magic")
    with pytest.raises(ValueError, match="no parameter"):
        E.make("bcg", sigma=1.0)
    with pytest.raises(ValueError, match="sigma"):
        E.make("global-bundle", sigma=-1.0)
    with pytest.raises(ValueError, match="no parameter"):
        E.make("bcg", buckets=2)
    with pytest.raises(ValueError, match="remat must be true or false"):
        E.make("bcg", remat="yes")


def test_soft_contact_never_triggers():
    """The stiffness gate (ours): contacts slower than 3 physics steps never bundle (so on soft
    contact BCG is the analytic step: the slow test below); with ``stiff_timeconst=None`` (the
    paper) the same impact triggers."""
    from bcg.estimators.trigger import hot_contacts, resolve_stiff_timeconst

    soft = bs.load(BALL, stiffness="soft", name="ball-soft")
    d = jax.tree_util.tree_map(lambda x: x[0], _batch(soft, [0.102], [-1.5]))
    plain, fmax = jax.jit(lambda d: bs.control_step(soft, d, jnp.zeros(0)))(d)
    assert float(jnp.max(fmax)) > 50.0  # a real impact (weight: 9.8 N)
    gate = resolve_stiff_timeconst("auto", soft)
    assert gate == pytest.approx(0.015) and soft.stiffness.timeconst == 0.02
    assert not bool(jnp.any(hot_contacts(plain, fmax, 0.0, gate)))
    assert bool(jnp.any(hot_contacts(plain, fmax, 0.0, resolve_stiff_timeconst(None, soft))))


@pytest.mark.slow  # two rollout compiles on another model; the gate is tested fast above
def test_soft_contact_rollout_of_bcg_is_the_analytic_one():
    """On soft contact no step triggers, so a BCG rollout is the analytic one exactly (value,
    states and gradient)."""
    soft = bs.load(BALL, stiffness="soft", name="ball-soft")
    d0 = _batch(soft, Z, VZ)
    dv = jnp.zeros_like(d0.qvel)
    key = jax.random.PRNGKey(3)
    (va, (qa, sta)), ga = _grad_fn(soft, E.make("analytic"))(dv, d0, key)
    (vb, (qb, stb)), gb = _grad_fn(soft, BCG(capacity=2))(dv, d0, key)
    assert int(np.sum(stb.triggered)) == 0 and int(np.sum(sta.triggered)) == 0
    np.testing.assert_allclose(np.asarray(qb), np.asarray(qa), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gb), np.asarray(ga), rtol=1e-12, atol=1e-12)
