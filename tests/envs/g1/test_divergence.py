"""G1 forward simulation under random PD targets (the initial SHAC policy) must not diverge.

With MuJoCo's warm start and one solver iteration (the differentiable MJX model's setting) the
G1's arm joints oscillate up to 1e3 rad/s and NaN in about 1e-4 to 1e-3 of the env-steps (see
``bcg.envs.g1.model``, "Why no warm start"; ``benchmarks/g1_divergence.py``). The fast tests
replay rollouts that diverged that way in native MuJoCo run with the MJX model's solver settings
(iterations, line search, disable flags); the slow one rolls a batch out in MJX itself.
"""

import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from bcg.envs import make_env

# (contact stiffness, numpy seed) of random-action rollouts that diverged within 50 control
# steps in native MuJoCo with warm start + 1 Newton iteration (ls_iterations 8)
DIVERGED_WITH_WARM_START = [("soft", 87), ("soft", 153), ("soft", 175), ("stiff", 779)]
MAX_JOINT_SPEED = 200.0  # rad/s; bounded runs stay below ~60, diverging ones pass 1e3


def _random_action_rollout(env, m, seed, steps=50):
    """Largest joint speed of a random-action rollout (a = tanh(N(0, 1))) from a reference
    frame, native MuJoCo; inf once not finite."""
    q0, span, lo, hi = env._action_map
    ref = env.reference
    rng = np.random.default_rng(seed)
    k = int(rng.integers(0, env.num_frames - 1))
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = ref.qpos[k], ref.qvel[k]
    d.act[:] = np.clip(ref.qpos[k, 7:], lo, hi)
    worst = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(steps):
            d.ctrl[:] = np.clip(q0 + span * np.tanh(rng.normal(size=29)), lo, hi)
            for _ in range(env.sim.substeps):
                mujoco.mj_step(m, d)
            if not np.all(np.isfinite(d.qvel)):
                return np.inf
            worst = max(worst, float(np.max(np.abs(d.qvel[6:]))))
            if worst > MAX_JOINT_SPEED or d.qpos[2] < env.min_height:
                break
    return worst


@pytest.mark.parametrize("stiffness", ["soft", "stiff"])
def test_mjx_solver_is_not_warm_started(stiffness):
    env = make_env("g1_jump", stiffness=stiffness)
    flag = int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)
    assert int(env.sim.mjx_model.opt.disableflags) & flag
    assert not int(env.sim.mj_model.opt.disableflags) & flag  # native: MuJoCo's default


@pytest.mark.parametrize("stiffness,seed", DIVERGED_WITH_WARM_START)
def test_random_targets_stay_bounded_with_the_mjx_solver_settings(stiffness, seed):
    env = make_env("g1_jump", stiffness=stiffness)
    worst = _random_action_rollout(env, env.sim.native_with_mjx_solver(), seed)
    assert worst < MAX_JOINT_SPEED, f"joint speed {worst:.3g} rad/s"


@pytest.mark.slow
def test_mjx_random_targets_do_not_diverge():
    """MJX G1 compile (slow, ~2 min): 64 envs x 100 control steps of the initial SHAC policy's
    random actions on soft contact, with resets: every state finite and every joint slower
    than 200 rad/s (with the warm start: 4-5 divergences expected, joint speeds up to 1e3)."""
    from bcg.sim.step import control_step

    env = make_env("g1_jump", stiffness="soft")
    sim, E = env.sim, 64
    init = jax.vmap(env.initial_data)
    step = jax.vmap(lambda d, u: control_step(sim, d, u)[0])

    def body(d, k):
        ka, kr = jax.random.split(k)
        a = jnp.tanh(jax.random.normal(ka, (E, sim.nu)))
        nxt = step(d, jax.vmap(env.action_to_ctrl)(a))
        nxt = nxt.replace(time=d.time + sim.control_dt)
        finite = jnp.isfinite(nxt.qpos).all(-1) & jnp.isfinite(nxt.qvel).all(-1)
        speed = jnp.where(finite, jnp.max(jnp.abs(nxt.qvel[:, 6:]), -1), jnp.inf)
        done = jax.vmap(env.terminated)(nxt) | ~finite | (nxt.time >= 3.0)
        fresh = init(jax.random.split(kr, E))
        nxt = jax.tree_util.tree_map(
            lambda x, y: jnp.where(done.reshape(done.shape + (1,) * (x.ndim - 1)), x, y),
            fresh,
            nxt,
        )
        return nxt, speed

    @jax.jit
    def run(key):
        k0, k1 = jax.random.split(key)
        return jax.lax.scan(body, init(jax.random.split(k0, E)), jax.random.split(k1, 100))[1]

    speed = np.asarray(run(jax.random.PRNGKey(0)))
    assert np.all(np.isfinite(speed)), f"{int(np.sum(~np.isfinite(speed)))} env-steps diverged"
    assert speed.max() < MAX_JOINT_SPEED, f"joint speed {speed.max():.3g} rad/s"
