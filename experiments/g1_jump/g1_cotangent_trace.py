"""Where one environment's G1 actor gradient explodes: its cotangents step by step.

    python experiments/g1_jump/g1_cotangent_trace.py --point initial --key 5 --env 30

From the same policy state and draw as :mod:`g1_gradient_outliers` (SHAC's window of 64
environments, analytic step), the gradient of environment e's actor loss L_e with respect to

* the state entering step t, lambda_t = dL_e / d(qpos_t, qvel_t) (zero perturbations added to
  the state before each step), and
* the action of step t, dL_e / da_t,

with, per step, the contact and joint-limit state after it: the largest group mean load
(:class:`bcg.estimators.trigger.Trigger`, N), the largest contact force, the deepest
penetration, the number of active contacts and of joints beyond their range. A jump of
|lambda_t| / |lambda_{t+1}| marks the step whose Jacobian amplifies the gradient (reverse mode:
lambda_t = dr_t/dx_t + lambda_{t+1} dx_{t+1}/dx_t).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import jax

jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/bcg/jax"))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_point_arguments, learner_state, restore_point, strong  # noqa: E402

from bcg.estimators.stats import StepStats  # noqa: E402
from bcg.estimators.trigger import Trigger  # noqa: E402
from bcg.learners import registry  # noqa: E402
from bcg.learners.rollout import rollout  # noqa: E402
from bcg.sim import mjx_compat  # noqa: E402
from bcg.sim.step import control_step  # noqa: E402


class PerturbedStep:
    """The plain step applied to (qpos + dq[t], qvel + dv[t]); statistics: contact signals.

    The carry is (data, t) with t the per-environment step counter, so ``dq``, ``dv`` (T, E, n)
    are indexed by each environment's own step (a reset restarts it)."""

    name = "analytic"

    def __init__(self, dq, dv, limited, lo, hi, adr):
        self.dq, self.dv = dq, dv
        self.limited, self.lo, self.hi, self.adr = limited, lo, hi, adr

    def init(self, sim, data):
        return data, jnp.zeros(data.qpos.shape[:1], jnp.int32)

    def state(self, carry):
        return carry[0]

    def step(self, sim, carry, ctrl, key):
        data, t = carry
        e = jnp.arange(t.shape[0])
        data = data.replace(qpos=data.qpos + self.dq[t, e], qvel=data.qvel + self.dv[t, e])
        out, f = jax.vmap(lambda d, u: control_step(sim, d, u, per_substep=True))(data, ctrl)
        load = jax.vmap(lambda d, ff: Trigger().loads(sim, d, ff)[0].max(-1))(out, f)
        peak = jnp.max(f, axis=(1, 2)) if f.shape[-1] else jnp.zeros_like(load)
        dist = mjx_compat.contacts(out).dist
        active = dist < 0
        depth = jnp.max(jnp.where(active, -dist, 0.0), -1)
        q = out.qpos[:, self.adr]
        beyond = jnp.maximum(self.lo - q, q - self.hi) > 0
        n_lim = jnp.sum(beyond & self.limited, -1)
        stats = StepStats(
            jnp.stack([load, peak, depth, jnp.sum(active, -1), n_lim, out.qpos[:, 2]], -1),
            jnp.zeros((), jnp.int32),
            jnp.zeros((), jnp.int32),
        )
        return (out.replace(time=data.time + sim.control_dt), t + 1), stats


