"""BCG rollout step: trigger, chain perturbation, mean state, compaction, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bcg.sim as bs
from bcg import estimators as E
from bcg.estimators.bcg import BCG

BALL = """<mujoco><option timestep="0.005"/><worldbody><geom type="plane" size="50 50 .1"/>
<body pos="0 0 1"><freejoint/><geom type="sphere" size=".1" mass="1"/></body>
</worldbody></mujoco>"""


@pytest.fixture(scope="module")
def sim():
    return bs.load(BALL, stiffness="stiff", name="ball")


def _batch(sim, z, vz, vx=0.5):
    n = len(z)
    tmpl = bs.make_data(sim)
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tmpl)
    qpos = np.tile(sim.mj_model.qpos0, (n, 1))
    qpos[:, 2] = z
    qvel = np.zeros((n, 6))
    qvel[:, 2] = vz
    qvel[:, 0] = vx
    return d.replace(qpos=jnp.asarray(qpos), qvel=jnp.asarray(qvel))


# envs 0, 1 hit the floor in the first control steps, envs 2, 3 fly high above it
Z = [0.13, 0.16, 3.0, 3.0]
VZ = [-1.5, -1.5, 1.0, 1.0]
T = 6


def _grad_fn(sim, est):
    def loss(dv, d0, key):
        d = d0.replace(qvel=d0.qvel + dv)
        dT, st = E.rollout(sim, est, d, jnp.zeros((T, d0.qpos.shape[0], 0)), key)
        return jnp.sum(dT.qpos[:, 2] + 0.1 * dT.qvel[:, 2]), (dT.qpos, st)

    return jax.jit(jax.value_and_grad(loss, has_aux=True))


@pytest.fixture(scope="module")
def results(sim):
    """One compile per configuration, shared by the tests below."""
    d0 = _batch(sim, Z, VZ)
    dv = jnp.zeros_like(d0.qvel)
    key = jax.random.PRNGKey(3)
    out = {}
    for label, est in {
        "analytic": E.make("analytic"),
        "naive": BCG(),
        "compact": BCG(capacity=2),
        "tight": BCG(capacity=1),
    }.items():
        (v, (qpos, st)), g = _grad_fn(sim, est)(dv, d0, key)
        out[label] = dict(value=float(v), qpos=np.asarray(qpos), stats=st, grad=np.asarray(g))
    return out


def test_free_flight_envs_are_untouched(results):
    """Envs that never touch the floor never trigger: BCG equals analytic on them exactly."""
    a, b = results["analytic"], results["naive"]
    np.testing.assert_allclose(b["qpos"][2:], a["qpos"][2:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(b["grad"][2:], a["grad"][2:], rtol=1e-12, atol=1e-12)


def test_contact_envs_trigger_and_bundle(results):
    st = results["naive"]["stats"]
    assert int(np.sum(st.triggered)) >= 2  # both hitting envs start a bundle
    assert int(np.sum(st.bundled)) >= 2 * int(np.sum(st.triggered)) - 2  # each lasts H = 2
    # the bundle changes the gradient of the hitting envs (the mean of branch sensitivities)
    assert not np.allclose(results["naive"]["grad"][:2], results["analytic"]["grad"][:2])
    assert np.all(np.isfinite(results["naive"]["grad"]))


def test_compaction_equals_naive_when_capacity_suffices(results):
    n, c = results["naive"], results["compact"]
    assert int(np.sum(c["stats"].overflow)) == 0
    np.testing.assert_allclose(c["qpos"], n["qpos"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c["grad"], n["grad"], rtol=1e-8, atol=1e-10)


def test_overflow_is_counted(results):
    st = results["tight"]["stats"]
    per_step_need = np.asarray(st.bundled) + np.asarray(st.overflow)
    assert int(np.sum(st.overflow)) > 0  # two envs hit at once, one slot
    assert np.all(np.asarray(st.bundled) <= 1)
    assert np.all(per_step_need <= 2)


def test_bundle_step_is_the_mean_of_branches(sim):
    """One triggered step equals the hand-computed mean of B perturbed branch steps, and its
    Jacobian equals the mean of the branch Jacobians (Z_bar = (1/B) sum_i F_x Z^(i))."""
    est = BCG(num_branches=4, horizon=1, tau=0.0)
    d0 = _batch(sim, [0.102], [-1.0], vx=0.0)
    key = jax.random.PRNGKey(0)
    u = jnp.zeros((1, 0))

    def bcg_step(v):
        carry = est.init(sim, d0.replace(qvel=v))
        new, st = est.step(sim, carry, u, key)
        return new.data.qvel[0], st.triggered

    def manual(v):
        d = jax.tree_util.tree_map(lambda x: x[0], d0.replace(qvel=v))
        plain, fmax = bs.control_step(sim, d, u[0])
        k = jax.random.split(key, 1)[0]
        dq, dqd = est.offsets(sim, plain, fmax > 0.0, k)

        def branch(i):
            db = d.replace(qpos=bs.integrate_qpos(sim, d.qpos, dq[i]), qvel=d.qvel + dqd[i])
            return bs.control_step(sim, db, u[0])[0].qvel

        return jnp.mean(jnp.stack([branch(i) for i in range(4)]), axis=0)

    v0 = d0.qvel
    out, trig = jax.jit(bcg_step)(v0)
    assert int(trig) == 1
    np.testing.assert_allclose(out, jax.jit(manual)(v0), rtol=1e-10, atol=1e-12)
    Jb = jax.jit(jax.jacrev(lambda v: bcg_step(v)[0]))(v0)
    Jm = jax.jit(jax.jacrev(manual))(v0)
    np.testing.assert_allclose(Jb, Jm, rtol=1e-8, atol=1e-10)


def test_offsets_follow_the_contact_chain(sim):
    """dq = J^T (J J^T + lambda I)^-1 dp: the Cartesian offsets of the contact point are
    reproduced (J dq ~ dp) and offsets are zero for contacts that did not trigger."""
    est = BCG(num_branches=64, sigma_p=0.01, sigma_v=0.02)
    d = jax.tree_util.tree_map(lambda x: x[0], _batch(sim, [0.099], [0.0], vx=0.0))
    d, fmax = jax.jit(lambda d: bs.control_step(sim, d, jnp.zeros(0)))(d)
    J = np.asarray(bs.contact_jacobians(sim.mjx_model, d))[0]  # (3, nv)
    dq, dqd = est.offsets(sim, d, jnp.ones_like(fmax, bool), jax.random.PRNGKey(1))
    dp = np.asarray(dq) @ J.T  # Cartesian offsets realised at the contact point
    assert abs(np.std(dp) - 0.01) < 0.003
    assert abs(np.std(np.asarray(dqd) @ J.T) - 0.02) < 0.006
    z, _ = est.offsets(sim, d, jnp.zeros_like(fmax, bool), jax.random.PRNGKey(1))
    assert np.all(np.asarray(z) == 0)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"num_branches": 0}, "num_branches"),
        ({"num_branches": 2.5}, "num_branches"),
        ({"horizon": 0}, "horizon"),
        ({"sigma_p": -0.01}, "sigma_p"),
        ({"sigma_v": float("nan")}, "sigma_v"),
        ({"tau": -1.0}, "tau"),
        ({"damping": 0.0}, "damping"),
        ({"capacity": 0}, "capacity"),
        ({"capacity": 1.5}, "capacity"),
        ({"antithetic": True, "num_branches": 3}, "antithetic"),
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
