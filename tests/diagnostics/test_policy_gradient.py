"""Closed-loop policy gradients: MJX per-sample gradients against native-MuJoCo finite
differences where the dynamics are smooth (pogo in flight: no contact)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg import estimators as E
from bcg.diagnostics.policy_gradient import (
    PolicyProblem,
    gradient_function,
    native_objective,
    reference_gradient,
    report,
)
from bcg.envs import tasks

THETA = np.array([0.1, -0.2, 2.0, 0.3, 0.2])


@pytest.fixture(scope="module")
def flight():
    """Two pogo states high in the air moving up: no contact within 5 control steps."""
    sim = tasks.get("pogo").load("gated")
    q = np.array([[1.0, 0.0], [1.1, 0.02]])
    v = np.array([[1.0, 0.1], [0.5, -0.2]])
    return PolicyProblem(sim, q, v, THETA, horizon=5)


def test_mjx_gradient_matches_native_fd_in_flight(flight):
    g = gradient_function(flight, E.make("analytic"))
    theta = jnp.broadcast_to(jnp.asarray(THETA), (2, THETA.size))
    G, J, bundled = g(theta, flight.qpos0, flight.qvel0, jax.random.PRNGKey(0))
    np.testing.assert_allclose(
        np.asarray(J), native_objective(flight, THETA, flight.qpos0, flight.qvel0), atol=1e-6
    )
    for b in range(2):
        one = PolicyProblem(flight.sim, flight.qpos0[b : b + 1], flight.qvel0[b : b + 1], THETA, 5)
        ref = reference_gradient(one, one.qpos0, one.qvel0, h=1e-5)
        np.testing.assert_allclose(np.asarray(G[b]), ref, rtol=1e-3, atol=1e-6)
    assert int(bundled) == 0


def test_native_objective_refuses_a_reset_rollout(flight):
    """MuJoCo resets a blown-up simulation and only warns: the closed-loop objective must
    raise instead of averaging heights from the reset state."""
    v = flight.qvel0.copy()
    v[1] = 1e11  # beyond mjMAXVAL: the first mj_step resets the data
    with pytest.raises(RuntimeError, match="initial state 1 diverged"):
        native_objective(flight, THETA, flight.qpos0, v)


def test_report_fields_and_bad_inputs(flight):
    seen = []
    rep = report(
        flight,
        {"analytic": E.make("analytic")},
        (flight.qpos0, flight.qvel0),
        on_result=lambda name, entry: seen.append((name, entry)),
    )
    e = rep["estimators"]["analytic"]
    assert seen == [("analytic", e)]  # reported as it finished
    assert e["cosine_to_reference"] == pytest.approx(1.0, abs=1e-3)
    assert e["nan_count"] == 0 and e["bundled_fraction"] == 0.0
    se = np.asarray(e["standard_error"])
    assert se.shape == (THETA.size,) and np.all(np.isfinite(se)) and np.all(se >= 0)
    assert np.all(np.abs(np.asarray(e["mean"]) - rep["reference"]) <= 3 * se + 1e-4)
    with pytest.raises(ValueError, match="theta must have"):
        PolicyProblem(flight.sim, flight.qpos0, flight.qvel0, THETA[:3], 5)
    with pytest.raises(ValueError, match="horizon"):
        PolicyProblem(flight.sim, flight.qpos0, flight.qvel0, THETA, 0)
    with pytest.raises(ValueError, match="step-level"):
        report(flight, {"zo": E.make("zeroth-order")}, (flight.qpos0, flight.qvel0))