def growth_summary(lam, sig, term, weight):
    """Per-step growth of the cotangent norm, r_t = |lambda_t| / |lambda_{t+1}| (the
    amplification of step t), over all environments and steps 0 < t < T-1 with no termination
    at t. Steps are grouped two ways by the contacts before and after step t: by load (no
    active contact; contact with the largest group mean load below 3 x weight; at or above it)
    and by the contact count (free; unchanged; changed: a touchdown or a release). Per group:
    its share of the steps, the geometric mean of r_t, and its share of the steps with r_t > 3
    (single-step jumps)."""
    T = lam.shape[0]
    r = lam[:-1] / np.maximum(lam[1:], 1e-30)
    ok = (lam[1:] > 0) & ~term[:-1]
    ok[0] = False  # no contact count before step 0
    ncon, load = sig[:-1, :, 3], sig[:-1, :, 0]
    before = np.concatenate([ncon[:1], ncon[:-1]], 0)
    jump = ok & (r > 3)
    groups = {
        "free": (ncon == 0) & (before == 0),
        "contact_below_3w": (ncon > 0) & (load < 3 * weight),
        "contact_above_3w": (ncon > 0) & (load >= 3 * weight),
        "count_unchanged": (ncon > 0) & (ncon == before),
        "count_changed": ncon != before,
    }
    out = {"steps": int(ok.sum()), "jumps_r_above_3": int(jump.sum()), "horizon": T}
    for name, mask in groups.items():
        m = mask & ok
        out[name] = {
            "share": float(m.sum() / max(ok.sum(), 1)),
            "geomean_growth": float(np.exp(np.mean(np.log(r[m])))) if m.any() else None,
            "share_of_jumps": float((m & jump).sum() / max(jump.sum(), 1)),
        }
    total = np.log(lam[0] / np.maximum(lam[-1], 1e-30))
    out["median_total_growth"] = float(np.exp(np.median(total[np.isfinite(total)])))
    return out


