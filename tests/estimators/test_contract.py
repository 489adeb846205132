"""The step-estimator contract, diffrax style: *every* registered step-level estimator, on
problems where its gradient must equal the true one (free flight, soft contact), against an
independent reference (central finite differences of native MuJoCo, :mod:`bcg.diagnostics.
reference`) and against the analytic gradient. A new estimator is tested by registering it
(:func:`bcg.estimators.register_estimator`) or by adding its import path to ``EXTRA``.

The batch holds 2 initial states of each problem (a free-floating two-link body with a motor),
6 control steps; the gradient is w.r.t. the root's initial velocity (6) and the controls (6): the
report's objective (:mod:`bcg.diagnostics.objective`). The contact solver runs 4 iterations:
with MJX's single iteration (``load``'s default) a body resting on soft contact is far from
converged and its own gradient was 3e4 times native MuJoCo's FD gradient (measured; see
docs/troubleshooting.md), so no estimator could agree there.
"""

import dataclasses

import jax
import numpy as np
import pytest

from bcg import estimators as E
from bcg.diagnostics.reference import reference_gradient
from bcg.diagnostics.report import cosine, gradient_function, make_problem
from bcg.sim import load

EXTRA = ["user_estimator:make_clipped"]  # import paths of estimators outside the library
# parameters for the contract where the defaults smooth on purpose: a smoothing estimator
# agrees with the true gradient of a smooth problem in the limit of small smoothing
PARAMS = {"global-bundle": {"sigma": 1e-5}}
# variants of an estimator the fast suite already holds to the contract (``bcg``), that no
# training recipe uses, or the user-written one (the fast suite runs it in ``bcg grad`` and
# ``bcg train``, tests/learners/test_user_task.py): each costs a 1-3 minute compile here, so
# they run with --full
FULL_ONLY = {"bcg-stein", "global-bundle", "user_estimator:make_clipped"}

# A free-floating ball with a hinged arm and a motor. Free flight: 1 m above the floor. Soft
# contact: dropped from 7 cm onto MuJoCo's default contact (20 ms time constant), landing in the
# third control step. Both kinds of state are in one batch, so that each estimator compiles once.
ROBOT = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body name="torso">
      <freejoint/>
      <geom type="sphere" size=".05" mass="2"/>
      <body pos=".05 0 0">
        <joint name="arm" type="hinge" axis="0 1 0" damping=".1"/>
        <geom type="capsule" fromto="0 0 0 .2 0 0" size=".02" mass=".3" contype="0"
              conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="arm" gear="2" ctrlrange="-1 1"/></actuator>
</mujoco>
"""
PROBLEMS = {"free-flight": (1.0, slice(0, 2)), "soft-contact": (0.07, slice(2, 4))}
HORIZON = 6


def step_estimators() -> list[str]:
    return [n for n in (*E.names(), *EXTRA) if E.is_step_level(E.make(n))]


@pytest.fixture(scope="module")
def batch():
    """(problem of 4 states: 2 in free flight, 2 landing; {label: native FD reference of the
    label's states}; the analytic per-state gradients)."""
    sim = load(ROBOT, stiffness="soft", substeps=2, solver_iterations=4)
    ctrl = 0.5 * np.sin(np.arange(HORIZON) / 2.0)[:, None]
    parts, refs = [], {}
    for label, (z, _) in PROBLEMS.items():
        qpos = np.array(sim.mj_model.qpos0)
        qpos[2] = z
        p = make_problem(
            sim,
            batch=2,
            horizon=HORIZON,
            seed=1,
            qpos_noise=0.0,
            ctrl=ctrl,
            qpos=qpos,
            qvel=np.zeros(sim.nv),
        )
        r = reference_gradient(sim, p.spec, p.qpos0, p.qvel0, p.ctrl, h_vel=1e-4, h_ctrl=1e-4)
        refs[label] = np.concatenate([r["grad_vel"], np.ravel(r["grad_ctrl"])])
        parts.append(p)
    p = dataclasses.replace(
        parts[0],
        qpos0=np.concatenate([q.qpos0 for q in parts]),
        qvel0=np.concatenate([q.qvel0 for q in parts]),
    )
    return p, refs, _gradients(p, E.make("analytic"))


def _gradients(p, est):
    g = gradient_function(p, est)
    G, _, _ = g(p.sim.mjx_model, p.qpos0, p.qvel0, p.ctrl, jax.random.PRNGKey(0))
    return np.asarray(G)


def test_the_contract_names_every_builtin_step_estimator():
    names = step_estimators()
    assert {"analytic", "bcg", "bcg-stein", "global-bundle"} <= set(names)
    assert "zeroth-order" not in names and "user_estimator:make_clipped" in names


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in FULL_ONLY else n for n in step_estimators()],
)
def test_step_estimator_matches_finite_differences(batch, name):
    p, refs, G_an = batch
    G = G_an if name == "analytic" else _gradients(p, E.make(name, **PARAMS.get(name, {})))
    assert np.all(np.isfinite(G))
    for label, (_, rows) in PROBLEMS.items():
        g, ga, ref = G[rows].mean(0), G_an[rows].mean(0), refs[label]
        assert np.linalg.norm(ref) > 0.05  # a gradient worth comparing
        assert cosine(g, ref) > 0.999, (label, name, g, ref)
        np.testing.assert_allclose(g, ref, rtol=0, atol=0.01 * np.linalg.norm(ref), err_msg=label)
        np.testing.assert_allclose(g, ga, rtol=0, atol=0.01 * np.linalg.norm(ga), err_msg=label)
