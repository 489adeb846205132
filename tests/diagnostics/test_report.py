"""The gradient report (bcg.diagnostics.report), its table and its plot.

Compiles are expensive here, so every MJX test shares one problem shape (falling_mass, soft
contact, batch 4, horizon 8): the module fixture compiles the analytic and the BCG gradient
once, and the free-fall check re-traces the analytic gradient with the same shapes (an identical
HLO, served by the persistent compilation cache of tests/conftest.py).

Over 8 control steps (0.16 s) from 0.5 m the falling mass never reaches the floor, and in the
free-fall check it starts 2 m higher still. Free fall under MuJoCo's semi-implicit Euler,
n = T * substeps physics steps of dt, J = z_n + w v_n:  dJ/dv_0 = n dt + w, independent of the
initial state.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bcg import estimators as E
from bcg.diagnostics.objective import VELOCITY_WEIGHT, default_objective
from bcg.diagnostics.plot import plot_spread_vs_stiffness
from bcg.diagnostics.report import (
    GradProblem,
    bootstrap_interval,
    cosine,
    run_report,
    summed_variance,
    variance_decomposition,
)
from bcg.diagnostics.table import format_table
from bcg.envs import tasks

BATCH = 4
HORIZON = 8
SEED = 0
ESTIMATOR_KEYS = (
    "mean",
    "summed_variance",
    "summed_variance_ci95",
    "cosine_to_reference",
    "triggered_fraction",
    "bundled_fraction",
    "overflow",
    "nan_count",
    "time_ratio_vs_analytic",
)

# ----------------------------------------------------------------------------- statistics


def test_summed_variance_is_sum_of_column_variances():
    rng = np.random.default_rng(1)
    G = rng.normal(size=(17, 5)) * np.array([0.1, 1.0, 3.0, 0.0, 10.0])
    expected = sum(np.var(G[:, j], ddof=1) for j in range(G.shape[1]))
    assert summed_variance(G) == pytest.approx(expected, rel=1e-12)
    assert isinstance(summed_variance(G), float)


def test_summed_variance_of_identical_samples_is_zero():
    G = np.tile(np.array([1.0, -2.0, 3.0]), (6, 1))
    assert summed_variance(G) == 0.0


def test_variance_decomposition_recovers_state_and_draw_parts():
    # g_ke = mu_e + n_ke with Var(mu) = 4 per coordinate and Var(n) = 0.25 per coordinate
    rng = np.random.default_rng(4)
    K, N, P = 40, 400, 3
    mu = 2.0 * rng.normal(size=(N, P))
    G = mu[None] + 0.5 * rng.normal(size=(K, N, P))
    d = variance_decomposition(G)
    assert d["draws"] == K
    assert d["between"] == pytest.approx(summed_variance(mu), rel=0.02)
    assert d["within"] == pytest.approx(P * 0.25, rel=0.03)
    assert d["total"] == pytest.approx(d["between"] + d["within"], rel=0.02)


def test_variance_decomposition_exact_cases():
    rng = np.random.default_rng(5)
    mu = rng.normal(size=(7, 2, 3))  # gradients with a tree-like trailing shape
    same = np.stack([mu] * 3)  # no draw noise: every draw equal
    d = variance_decomposition(same)
    assert d["within"] == pytest.approx(0.0, abs=1e-24)
    assert d["between"] == pytest.approx(summed_variance(mu.reshape(7, -1)), rel=1e-12)
    # no state part: one state's gradients copied to every state, draws differ
    noise = rng.normal(size=(5, 1, 4)).repeat(6, axis=1)
    d = variance_decomposition(noise)
    assert d["total"] == pytest.approx(0.0, abs=1e-12)
    within = np.sum(np.var(noise[:, 0], axis=0, ddof=1))
    assert d["within"] == pytest.approx(within, rel=1e-12)
    assert d["between"] == pytest.approx(-within / 5, rel=1e-12)


def test_variance_decomposition_rejects_a_single_draw():
    with pytest.raises(ValueError, match="K >= 2 draws"):
        variance_decomposition(np.zeros((1, 8, 3)))


def test_bootstrap_interval_contains_point_estimate():
    rng = np.random.default_rng(2)
    G = rng.normal(size=(200, 3))
    lo, hi = bootstrap_interval(G, seed=0)
    assert lo < summed_variance(G) < hi
    assert 0.0 < lo < 3.0 < hi  # the true summed variance is 3


def test_bootstrap_interval_narrows_with_more_samples():
    rng = np.random.default_rng(3)
    G = rng.normal(size=(1000, 3))
    lo_s, hi_s = bootstrap_interval(G[:50], n_resamples=1000, seed=0)
    lo_l, hi_l = bootstrap_interval(G, n_resamples=1000, seed=0)
    assert hi_l - lo_l < 0.5 * (hi_s - lo_s)


def test_bootstrap_interval_equals_the_direct_resampling():
    """The Gram-matrix form equals resampling the rows and computing the summed variance."""
    G = np.random.default_rng(2).normal(size=(20, 7)) * np.arange(1, 8)
    rng = np.random.default_rng(9)
    idx = rng.integers(0, 20, size=(500, 20))
    direct = np.sum(np.var(G[idx], axis=1, ddof=1), axis=-1)
    expect = np.percentile(direct, [2.5, 97.5])
    np.testing.assert_allclose(bootstrap_interval(G, n_resamples=500, seed=9), expect, rtol=1e-10)


def test_bootstrap_interval_deterministic_for_a_seed():
    rng = np.random.default_rng(4)
    G = rng.normal(size=(30, 2))
    assert bootstrap_interval(G, seed=5) == bootstrap_interval(G, seed=5)
    assert bootstrap_interval(G, seed=5) != bootstrap_interval(G, seed=6)


def test_cosine():
    a = np.array([1.0, -2.0, 0.5])
    assert math.isnan(cosine(np.zeros(3), a))
    assert math.isnan(cosine(a, np.zeros(3)))
    assert cosine(a, 3.0 * a) == pytest.approx(1.0, abs=1e-12)
    assert cosine(a, -0.1 * a) == pytest.approx(-1.0, abs=1e-12)
    assert cosine(np.array([1.0, 0.0]), np.array([0.0, 2.0])) == pytest.approx(0.0, abs=1e-15)


# ----------------------------------------------------------------------------- the report


@pytest.fixture(scope="module")
def task_and_sim():
    task = tasks.get("falling_mass")
    return task, task.load(stiffness="soft")


@pytest.fixture(scope="module")
def report(task_and_sim):
    """The report on falling_mass, built like ``bcg grad --task`` (cli.build) does."""
    task, sim = task_and_sim
    qp, qv = task.initial_states(sim, BATCH, SEED)
    problem = GradProblem(
        sim,
        default_objective(sim.mj_model),
        qp,
        qv,
        task.nominal_controls(sim)[:HORIZON],
        center=(None, None),
        noise=(task.qpos_noise, task.qvel_noise),
        seed=SEED,
    )
    ests = {"analytic": E.make("analytic"), "bcg": E.make("bcg")}
    return run_report(problem, ests, seed=SEED, reference=True, repeats=1)


def test_report_header(report):
    assert report["model"] == "falling_mass"
    assert report["stiffness"] == "soft"
    assert report["batch"] == BATCH
    assert report["horizon"] == HORIZON
    assert report["target_body"] == "mass"
    assert report["theta_dim"] == 1  # one slide dof, no actuators
    assert list(report["estimators"]) == ["analytic", "bcg"]
    assert len(report["reference"]["gradient"]) == report["theta_dim"]


def test_report_estimator_entries(report):
    for name, r in report["estimators"].items():
        missing = [k for k in ESTIMATOR_KEYS if k not in r]
        assert not missing, f"{name}: missing {missing}"
        assert len(r["mean"]) == report["theta_dim"]
        assert len(r["summed_variance_ci95"]) == 2
        lo, hi = r["summed_variance_ci95"]
        assert lo <= hi
        values = [
            *r["mean"],
            r["summed_variance"],
            lo,
            hi,
            r["cosine_to_reference"],
            r["triggered_fraction"],
            r["bundled_fraction"],
            r["time_ratio_vs_analytic"],
        ]
        assert all(math.isfinite(v) for v in values), f"{name}: {values}"
        assert r["summed_variance"] >= 0.0
        assert 0.0 <= r["triggered_fraction"] <= 1.0
        assert 0.0 <= r["bundled_fraction"] <= 1.0
        assert r["overflow"] == 0
        assert r["nan_count"] == 0
        assert r["time_ratio_vs_analytic"] > 0.0
    assert report["estimators"]["analytic"]["time_ratio_vs_analytic"] == 1.0


def test_report_no_contact_in_flight(report):
    # the mass is in the air for the whole horizon: nothing triggers, BCG equals analytic
    for r in report["estimators"].values():
        assert r["triggered_fraction"] == 0.0
        assert r["bundled_fraction"] == 0.0
        assert r["cosine_to_reference"] == pytest.approx(1.0, abs=1e-9)
    an, bcg = report["estimators"]["analytic"], report["estimators"]["bcg"]
    np.testing.assert_allclose(bcg["mean"], an["mean"], rtol=1e-10)


def test_report_is_json_serialisable(report):
    text = json.dumps(report, allow_nan=False)
    assert json.loads(text)["estimators"].keys() == report["estimators"].keys()


def test_format_table_lists_every_estimator(report):
    table = format_table(report)
    for name in report["estimators"]:
        assert name in table
    assert "falling_mass" in table


def test_plot_writes_png(report, tmp_path):
    path = plot_spread_vs_stiffness([report], tmp_path / "x.png")
    assert path == tmp_path / "x.png"
    data = path.read_bytes()
    assert len(data) > 1000
    assert data[:8] == b"\x89PNG\r\n\x1a\n"


def test_analytic_gradient_matches_native_reference_in_free_fall(task_and_sim, report):
    """Independent of the task's initial states: the mass starts 2 m higher (batch and horizon
    as in the fixture, so the compiled analytic gradient is reused)."""
    task, sim = task_and_sim
    qp, qv = task.initial_states(sim, BATCH, SEED + 1)
    qp = qp + 2.0
    center = (np.array([2.5]), np.zeros(1))  # the reference's extra states are high too
    problem = GradProblem(
        sim,
        default_objective(sim.mj_model),
        qp,
        qv,
        np.zeros((HORIZON, 0)),
        center=center,
        noise=(task.qpos_noise, task.qvel_noise),
        seed=SEED + 1,
    )
    r = run_report(problem, {}, seed=SEED, reference=True, repeats=1)
    assert list(r["estimators"]) == ["analytic"]
    g = np.asarray(r["estimators"]["analytic"]["mean"])
    g_ref = np.asarray(r["reference"]["gradient"])
    assert cosine(g, g_ref) > 0.999
    assert np.abs(g - g_ref).max() / np.abs(g_ref).max() < 1e-6
    # closed form dJ/dv0 = n dt + w (state independent, so the variance vanishes)
    n = HORIZON * sim.substeps
    closed = n * sim.physics_dt + VELOCITY_WEIGHT
    np.testing.assert_allclose(g, [closed], rtol=1e-9)
    np.testing.assert_allclose(g_ref, [closed], rtol=1e-6)
    assert r["estimators"]["analytic"]["summed_variance"] < 1e-20


def test_task_problem_reference_states_follow_the_task_distribution():
    """The reference's extra initial states of a built-in task come from the task's own sampler
    (no quaternion noise), not from the generic tangent-noise sampler."""
    from bcg.diagnostics.report import task_problem

    task = tasks.get("bouncing_ball")
    p = task_problem(task, "stiff", batch=4, seed=3)
    q, v = p.more_states(6, 11)
    q_task, v_task = task.initial_states(p.sim, 6, 11)
    np.testing.assert_array_equal(q, q_task)
    np.testing.assert_array_equal(v, v_task)
    np.testing.assert_array_equal(q[:, 3:7], np.tile([1.0, 0, 0, 0], (6, 1)))