def directional_fd(per_env_losses, z, GA, act, env, steps):
    """Central differences (L_e(a + h d) - L_e(a - h d)) / 2h along d = g / |g|, g = dL_e / da
    (all T steps' actions of environment e), against |g|: for the traced environment and the
    batch's median one. Reverse mode is exact for the sampled trajectory; a ratio near 1 at
    an h of the policy's action scale says the sensitivity is the dynamics', not a kink's."""
    f = jax.jit(lambda zz: per_env_losses(zz)[0])
    med = int(np.argsort(act)[len(act) // 2])
    out = {}
    for e in dict.fromkeys((env, med)):
        g = GA[:, e]
        d = np.zeros_like(GA)
        d[:, e] = g / np.linalg.norm(g)
        rows = []
        for h in steps:
            zp = (z[0], z[1], z[2] + h * jnp.asarray(d))
            zm = (z[0], z[1], z[2] - h * jnp.asarray(d))
            fdv = float((np.asarray(f(zp))[e] - np.asarray(f(zm))[e]) / (2 * h))
            rows.append({"h": h, "fd": fdv, "ratio": fdv / float(np.linalg.norm(g))})
            gn, ratio = np.linalg.norm(g), rows[-1]["ratio"]
            print(f"env {e}: h {h:g} fd {fdv:.4g} |g| {gn:.4g} ratio {ratio:.3f}", flush=True)
        out[str(e)] = rows
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_point_arguments(p)
    p.add_argument("--env", type=int, help="environment to print (default: largest |dL/da|)")
    p.add_argument("--open-loop", action="store_true", help="no gradient through the observations")
    p.add_argument("--stiffness", help="contact stiffness preset (default: the run's)")
    p.add_argument(
        "--fd",
        default="",
        help="comma-separated steps h: central differences of L_e along its action gradient",
    )
    p.add_argument("--out", help="JSON output")
    a = p.parse_args(argv)
    print("command: python experiments/g1_jump/g1_cotangent_trace.py " + " ".join(sys.argv[1:]))
    run_dir = Path(a.run)
    run = json.loads((run_dir / "run.json").read_text())
    if a.stiffness:
        run["stiffness"] = a.stiffness
    _, lrn = registry.build({**run, "estimator": "analytic", "estimator_params": {}})
    key = jax.random.PRNGKey(a.seed)
    s = strong(learner_state(lrn, restore_point(lrn, a, key), lrn, key))
    sim = lrn.env.sim
    m = sim.mj_model
    hinge = np.flatnonzero(m.jnt_type == 3)  # mjJNT_HINGE
    adr = jnp.asarray(m.jnt_qposadr[hinge])
    limited = jnp.asarray(m.jnt_limited[hinge].astype(bool))
    lo, hi = (jnp.asarray(m.jnt_range[hinge, i]) for i in (0, 1))
    T, E = lrn.cfg.horizon, s.env.step.shape[0]
    nu = lrn.env.action_size
    window_key = jax.random.fold_in(key, a.key)
    base_policy = lrn._sampling_policy(s.obs_rms)

    def per_env_losses(z):
        dq, dv, da = z
        est = PerturbedStep(dq, dv, limited, lo, hi, adr)
        data = lrn.estimator.state(s.env.carry)
        env0 = s.env._replace(carry=est.init(sim, data))

        def policy(params, obs, t, k):
            if a.open_loop:
                obs = jax.lax.stop_gradient(obs)
            return base_policy(params, obs, t, k) + da[t]

        _, traj = rollout(lrn.env, est, policy, s.actor, env0, window_key, T)
        per_env = lrn.per_env_actor_objective(s, traj)
        return per_env, (traj.stats.triggered, traj.terminated)

    def loss(z):
        # environments are independent: d(sum_e L_e) / dz[t, e] = dL_e / dz[t, e]
        per_env, aux = per_env_losses(z)
        return jnp.sum(per_env), aux

    dt = s.env.carry.qpos.dtype
    z = (
        jnp.zeros((T, E, sim.mj_model.nq), dt),
        jnp.zeros((T, E, sim.mj_model.nv), dt),
        jnp.zeros((T, E, nu), jnp.float32),
    )
    (g, (sig, term)) = jax.jit(jax.grad(loss, has_aux=True))(z)
    GQ, GV, GA = (np.asarray(x) for x in g)
    SIG, TERM = np.asarray(sig), np.asarray(term)
    LAM = np.sqrt((GQ**2).sum(-1) + (GV**2).sum(-1))  # (T, E)
    act = np.linalg.norm(GA, axis=-1).sum(0)  # (E,)
    env = int(np.argmax(act)) if a.env is None else a.env
    summary = growth_summary(LAM, SIG, TERM, sim.total_weight())
    print(f"all envs: {json.dumps(summary)}")
    print(f"env {env}: sum_t |dL/da_t| {act[env]:.4g} (batch median {np.median(act):.4g})")
    gq, gv, ga, sig, term, lam = (x[:, env] for x in (GQ, GV, GA, SIG, TERM, LAM))
    rows = []
    print(" t   |lam_t|    ratio  |dL/da_t|  load(N)  peakF(N)  depth(mm)  ncon nlim  z(m)  term")
    for t in range(T):
        ratio = lam[t] / lam[t + 1] if t + 1 < T and lam[t + 1] > 0 else float("nan")
        row = {
            "t": t,
            "lambda_norm": float(lam[t]),
            "lambda_qpos_norm": float(np.linalg.norm(gq[t])),
            "lambda_qvel_norm": float(np.linalg.norm(gv[t])),
            "amplification": float(ratio),
            "action_cotangent_norm": float(np.linalg.norm(ga[t])),
            "group_load": float(sig[t, 0]),
            "peak_contact_force": float(sig[t, 1]),
            "depth_mm": float(1e3 * sig[t, 2]),
            "active_contacts": int(sig[t, 3]),
            "joints_beyond_range": int(sig[t, 4]),
            "base_height": float(sig[t, 5]),
            "terminated": bool(term[t]),
        }
        rows.append(row)
        print(
            f"{t:2d} {lam[t]:10.4g} {ratio:8.3g} {row['action_cotangent_norm']:10.4g} "
            f"{sig[t, 0]:8.1f} {sig[t, 1]:9.1f} {1e3 * sig[t, 2]:9.2f} {int(sig[t, 3]):5d} "
            f"{int(sig[t, 4]):4d} {sig[t, 5]:5.3f} {int(term[t])}",
            flush=True,
        )
    top = np.argsort(-np.abs(gv).max(0))[:6]
    names = [m.joint(int(j)).name for j in range(m.njnt)]
    dof_joint = [names[int(m.dof_jntid[i])] for i in range(m.nv)]
    largest = [(dof_joint[i], float(np.abs(gv[:, i]).max())) for i in top]
    print("largest qvel cotangent components:", largest)
    fd = {}
    if a.fd:
        fd = directional_fd(per_env_losses, z, GA, act, env, [float(h) for h in a.fd.split(",")])
    if a.out:
        out = {
            "finite_differences": fd,
            "command": "python experiments/g1_jump/g1_cotangent_trace.py " + " ".join(sys.argv[1:]),
            "weight_newton": sim.total_weight(),
            "summary": summary,
            "env": env,
            "rows": rows,
            "largest_qvel_cotangents": largest,
        }
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
