"""BPTT / APG: differentiate the return of whole (short) episodes through the simulator.

Per iteration, E environments start fresh episodes (reset states from the iteration key) and
run ``horizon`` steps (default: the episode length) with the stochastic actor of
:mod:`bcg.learners.networks`; only the first episode of each environment counts:

    L = -(1 / (h E)) sum_env sum_{t < T_env} gamma^t r_t,

T_env the step at which the environment's first episode ended (terminated or truncated), h
otherwise. The gradient of L through the estimator's steps updates the actor (grad-norm clip,
Adam, linearly decayed lr); observations are normalised with a running mean-std. There is no
critic and no bootstrap. An environment that diverged (non-finite state) anywhere in its
rollout is left out of L (the mean over the others, :func:`bcg.learners.rollout.masked_env_sum`)
and of the normaliser update (``masked_fraction``); a non-finite gradient that remains skips the
update (``skipped_updates``, ``actor_skipped``).

Several devices (``BPTT(...).sharded(devices)`` / ``bcg train --devices N``): the E fresh
environments of every iteration are split over a device mesh (E / D per device, ``num_envs``
divisible by D) and the actor, optimiser state and normaliser are replicated; the loss keeps
its global definition (GSPMD), so the update equals the single-device one up to float
summation order. Several hosts: ``jax.distributed.initialize()`` first, then the same script
on every host (untested; see :mod:`bcg.learners.parallel`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bcg.envs.base import ContactEnv
from bcg.learners import networks as nets
from bcg.learners import normalization as rms
from bcg.learners.base import Learner
from bcg.learners.common import (
    clean_actor_gradient,
    global_norm,
    guarded_step,
    linear_lr,
    make_optimizer,
)
from bcg.learners.rollout import masked_env_sum, reset, rollout, window_keep
from bcg.learners.shac import trajectory_metrics


@dataclasses.dataclass(frozen=True)
class BPTTConfig:
    num_envs: int = 16
    horizon: int | None = None  # None: the environment's episode length
    gamma: float = 0.99
    actor_lr: float = 1e-3
    lr_end: float = 1e-5
    betas: tuple[float, float] = (0.7, 0.95)
    actor_clip: float = 1.0
    actor_hidden: tuple[int, ...] = (64, 64)
    init_log_std: float = 0.0
    normalize_obs: bool = True


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    actor: dict
    actor_opt: tuple
    obs_rms: rms.RunningMeanStd
    key: jax.Array
    iteration: jax.Array
    skipped_updates: jax.Array


def episode_objective(rewards, terminated, truncated, gamma):
    """L from (h, E) arrays: discounted return of each environment's first episode."""
    return jnp.sum(episode_objective_per_env(rewards, terminated, truncated, gamma))


def episode_objective_per_env(rewards, terminated, truncated, gamma):
    """Environment e's share L_e of L, shape (E,)."""
    h, E = rewards.shape
    done = terminated | truncated
    ended_before = jnp.cumsum(done, axis=0) - done  # episodes finished before step t
    alive = ended_before == 0
    disc = gamma ** jnp.arange(h, dtype=rewards.dtype)
    return -jnp.sum(jnp.where(alive, disc[:, None] * rewards, 0.0), axis=0) / (h * E)


class BPTT(Learner):
    name = "bptt"

    def __init__(
        self,
        env: ContactEnv,
        estimator,
        config: BPTTConfig | None = None,
        *,
        iterations: int = 1000,
    ):
        self.env = env
        self.estimator = estimator
        self.cfg = config or BPTTConfig()
        self.iterations = int(iterations)
        c = self.cfg
        self.horizon = int(c.horizon or env.episode_length)
        self.actor = nets.Actor(env.action_size, c.actor_hidden, c.init_log_std)
        self.tx = make_optimizer(c.actor_clip, c.betas)

    @property
    def env_steps_per_iteration(self) -> int:
        return self.cfg.num_envs * self.horizon

    @property
    def actor_optimizer(self):
        return self.tx

    def init(self, key) -> State:
        n_obs = self.env.observation_size
        k_a, key = jax.random.split(key)
        actor = self.actor.init(k_a, jnp.zeros((1, n_obs), jnp.float32))
        return State(
            actor=actor,
            actor_opt=self.tx.init(actor),
            obs_rms=rms.init((n_obs,)),
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            skipped_updates=jnp.zeros((), jnp.int32),
        )

    def actor_loss(self, actor_params, state: State, key, probe=None):
        c = self.cfg
        k_reset, k_roll = jax.random.split(key)
        env0 = reset(self.env, self.estimator, k_reset, c.num_envs)
        env_state, traj = rollout(
            self.env,
            self.estimator,
            self._sampling_policy(state.obs_rms),
            actor_params,
            env0,
            k_roll,
            self.horizon,
            mesh=self.mesh,
            probe=probe,
        )
        per_env = episode_objective_per_env(traj.rewards, traj.terminated, traj.truncated, c.gamma)
        loss = masked_env_sum(per_env, window_keep(traj.diverged))
        return loss, (env_state, traj)

    def iteration(self, state: State):
        c = self.cfg
        key, k_roll = jax.random.split(state.key)
        probe = jnp.zeros((c.num_envs,), jnp.float32)
        (loss, (env_state, traj)), (grads, zeroed) = jax.value_and_grad(
            self.actor_loss, argnums=(0, 3), has_aux=True
        )(state.actor, state, k_roll, probe)
        clean = clean_actor_gradient(zeroed, window_keep(traj.diverged))
        lr = linear_lr(c.actor_lr, c.lr_end, state.iteration, self.iterations)
        actor, opt, ok = guarded_step(self.tx, state.actor, state.actor_opt, grads, lr, loss, clean)
        traj = jax.lax.stop_gradient(traj)
        skipped = state.skipped_updates + (~ok).astype(jnp.int32)
        keep = window_keep(traj.diverged)
        w = jnp.broadcast_to(keep[None, :], traj.rewards.shape)
        new = State(
            actor=actor,
            actor_opt=opt,
            obs_rms=rms.update(state.obs_rms, traj.obs, w) if c.normalize_obs else state.obs_rms,
            key=key,
            iteration=state.iteration + 1,
            skipped_updates=skipped,
        )
        done = traj.terminated | traj.truncated
        first_len = jnp.where(done.any(0), jnp.argmax(done, axis=0) + 1, self.horizon)
        metrics = {
            "actor_loss": loss,
            "actor_grad_norm": jnp.where(clean, global_norm(grads), jnp.nan),
            "actor_lr": lr,
            "action_std": jnp.mean(jnp.exp(actor["params"]["log_std"])),
            "skipped_updates": skipped,
            "actor_skipped": (~ok).astype(jnp.int32),
            **trajectory_metrics(traj, env_state),
            # the first episode of every env (undiscounted), replacing the running stats
            "episode_return": -episode_objective(traj.rewards, traj.terminated, traj.truncated, 1.0)
            * self.horizon,
            "episode_length": jnp.mean(first_len.astype(jnp.float32)),
        }
        return new, metrics
