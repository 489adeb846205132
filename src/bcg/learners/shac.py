"""SHAC: short-horizon actor-critic through a differentiable simulator (Xu et al. 2022), with
the gradient estimator of the physics step pluggable (``analytic``, ``bcg``, ...).

Per iteration, on E environments that continue across iterations (the paper's settings,
docs/method.md "Learner"):

1. Roll h steps (default 32) with the stochastic actor a_t = tanh(mu(o_t) + sigma eps_t)
   through the estimator; rewards are scaled by the running std of the discounted return,
   r_t <- r_t / std(R).
2. Actor loss (differentiated through the rollout), per environment summed over its episode
   pieces inside the window, with the discount restarting at every reset:

       L = -(1 / (h E)) sum_env [ sum_t gamma^t r_t + gamma^{t_end + 1} V(s'_{t_end + 1}) ]

   V(s') is added at the end of every piece: at the window end (t_end = h - 1) and at a
   truncation (time limit: V of the pre-reset state), but not at a termination (failure:
   value 0). V is the *mean* of the target-critic ensemble.
3. Actor step: grad-norm clip 1, Adam (0.7, 0.95), lr 5e-3 decayed linearly to 1e-5.
4. Critic targets: TD(lambda) (lambda 0.95) on the same window (no gradient),

       G_t = r_t + gamma [ d_t V_t' + (1 - d_t)((1 - lambda) V_t' + lambda G_{t+1}) ],
       G_{h-1} = r_{h-1} + gamma V'_{h-1},   V_t' = (1 - term_t) V_target(s'_{t+1}),

   d_t = done (terminated or truncated) at step t.
5. Critic: every one of K = 3 ensemble members regresses G on normalised o_t, minimising
   mean_k mean_batch (V_k(o) - G)^2, for ``critic_iterations`` passes over
   ``critic_minibatches`` shuffled minibatches (grad clip 10, Adam (0.7, 0.95), lr 2e-3
   decayed linearly to 1e-5). Target critic: theta' <- alpha theta' + (1 - alpha) theta
   (alpha 0.2, as SHAC).
6. Running mean-std of observations (normalising every network input) and of the discounted
   return R_t = gamma R_{t-1} + r_t (reset at episode ends) are updated from the window.

7. Learned reward (only with ``reward_model=`` given, e.g. ``g1_jump(reward="add").reward_model``,
   :mod:`bcg.envs.g1.add`): its state (discriminator parameters phi and optimiser moments) is
   ``State.reward_state`` (checkpointed with the rest). The window's rewards use
   ``stop_gradient(phi)`` (gradients flow through the discriminator into the simulated state,
   never into phi), and after the actor and critic updates ``reward_model.update`` trains phi
   on the window's ``reward_inputs`` (weight 0 for diverged states).

Diverged environments (a non-finite state in the window, :mod:`bcg.learners.rollout`): they
are reset at the step they diverge, and the whole environment is left out of this window's
actor loss (L becomes the mean over the other environments, ``masked_env_sum``; their gradient
is applied unchanged), of the critic regression, of the reward model's samples and of the
normaliser updates. ``masked_fraction`` is the fraction of the window's env-steps left out.
A non-finite actor or critic gradient that remains skips that update (``actor_skipped`` 0/1 per
iteration, ``skipped_updates`` cumulative over actor and critic steps).
Defaults below are CPU-demo sizes; ``SHACConfig.paper()`` has the paper's.

Several devices (``SHAC(...).sharded(devices)`` / ``bcg train --devices N``): the E
environments (their estimator carry, episode counters and return streams) are split over a
device mesh, E / D per device, and the networks, optimiser states, normalisers and key are
replicated; the actor loss, TD(lambda) targets and critic minibatches keep their global
definition (GSPMD all-reduces the sums over environments), so an iteration equals the
single-device one up to float summation order. ``num_envs`` must be divisible by D. Across
hosts: run the same script on every host after ``jax.distributed.initialize()`` (the mesh
then spans all processes' devices); untested, see :mod:`bcg.learners.parallel`.
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
from bcg.learners.rollout import (
    EnvState,
    Trajectory,
    masked_env_sum,
    reset,
    rollout,
    window_keep,
)


@dataclasses.dataclass(frozen=True)
class SHACConfig:
    num_envs: int = 16
    horizon: int = 32
    gamma: float = 0.99
    lam: float = 0.95
    actor_lr: float = 5e-3
    critic_lr: float = 2e-3
    lr_end: float = 1e-5
    betas: tuple[float, float] = (0.7, 0.95)
    actor_clip: float = 1.0
    critic_clip: float = 10.0
    critic_ensemble: int = 3
    critic_iterations: int = 16
    critic_minibatches: int = 4
    target_alpha: float = 0.2
    actor_hidden: tuple[int, ...] = (64, 64)
    critic_hidden: tuple[int, ...] = (64, 64)
    init_log_std: float = 0.0
    normalize_obs: bool = True
    normalize_returns: bool = True
    critic_warmup: int = 0  # first iterations with actor learning rate 0 (a fresh critic)

    @classmethod
    def paper(cls, **kw) -> SHACConfig:
        p = dict(num_envs=64, actor_hidden=(512, 256, 128), critic_hidden=(256, 256))
        return cls(**{**p, **kw})


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    actor: dict
    critic: dict  # ensemble-stacked
    target: dict
    actor_opt: tuple
    critic_opt: tuple
    obs_rms: rms.RunningMeanStd
    ret_rms: rms.RunningMeanStd
    ret: jax.Array  # running discounted return per env (for the return normaliser)
    env: EnvState
    key: jax.Array
    iteration: jax.Array
    skipped_updates: jax.Array
    reward_state: object = None  # learned-reward state (step 7), None for a fixed reward


# ---------------------------------------------------------------------------- pure pieces


def actor_objective(rewards, next_values, terminated, truncated, gamma):
    """The SHAC actor loss L (see module docstring) from (h, E) arrays."""
    return jnp.sum(actor_objective_per_env(rewards, next_values, terminated, truncated, gamma))


def actor_objective_per_env(rewards, next_values, terminated, truncated, gamma):
    """Environment e's share L_e of the SHAC actor loss, L = sum_e L_e, shape (E,)."""
    h, E = rewards.shape
    dt = jnp.result_type(rewards, next_values)
    rewards, next_values = rewards.astype(dt), next_values.astype(dt)
    boot = jnp.where(terminated, 0.0, next_values)
    done = terminated | truncated
    last = jnp.arange(h) == h - 1

    def body(c, xs):
        disc, acc, total = c
        r, b, d, is_last = xs
        acc = acc + disc * r
        total = total + jnp.where(d | is_last, acc + disc * gamma * b, 0.0)
        disc = jnp.where(d, 1.0, disc * gamma)
        acc = jnp.where(d, 0.0, acc)
        return (disc, acc, total), None

    z = jnp.zeros((E,), rewards.dtype)
    (_, _, total), _ = jax.lax.scan(body, (z + 1.0, z, z), (rewards, boot, done, last))
    return -total / (h * E)


