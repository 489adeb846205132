"""Chunked per-sample gradients (bcg.diagnostics.chunking) equal the one-call gradients.

BCG bundles at every contact with ``tau = 0`` and no stiffness gate, so every sample's gradient
depends on its random branch offsets: a chunk that restarted the per-environment keys, or that
dropped or reordered samples, would change the per-sample gradients (checked below: the naive
restart does change them, and the samples' gradients differ from one another).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg import estimators as E
from bcg.diagnostics import chunking
from bcg.diagnostics.policy_gradient import PolicyProblem, gradient_function, gradients
from bcg.diagnostics.report import chunked_gradient_function, make_problem
from bcg.diagnostics.report import gradient_function as report_gradient_function
from bcg.envs import tasks

N = 4
CHUNK = 3  # two chunks of 2 samples (chunk_bounds balances them)
TIGHT = dict(rtol=1e-12, atol=1e-12)


def bundle_everywhere():
    return E.make("bcg", num_branches=3, tau=0.0, stiff_timeconst=None)


# ----------------------------------------------------------------------------- helpers


def test_chunk_bounds_cover_in_order_with_near_equal_sizes():
    for n in range(1, 40):
        for size in range(1, n + 2):
            b = chunking.chunk_bounds(n, size)
            assert len(b) == -(-n // size)
            assert b[0][0] == 0 and b[-1][1] == n
            assert all(b[i][1] == b[i + 1][0] for i in range(len(b) - 1))
            sizes = {stop - start for start, stop in b}
            assert max(sizes) <= size and max(sizes) - min(sizes) <= 1
    assert chunking.chunk_bounds(0, 4) == []


def test_lapack_safe_chunk_keeps_lapack_calls_below_the_parallel_threshold():
    lim = chunking.LAPACK_PARALLEL_ELEMENTS
    x = jnp.ones((3, 5, 2, 2)) + jnp.eye(2)
    text = jax.jit(jnp.linalg.solve).lower(x, x).as_text()
    assert chunking.lapack_elements(text) == 3 * 5 * 2 * 2
    assert chunking.lapack_elements(jax.jit(jnp.sin).lower(x).as_text()) == 0
    seen = []

    def lower_text(m, per_sample=120):  # a program with one LAPACK operand of m x 120
        seen.append(m)
        return f"stablehlo.custom_call @lapack_dtrsm_ffi(%a) : (tensor<{m}x30x2x2xf64>)"

    assert chunking.lapack_safe_chunk(lower_text, 2048, 1024) == 1024  # 122880: fine
    assert seen == [1024]
    seen.clear()
    c = chunking.lapack_safe_chunk(lambda m: lower_text(m).replace("30x", "80x"), 4096, 2048)
    assert c == 512 and 512 * 320 < lim <= 1024 * 320 and seen == [2048, 512]
    assert chunking.lapack_safe_chunk(lower_text, 100, 1024) == 100  # whole batch fits
    huge = f"@lapack_dpotrf_ffi (tensor<{lim}x1xf64>)"
    assert chunking.lapack_safe_chunk(lambda m: huge, 8, 8) == 1  # cannot do better


def test_default_chunk_size_bounds_rollouts_per_call():
    cap = chunking.MAX_ROLLOUTS_PER_CALL
    for B in (1, 10, 30, 40, 80):
        c = chunking.chunk_size_for(E.make("bcg", num_branches=B))
        assert c & (c - 1) == 0 and c * (B + 1) <= cap < 2 * c * (B + 1)
    assert chunking.chunk_size_for(E.make("bcg", num_branches=30)) * 30 < 41_000
    assert chunking.chunk_size_for(E.make("analytic")) == cap
    assert chunking.chunk_size_for(E.make("zeroth-order")) == cap // 32
    assert chunking.chunk_size_for(E.make("bcg"), 7) == 7
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="chunk_size"):
            chunking.chunk_size_for(E.make("bcg"), bad)


def test_offset_key_numbers_children_from_the_offset():
    key = jax.random.PRNGKey(42)
    full = np.asarray(jax.random.split(key, 12))
    for o in (0, 3, 7):
        kids = jax.random.split(chunking.offset_key(key, np.uint32(o)), 5)
        np.testing.assert_array_equal(np.asarray(jax.random.key_data(kids))[:, :2], full[o : o + 5])
        for i in range(5):  # the children draw what the plain threefry children draw
            np.testing.assert_array_equal(
                jax.random.normal(kids[i], (4,)), jax.random.normal(full[o + i], (4,))
            )
            a, b = jax.random.split(kids[i]), jax.random.split(full[o + i])
            np.testing.assert_array_equal(
                jax.random.uniform(a[1], (3,)), jax.random.uniform(b[1], (3,))
            )


# ----------------------------------------------------------------------------- the reports


def _assert_sensitive(G_chunked, G_naive):
    """The test can fail: restarting keys per chunk changes the gradients, and no two samples
    share a gradient (a reordering would show)."""
    assert not np.allclose(G_chunked, G_naive, rtol=1e-6, atol=1e-9)
    for i in range(len(G_chunked)):
        for j in range(i):
            assert not np.allclose(G_chunked[i], G_chunked[j], rtol=1e-6, atol=1e-9)


@pytest.fixture(scope="module")
def resting_mass():
    """falling_mass resting on the (soft) floor: in contact at every step, 4 control steps."""
    sim = tasks.get("falling_mass").load(stiffness="soft")
    return make_problem(
        sim, batch=N, horizon=4, seed=3, qpos=np.array([0.1]), qvel=np.zeros(1), qvel_noise=0.1
    )


# two report compiles (~120 s cold); the chunk bounds and keys are tested fast above
@pytest.mark.slow
def test_report_gradients_do_not_depend_on_chunking(resting_mass):
    p, est = resting_mass, bundle_everywhere()
    args = (
        p.sim.mjx_model,
        p.qpos0,
        p.qvel0,
        jnp.asarray(p.ctrl),
        jax.random.PRNGKey(1),
    )
    g = report_gradient_function(p, est)  # one compiled function for every call below
    G1, J1, s1 = chunked_gradient_function(p, est, fn=g)(*args)  # default: one call
    Gc, Jc, sc = chunked_gradient_function(p, est, chunk_size=CHUNK, fn=g)(*args)
    assert G1.shape == (N, p.dim) and np.all(np.isfinite(G1))
    np.testing.assert_allclose(Gc, G1, **TIGHT)
    np.testing.assert_allclose(Jc, J1, **TIGHT)
    for a, b in zip(jax.tree_util.tree_leaves(sc), jax.tree_util.tree_leaves(s1), strict=True):
        np.testing.assert_array_equal(a, b)
    assert int(np.sum(s1.bundled)) > 0
    naive = [  # every chunk at offset 0: other keys
        np.asarray(g(args[0], p.qpos0[a:b], p.qvel0[a:b], args[3], args[4], np.uint32(0))[0])
        for a, b in chunking.chunk_bounds(N, CHUNK)
    ]
    _assert_sensitive(Gc, np.concatenate(naive))


@pytest.mark.slow  # the same chunking code as the step-level test above, another compile
def test_report_objective_level_gradients_do_not_depend_on_chunking(resting_mass):
    p, est = resting_mass, E.make("zeroth-order", num_samples=2)
    args = (p.sim.mjx_model, p.qpos0, p.qvel0, jnp.asarray(p.ctrl), jax.random.PRNGKey(1))
    g = report_gradient_function(p, est)
    G1, J1, _ = chunked_gradient_function(p, est, chunk_size=N, fn=g)(*args)
    Gc, Jc, _ = chunked_gradient_function(p, est, chunk_size=CHUNK, fn=g)(*args)
    np.testing.assert_allclose(Gc, G1, **TIGHT)
    np.testing.assert_allclose(Jc, J1, **TIGHT)
    assert np.all(np.isfinite(G1))


@pytest.mark.slow  # a pogo policy-gradient compile (~160 s cold)
def test_policy_gradients_do_not_depend_on_chunking():
    task = tasks.get("pogo")
    sim = task.load("gated")
    q, v = task.initial_states(sim, N, 5)  # standing: the foot is in contact
    theta = np.array([0.1, -0.2, 2.0, 0.3, 0.2])
    prob = PolicyProblem(sim, q, v, theta, horizon=3)
    est, key = bundle_everywhere(), jax.random.PRNGKey(2)
    g = gradient_function(prob, est)  # one compiled function for every call below
    G1, J1, b1 = gradients(prob, est, key, fn=g)  # default: one call (N is small)
    Gc, Jc, bc = gradients(prob, est, key, chunk_size=CHUNK, fn=g)
    assert G1.shape == (N, theta.size) and np.all(np.isfinite(G1))
    np.testing.assert_allclose(Gc, G1, **TIGHT)
    np.testing.assert_allclose(Jc, J1, **TIGHT)
    assert bc == b1 > 0
    naive = [  # every chunk at offset 0: other keys
        np.asarray(
            g(
                jnp.broadcast_to(jnp.asarray(theta), (b - a, theta.size)),
                q[a:b],
                v[a:b],
                key,
                np.uint32(0),
            )[0]
        )
        for a, b in chunking.chunk_bounds(N, CHUNK)
    ]
    _assert_sensitive(Gc, np.concatenate(naive))
