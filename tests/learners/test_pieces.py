"""Pure pieces of the learners: normaliser, TD(lambda), the SHAC/BPTT objectives, NaN guard."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bcg.learners import normalization as rms
from bcg.learners.bptt import episode_objective
from bcg.learners.common import guarded_step, make_optimizer
from bcg.learners.shac import actor_objective, discounted_return_stream, td_lambda_targets


def test_running_mean_std_matches_numpy():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, (n, 4)) for n in (1, 7, 32, 5)]
    s = rms.init((4,), jnp.float64, count=0.0)
    for b in batches:
        s = rms.update(s, b)
    allx = np.concatenate(batches)
    np.testing.assert_allclose(s.mean, allx.mean(0), rtol=1e-10)
    np.testing.assert_allclose(s.var, allx.var(0), rtol=1e-10)
    assert float(s.count) == len(allx)
    np.testing.assert_allclose(
        rms.normalize(s, allx, eps=0.0), (allx - allx.mean(0)) / allx.std(0), rtol=1e-8
    )


def test_return_normaliser_vs_numpy():
    """Scalar return statistics over a (h, E) stream of discounted returns with resets."""
    rng = np.random.default_rng(1)
    h, E, gamma = 6, 3, 0.9
    r = rng.normal(size=(h, E))
    done = np.zeros((h, E), bool)
    done[2, 0] = done[4, 2] = True
    ret_end, rets = discounted_return_stream(jnp.zeros(E), jnp.asarray(r), done, gamma)
    ref = np.zeros((h, E))
    acc = np.zeros(E)
    for t in range(h):
        acc = gamma * acc + r[t]
        ref[t] = acc
        acc = np.where(done[t], 0.0, acc)
    np.testing.assert_allclose(rets, ref, rtol=1e-12)
    np.testing.assert_allclose(ret_end, acc, rtol=1e-12)
    s = rms.update(rms.init((), jnp.float64, count=0.0), rets)
    np.testing.assert_allclose([s.mean, s.var], [ref.mean(), ref.var()], rtol=1e-10)


def _td_lambda_numpy(r, v, term, trunc, gamma, lam):
    """Forward view: lambda-weighted n-step returns inside each episode piece."""
    h, E = r.shape
    done = term | trunc
    boot = np.where(term, 0.0, v)
    G = np.zeros((h, E))
    for e in range(E):
        for t in range(h):
            end = t
            while not done[end, e] and end < h - 1:
                end += 1
            N = end - t + 1
            nstep = []
            for n in range(1, N + 1):
                g = sum(gamma**i * r[t + i, e] for i in range(n))
                nstep.append(g + gamma**n * boot[t + n - 1, e])
            G[t, e] = (1 - lam) * sum(lam ** (n - 1) * nstep[n - 1] for n in range(1, N)) + lam ** (
                N - 1
            ) * nstep[N - 1]
    return G


def test_td_lambda_matches_numpy_loop():
    rng = np.random.default_rng(2)
    h, E = 7, 4
    r, v = rng.normal(size=(h, E)), rng.normal(size=(h, E))
    term = np.zeros((h, E), bool)
    trunc = np.zeros((h, E), bool)
    term[2, 0] = True
    trunc[3, 1] = True
    term[1, 2] = trunc[5, 2] = True
    g = td_lambda_targets(jnp.asarray(r), jnp.asarray(v), term, trunc, 0.97, 0.8)
    np.testing.assert_allclose(g, _td_lambda_numpy(r, v, term, trunc, 0.97, 0.8), rtol=1e-12)


def test_termination_vs_truncation_bootstrap():
    """Env 0 terminates at t=1 (no bootstrap), env 1 is truncated at t=1 (bootstraps
    V(s'_2)), env 2 runs through the window (bootstraps at its end)."""
    g = 0.5
    r = jnp.ones((3, 3))
    v = jnp.full((3, 3), 10.0)
    term = jnp.zeros((3, 3), bool).at[1, 0].set(True)
    trunc = jnp.zeros((3, 3), bool).at[1, 1].set(True)
    # env 0: (1 + g) | restart: 1   -> 1.5 + 1 + g*10 = 7.5
    # env 1: (1 + g + g^2 10) | 1 + g*10 -> 4.0 + 6.0 = 10.0
    # env 2: 1 + g + g^2 + g^3 10 -> 1.75 + 1.25 = 3.0
    want = -(7.5 + 10.0 + 3.0) / 9
    np.testing.assert_allclose(actor_objective(r, v, term, trunc, g), want, rtol=1e-12)
    G = td_lambda_targets(r, v, term, trunc, g, 0.0)  # lambda 0: one-step targets
    np.testing.assert_allclose(G[1], [1.0, 1.0 + g * 10, 1.0 + g * 10])
    # episode objective (BPTT): only the first episode counts
    np.testing.assert_allclose(episode_objective(r, term, trunc, 1.0), -(2 + 2 + 3) / 9, rtol=1e-12)


def test_nan_guard_keeps_params_and_counts():
    tx = make_optimizer(1.0)
    params = {"w": jnp.arange(3.0), "b": jnp.ones(())}
    opt = tx.init(params)
    bad = {"w": jnp.array([1.0, jnp.nan, 0.0]), "b": jnp.ones(())}
    p2, o2, ok = guarded_step(tx, params, opt, bad, 0.1)
    assert not bool(ok)
    for a, b in zip(
        jax.tree_util.tree_leaves((p2, o2)), jax.tree_util.tree_leaves((params, opt)), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    good = {"w": jnp.ones(3), "b": jnp.ones(())}
    p3, _, ok = guarded_step(tx, params, opt, good, 0.1)
    assert bool(ok) and not np.allclose(p3["w"], params["w"])
    _, _, ok = guarded_step(tx, params, opt, good, 0.1, loss=jnp.inf)
    assert not bool(ok)
    # finite entries whose global norm overflows: clipping would zero them and Adam would take
    # a momentum-only step; the guard skips it instead
    big = jnp.finfo(jnp.float32).max / 2
    huge = {"w": jnp.full(3, big, jnp.float32), "b": jnp.ones((), jnp.float32)}
    p32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), params)
    o32 = tx.init(p32)
    assert bool(jnp.all(jnp.isfinite(huge["w"]))) and not np.isfinite(optax.global_norm(huge))
    p4, o4, ok = guarded_step(tx, p32, o32, huge, 0.1)
    assert not bool(ok)
    for a, b in zip(
        jax.tree_util.tree_leaves((p4, o4)), jax.tree_util.tree_leaves((p32, o32)), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    assert isinstance(tx, optax.GradientTransformation)