def td_lambda_targets(rewards, next_values, terminated, truncated, gamma, lam):
    """TD(lambda) targets G_t (h, E) (see module docstring)."""
    dt = jnp.result_type(rewards, next_values)
    rewards, nv = rewards.astype(dt), jnp.where(terminated, 0.0, next_values).astype(dt)
    done = terminated | truncated

    def body(g_next, xs):
        r, v, d = xs
        g = r + gamma * jnp.where(d, v, (1.0 - lam) * v + lam * g_next)
        return g, g

    _, g = jax.lax.scan(body, nv[-1], (rewards, nv, done), reverse=True)
    return g


def discounted_return_stream(ret0, rewards, done, gamma):
    """R_t = gamma R_{t-1} + r_t, reset to 0 after an episode end: (R_h, (h, E) R_t)."""

    def body(ret, xs):
        r, d = xs
        ret = gamma * ret + r.astype(ret.dtype)
        return jnp.where(d, 0.0, ret), ret

    return jax.lax.scan(body, ret0, (rewards, done))


# ---------------------------------------------------------------------------- learner


class SHAC(Learner):
    name = "shac"
    env_state_fields = ("ret", "env")

    def __init__(
        self,
        env: ContactEnv,
        estimator,
        config: SHACConfig | None = None,
        *,
        iterations: int = 1000,
        reward_model=None,
    ):
        self.env = env
        self.estimator = estimator
        self.cfg = config or SHACConfig()
        self.iterations = int(iterations)
        c = self.cfg
        self.actor = nets.Actor(env.action_size, c.actor_hidden, c.init_log_std)
        self.critic = nets.Critic(c.critic_hidden)
        self.actor_tx = make_optimizer(c.actor_clip, c.betas)
        self.critic_tx = make_optimizer(c.critic_clip, c.betas)
        # a learned reward (e.g. the G1's ADD discriminator, env.reward_model), trained here
        self.reward_model = reward_model

    @property
    def env_steps_per_iteration(self) -> int:
        return self.cfg.num_envs * self.cfg.horizon

    @property
    def actor_optimizer(self):
        return self.actor_tx

    # ------------------------------------------------------------------ state

    def init(self, key) -> State:
        c = self.cfg
        n_obs = self.env.observation_size
        k_env, k_a, k_c, key = jax.random.split(key, 4)
        actor = self.actor.init(k_a, jnp.zeros((1, n_obs), jnp.float32))
        critic = nets.init_critics(self.critic, k_c, n_obs, c.critic_ensemble)
        k_rm = jax.random.fold_in(k_c, 1)  # a separate stream: the other keys stay as before
        return State(
            actor=actor,
            critic=critic,
            target=critic,
            actor_opt=self.actor_tx.init(actor),
            critic_opt=self.critic_tx.init(critic),
            obs_rms=rms.init((n_obs,)),
            ret_rms=rms.init(()),
            ret=jnp.zeros((c.num_envs,), jnp.float32),
            env=reset(self.env, self.estimator, k_env, c.num_envs),
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            skipped_updates=jnp.zeros((), jnp.int32),
            reward_state=None if self.reward_model is None else self.reward_model.init(k_rm),
        )

    def _values(self, params, obs_rms, obs):
        return nets.critic_values(self.critic, params, self._norm_obs(obs_rms, obs)).mean(0)

    # ------------------------------------------------------------------ losses

    def _reward_scale(self, state: State):
        """The return normaliser's scale that the actor loss divides rewards by."""
        return rms.std(state.ret_rms) if self.cfg.normalize_returns else 1.0

    def _actor_window(self, actor_params, state: State, key, probe=None):
        """One SHAC window through the estimator: (env state after it, trajectory)."""
        c = self.cfg
        reward_params = None
        if state.reward_state is not None:  # phi is a constant of the actor loss
            reward_params = jax.lax.stop_gradient(self.reward_model.params(state.reward_state))
        env_state, traj = rollout(
            self.env,
            self.estimator,
            self._sampling_policy(state.obs_rms),
            actor_params,
            state.env,
            key,
            c.horizon,
            mesh=self.mesh,
            reward_params=reward_params,
            probe=probe,
        )
        return env_state, traj

    def actor_loss(self, actor_params, state: State, key, probe=None):
        """(L, (env state after the window, trajectory, scaled rewards)); environments that
        diverged in the window are left out (module docstring). ``probe``: see
        :func:`bcg.learners.rollout.rollout`."""
        env_state, traj = self._actor_window(actor_params, state, key, probe)
        per_env = self.per_env_actor_objective(state, traj)
        loss = masked_env_sum(per_env, window_keep(traj.diverged))
        return loss, (env_state, traj, traj.rewards / self._reward_scale(state))

    def per_env_actor_objective(self, state: State, traj: Trajectory):
        """Each environment's share L_e of the actor loss of a window's trajectory (rewards
        scaled by the return normaliser, bootstrapped with the target critic), shape (E,);
        no environment left out."""
        v_next = self._values(state.target, state.obs_rms, traj.next_obs)
        r = traj.rewards / self._reward_scale(state)
        return actor_objective_per_env(r, v_next, traj.terminated, traj.truncated, self.cfg.gamma)

    def per_env_actor_gradients(
        self, state: State, key, method: str = "stacked", return_stats: bool = False
    ):
        """d L_e / d theta_actor for every environment e (leaves with a leading E axis): the
        per-environment policy gradients whose summed variance is the paper's gradient-variance
        metric.

        ``"stacked"`` (default): one reverse pass with a copy theta_e of the actor parameters
        per environment; environment e acts with theta_e only (same actions and noise as the
        shared-parameter rollout), so d(sum_e' L_e') / d theta_e = d L_e / d theta.
        ``"jacobian"``: ``jax.jacrev`` of the E per-environment losses (E reverse passes; an
        estimator's ``env_clip``, which compares the environments' cotangents within one
        reverse pass, then sees a median of 0 and clips nothing).
        ``return_stats``: also return the window's step statistics summed over its steps
        (triggered, bundled, overflow env-step counts)."""
        if method not in ("stacked", "jacobian"):
            raise ValueError(f"method must be 'stacked' or 'jacobian', got {method!r}")

        def losses(actor_params, per_env_params=False):
            policy = self._sampling_policy(state.obs_rms)
            if per_env_params:
                policy = self._per_env_policy(state.obs_rms)
            reward_params = None
            if state.reward_state is not None:
                reward_params = self.reward_model.params(state.reward_state)
            _, traj = rollout(
                self.env,
                self.estimator,
                policy,
                actor_params,
                state.env,
                key,
                self.cfg.horizon,
                mesh=self.mesh,
                reward_params=reward_params,
            )
            per_env = self.per_env_actor_objective(state, traj)
            return per_env, jax.tree_util.tree_map(jnp.sum, traj.stats)

        if method == "jacobian":
            grads, stats = jax.jacrev(losses, has_aux=True)(state.actor)
            return (grads, stats) if return_stats else grads
        E = state.env.step.shape[0]
        stacked = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (E,) + x.shape), state.actor)

        def total(P):
            per_env, stats = losses(P, per_env_params=True)
            return jnp.sum(per_env), stats

        grads, stats = jax.grad(total, has_aux=True)(stacked)
        return (grads, stats) if return_stats else grads

    def _per_env_policy(self, obs_rms):
        """The sampling policy with parameters stacked per environment (leading axis E)."""

        def policy(P, obs, t, k):
            o = self._norm_obs(obs_rms, obs)
            mu, log_std = jax.vmap(lambda p, x: self.actor.apply(p, x))(P, o)
            eps = jax.random.normal(k, mu.shape, mu.dtype)
            return jnp.tanh(mu + jnp.exp(log_std) * eps)

        return policy

    def _critic_update(self, state: State, obs, targets, weights, key, lr):
        """Critic regression on the window; ``weights`` (h, E) 0/1 leave samples out."""
        c = self.cfg
        obs = obs.reshape(-1, obs.shape[-1])
        targets = targets.reshape(-1)
        weights = weights.reshape(-1).astype(targets.dtype)
        n = obs.shape[0]
        mb = max(n // c.critic_minibatches, 1)
        nmb = n // mb

        def loss_fn(p, o, g, w):
            v = nets.critic_values(self.critic, p, o)  # (K, mb)
            err = jnp.where(w[None] > 0, (v - g[None]) ** 2, 0.0)
            return jnp.sum(jnp.mean(err, 0)) / jnp.maximum(jnp.sum(w), 1.0)

        def minibatch(carry, idx):
            p, opt, skipped = carry
            loss, grads = jax.value_and_grad(loss_fn)(p, obs[idx], targets[idx], weights[idx])
            p, opt, ok = guarded_step(self.critic_tx, p, opt, grads, lr, loss)
            return (p, opt, skipped + (~ok).astype(jnp.int32)), loss

        def epoch(carry, k):
            perm = jax.random.permutation(k, n)[: nmb * mb].reshape(nmb, mb)
            return jax.lax.scan(minibatch, carry, perm)

        carry0 = (state.critic, state.critic_opt, jnp.zeros((), jnp.int32))
        keys = jax.random.split(key, c.critic_iterations)
        (p, opt, skipped), losses = jax.lax.scan(epoch, carry0, keys)
        return p, opt, skipped, jnp.mean(losses)

    # ------------------------------------------------------------------ one iteration

    def critic_step(self, state: State, traj: Trajectory, r, key):
        """The critic's part of an iteration on a window ``traj`` (scaled rewards ``r``):
        TD(lambda) targets from the target critic, the minibatch epochs, the target's Polyak
        update. Returns ``(critic, critic_opt, target, skipped, loss, targets, weights)``."""
        c = self.cfg
        keep = window_keep(traj.diverged)  # environments that count in this window
        w = jnp.broadcast_to(keep[None, :], traj.rewards.shape).astype(jnp.float32)
        v_next = self._values(state.target, state.obs_rms, traj.next_obs)
        targets = td_lambda_targets(r, v_next, traj.terminated, traj.truncated, c.gamma, c.lam)
        lr_c = linear_lr(c.critic_lr, c.lr_end, state.iteration, self.iterations)
        obs_n = self._norm_obs(state.obs_rms, traj.obs)
        critic, critic_opt, skipped, loss = self._critic_update(state, obs_n, targets, w, key, lr_c)
        a = c.target_alpha
        target = jax.tree_util.tree_map(lambda t, p: a * t + (1 - a) * p, state.target, critic)
        return critic, critic_opt, target, skipped, loss, targets, w

    def iteration(self, state: State):
        c = self.cfg
        key, k_roll, k_critic = jax.random.split(state.key, 3)

        # actor: differentiate the short-horizon window through the estimator
        probe = jnp.zeros((c.num_envs,), jnp.float32)
        (loss, (env_state, traj, r)), (grads, zeroed) = jax.value_and_grad(
            self.actor_loss, argnums=(0, 3), has_aux=True
        )(state.actor, state, k_roll, probe)
        clean = clean_actor_gradient(zeroed, window_keep(traj.diverged))
        lr_a = linear_lr(c.actor_lr, c.lr_end, state.iteration, self.iterations)
        lr_a = jnp.where(state.iteration < c.critic_warmup, 0.0, lr_a)
        actor, actor_opt, ok_a = guarded_step(
            self.actor_tx, state.actor, state.actor_opt, grads, lr_a, loss, clean
        )

        # critic: TD(lambda) targets from the target critic on the same window
        traj, r = jax.lax.stop_gradient((traj, r))
        critic, critic_opt, target, skipped_c, critic_loss, targets, w = self.critic_step(
            state, traj, r, k_critic
        )

        # learned reward (step 7): train it on this window's samples
        reward_state, reward_metrics = state.reward_state, {}
        if reward_state is not None:
            reward_state, reward_metrics = self.reward_model.update(
                reward_state, traj.reward_inputs, w
            )

        # normalisers
        done = traj.terminated | traj.truncated
        ret, rets = discounted_return_stream(state.ret, traj.rewards, done, c.gamma)
        skipped = state.skipped_updates + (~ok_a).astype(jnp.int32) + skipped_c
        new = State(
            actor=actor,
            critic=critic,
            target=target,
            actor_opt=actor_opt,
            critic_opt=critic_opt,
            obs_rms=rms.update(state.obs_rms, traj.obs, w) if c.normalize_obs else state.obs_rms,
            ret_rms=rms.update(state.ret_rms, rets, w) if c.normalize_returns else state.ret_rms,
            ret=ret,
            env=env_state,
            key=key,
            iteration=state.iteration + 1,
            skipped_updates=skipped,
            reward_state=reward_state,
        )
        metrics = {
            "actor_loss": loss,
            "critic_loss": critic_loss,
            "value_mean": jnp.mean(targets),
            "actor_grad_norm": jnp.where(clean, global_norm(grads), jnp.nan),
            "actor_lr": lr_a,
            "action_std": jnp.mean(jnp.exp(actor["params"]["log_std"])),
            "skipped_updates": skipped,
            "actor_skipped": (~ok_a).astype(jnp.int32),
            "critic_skipped": skipped_c,
            **trajectory_metrics(traj, env_state),
            **reward_metrics,
        }
        return new, metrics


def trajectory_metrics(traj: Trajectory, env_state: EnvState) -> dict:
    """Logging metrics of a window: raw reward, finished-episode stats, estimator counts."""
    n = traj.rewards.size
    return {
        "reward_mean": jnp.mean(traj.rewards),
        "episode_return": jnp.nanmean(env_state.last_return),
        "episode_length": jnp.nanmean(env_state.last_length),
        "terminations": jnp.sum(traj.terminated),
        "diverged": jnp.sum(traj.diverged),
        "masked_fraction": 1.0 - jnp.mean(window_keep(traj.diverged).astype(jnp.float32)),
        "triggered_fraction": jnp.sum(traj.stats.triggered) / n,
        "bundled_fraction": jnp.sum(traj.stats.bundled) / n,
        "overflow": jnp.sum(traj.stats.overflow),
    }
