"""PPO baseline: brax's PPO (``brax.training.agents.ppo.train``) on a :class:`ContactEnv`.

No PPO is implemented here: the environment is exposed through :mod:`bcg.learners.brax_env`,
wrapped by brax's own training wrappers (vmap, episode length with ``truncation`` kept apart
from termination, auto-reset) and trained by brax 0.14.2's ``ppo.train``. This module adds the
run bookkeeping: defaults for a small CPU budget, ``metrics.csv`` + a TensorBoard event file,
progress lines, the final parameters on disk and a deterministic policy loaded back from them.

Defaults (:data:`PPO_DEFAULTS`, every one overridable through ``**ppo_kwargs``), chosen for a
2-core CPU where a hopper step costs ~60 us at batch 32:

* 32 environments, unroll 20, 4 minibatches of ``num_envs`` (32) trajectories x 4 epochs per
  batch: 2,560 env steps per PPO update (brax: ``batch_size * num_minibatches *
  unroll_length``), i.e. 4 rollouts of 20 steps of the 32 environments;
* Adam lr 3e-4, gradient-norm clip 1, discount 0.97, GAE lambda 0.95, clip 0.2, entropy 1e-3,
  value coefficient 0.5, reward scaling 1, advantage normalisation;
* observation normalisation on (brax's running mean/std, saved with the parameters);
* tanh-squashed Gaussian actions in [-1, 1] (brax's ``tanh_normal``), which is the action
  range :meth:`ContactEnv.action_to_ctrl` expects;
* policy and value MLPs (64, 64), swish (brax's default activation);
* 10 evaluations over the run, each 16 environments x one episode with the deterministic
  policy (the mean action), in brax's evaluator.

Files written in ``run_dir``: ``metrics.csv`` (one row per evaluation: iteration (the evaluation's
number), env_steps, wall_time, eval_return, eval_return_std, eval_episode_length, train_sps:
the column names of :mod:`bcg.learners.harness` where they mean the same), ``training.png``
(eval return vs env steps and vs wall time), a tensorboardX event file,
``ppo_params.pkl`` (``brax.io.model.save_params`` of the ``(normalizer, policy, value)``
params), ``ppo_config.json`` (what :func:`load_ppo_policy` needs to rebuild the networks, plus
the run's settings) and ``checkpoints/<env steps>/``
(brax's PPO checkpoint format, orbax params + network config, at every evaluation; a fresh,
non-resumed run deletes the old ones; load one with ``load_ppo_policy(run_dir, step=...)``).

Resume (``resume=True``): brax 0.14.2's ``ppo.train`` restores the normaliser, policy and value
parameters from ``restore_checkpoint_path`` but **not** the Adam state or the step counter;
resuming therefore warm-starts the networks from the newest ``checkpoints/<step>`` and trains
the remaining ``num_timesteps - step`` steps with fresh optimiser moments, logging env steps
offset by ``step`` and appending to ``metrics.csv``.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import shutil
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bcg.envs.base import ContactEnv
from bcg.learners.brax_env import to_brax

PPO_DEFAULTS: dict = dict(
    num_envs=32,
    unroll_length=20,
    num_minibatches=4,
    num_updates_per_batch=4,
    learning_rate=3e-4,
    max_grad_norm=1.0,
    discounting=0.97,
    gae_lambda=0.95,
    clipping_epsilon=0.2,
    entropy_cost=1e-3,
    vf_loss_coefficient=0.5,
    reward_scaling=1.0,
    normalize_advantage=True,
    normalize_observations=True,
    num_evals=10,
    num_eval_envs=16,
    deterministic_eval=True,
)
NETWORK_DEFAULTS: dict = dict(
    policy_hidden_layer_sizes=(64, 64),
    value_hidden_layer_sizes=(64, 64),
    activation="swish",
)
CSV_COLUMNS = (  # the names of bcg.learners.harness's metrics.csv where they mean the same
    "iteration",
    "env_steps",
    "wall_time",
    "eval_return",
    "eval_return_std",
    "eval_episode_length",
    "train_sps",
)
PARAMS_FILE = "ppo_params.pkl"
CONFIG_FILE = "ppo_config.json"
CHECKPOINT_DIR = "checkpoints"


def _activation(name: str):
    from brax.training import networks

    if name not in networks.ACTIVATION:
        raise ValueError(f"unknown activation {name!r}; one of {sorted(networks.ACTIVATION)}")
    return networks.ACTIVATION[name]


def _network_factory(net: dict):
    from brax.training.agents.ppo import networks as ppo_networks

    return functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=tuple(net["policy_hidden_layer_sizes"]),
        value_hidden_layer_sizes=tuple(net["value_hidden_layer_sizes"]),
        activation=_activation(net["activation"]),
    )


def latest_checkpoint(run_dir) -> tuple[Path, int] | None:
    """The newest brax checkpoint ``run_dir/checkpoints/<step>`` and its step, or None."""
    d = Path(run_dir) / CHECKPOINT_DIR
    if not d.is_dir():
        return None
    steps = [int(p.name) for p in d.iterdir() if p.is_dir() and p.name.isdigit()]
    if not steps:
        return None
    s = max(steps)
    return d / f"{s:012d}", s


class _RunLog:
    """metrics.csv + TensorBoard + progress lines for one run."""

    def __init__(
        self,
        run_dir,
        progress: bool,
        step_offset: int,
        time_offset: float,
        append: bool,
        row_offset: int = 0,
    ):
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        self.row_offset = row_offset  # evaluations logged by the run before a resume
        self.step_offset = step_offset
        self.time_offset = time_offset
        self.t0 = time.time()
        self.history: list[dict] = []
        self._csv = None
        self._tb = None
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            path = self.run_dir / "metrics.csv"
            new = not append or not path.exists() or path.stat().st_size == 0
            self._csv = open(path, "w" if new else "a", newline="")  # noqa: SIM115
            self._writer = csv.DictWriter(self._csv, fieldnames=CSV_COLUMNS)
            if new:
                self._writer.writeheader()
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(self.run_dir))

    def __call__(self, step: int, metrics: dict):
        if step == 0 and self.step_offset > 0:
            return  # the restored policy's evaluation: already logged by the previous run
        row = {
            "iteration": len(self.history) + 1 + self.row_offset,
            "env_steps": int(step) + self.step_offset,
            "wall_time": round(time.time() - self.t0 + self.time_offset, 3),
            "eval_return": float(metrics.get("eval/episode_reward", math.nan)),
            "eval_return_std": float(metrics.get("eval/episode_reward_std", math.nan)),
            "eval_episode_length": float(metrics.get("eval/avg_episode_length", math.nan)),
            "train_sps": float(metrics.get("training/sps", math.nan)),
        }
        self.history.append(row)
        if self._csv is not None:
            self._writer.writerow(row)
            self._csv.flush()
        if self._tb is not None:
            s = row["env_steps"]
            for k, v in metrics.items():
                v = np.asarray(v)
                if v.size == 1 and np.isfinite(v):
                    self._tb.add_scalar(k, float(v), s)
            self._tb.add_scalar("wall_time", row["wall_time"], s)
            self._tb.flush()
        if self.progress:
            print(
                f"[ppo] env steps {row['env_steps']:>9d}  {row['wall_time']:8.1f} s  "
                f"eval return {row['eval_return']:9.3f} +- {row['eval_return_std']:.3f}  "
                f"episode length {row['eval_episode_length']:6.1f}",
                flush=True,
            )

    def close(self):
        if self._csv is not None:
            self._csv.close()
        if self._tb is not None:
            self._tb.close()


def train_ppo(
    env: ContactEnv,
    *,
    num_timesteps: int,
    seed: int = 0,
    run_dir=None,
    num_envs: int = PPO_DEFAULTS["num_envs"],
    episode_length: int | None = None,
    progress: bool = True,
    resume: bool = False,
    run_config: dict | None = None,
    **ppo_kwargs,
):
    """Train a PPO policy on ``env`` with brax's PPO.

    Args:
      env: the task; its plain (analytic) step is the physics.
      num_timesteps: environment (control) steps to train for (brax rounds up to whole
        evaluation epochs of PPO updates).
      seed: brax's seed (networks, environments, evaluation).
      run_dir: where metrics, TensorBoard events, checkpoints and the final params go
        (nothing is written when None).
      num_envs: parallel training environments.
      episode_length: time limit in control steps (default ``env.episode_length``).
      progress: print a line at every evaluation.
      resume: warm-start from the newest checkpoint in ``run_dir`` (see the module docstring).
      run_config: extra JSON-able entries for ``ppo_config.json`` (e.g. ``task``,
        ``stiffness``, so that an evaluator can rebuild the environment).
      **ppo_kwargs: overrides of :data:`PPO_DEFAULTS` or any other ``ppo.train`` argument;
        ``policy_hidden_layer_sizes``, ``value_hidden_layer_sizes`` and ``activation`` (a name
        from ``brax.training.networks.ACTIVATION``) set the networks.

    Returns:
      ``(make_policy, params, history)``: brax's ``make_policy(params, deterministic)``, the
      final ``(normalizer, policy, value)`` params, and one dict per evaluation (the
      ``metrics.csv`` rows).
    """
    from brax.io import model as brax_model
    from brax.training.agents.ppo import train as ppo

    net = dict(NETWORK_DEFAULTS)
    for k in NETWORK_DEFAULTS:
        if k in ppo_kwargs:
            net[k] = ppo_kwargs.pop(k)
    net["policy_hidden_layer_sizes"] = [int(x) for x in net["policy_hidden_layer_sizes"]]
    net["value_hidden_layer_sizes"] = [int(x) for x in net["value_hidden_layer_sizes"]]
    # one minibatch = num_envs trajectories unless set: batch_size * num_minibatches must be a
    # multiple of num_envs (brax)
    kw = {**PPO_DEFAULTS, "batch_size": num_envs, **ppo_kwargs, "num_envs": num_envs}
    episode_length = int(episode_length or env.episode_length)

    step_offset, time_offset, row_offset = 0, 0.0, 0
    if run_dir is not None:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        if resume:
            ck = latest_checkpoint(run_dir)
            if ck is not None:
                kw["restore_checkpoint_path"] = str(ck[0].absolute())
                step_offset = ck[1]
                prev = _read_csv(run_dir / "metrics.csv")
                time_offset = _wall_time(prev[-1]) if prev else 0.0
                row_offset = len(prev)
        elif (run_dir / CHECKPOINT_DIR).is_dir():  # a fresh run: drop stale checkpoints
            for p in (run_dir / CHECKPOINT_DIR).iterdir():
                if p.is_dir() and p.name.isdigit():
                    shutil.rmtree(p)
    elif resume:
        raise ValueError("resume needs a run_dir")
    remaining = max(int(num_timesteps) - step_offset, 0)
    benv = to_brax(env)
    factory = _network_factory(net)
    if run_dir is not None:
        kw["policy_params_fn"] = _checkpoint_saver(
            run_dir / CHECKPOINT_DIR,
            step_offset,
            benv,
            bool(kw["normalize_observations"]),
            factory,
            kw.get("policy_params_fn"),
        )

    log = _RunLog(
        run_dir, progress, step_offset, time_offset, append=step_offset > 0, row_offset=row_offset
    )
    try:
        make_policy, params, _ = ppo.train(
            environment=benv,
            num_timesteps=remaining,
            episode_length=episode_length,
            seed=seed,
            network_factory=factory,
            progress_fn=log,
            **kw,
        )
    finally:
        log.close()
    params = jax.tree.map(np.asarray, params)

    if run_dir is not None:
        brax_model.save_params(str(run_dir / PARAMS_FILE), params)
        cfg = {
            "env": type(env).__name__,
            "stiffness": _stiffness_spec(env),
            "observation_size": benv.observation_size,
            "action_size": benv.action_size,
            "normalize_observations": bool(kw["normalize_observations"]),
            "network": net,
            "env_steps": (log.history[-1]["env_steps"] if log.history else step_offset),
            "seed": seed,
            "episode_length": episode_length,
            "ppo": {k: v for k, v in kw.items() if isinstance(v, (int, float, str, bool))},
            **(run_config or {}),
        }
        (run_dir / CONFIG_FILE).write_text(json.dumps(cfg, indent=2))
        rows = _read_csv(run_dir / "metrics.csv")
        if rows:
            from bcg.learners.harness import PLOT_FILE, plot_training

            plot_training(rows, run_dir / PLOT_FILE, title=f"{run_dir.name} (PPO)")
    return make_policy, params, log.history


def _checkpoint_saver(ckdir: Path, offset: int, benv, normalize: bool, factory, user_fn=None):
    """brax ``policy_params_fn`` saving brax's PPO checkpoint (orbax params + network config,
    what ``restore_checkpoint_path`` reads) at every evaluation, named by the run's total env
    steps (brax's own ``save_checkpoint_path`` names them by the steps of the current ``train``
    call, which restart at 0 on resume). Note: brax 0.14.2's ``checkpoint.load_policy`` cannot
    read its own network config (``mean_kernel_init_fn: null`` -> KeyError), for these and for
    brax-saved checkpoints alike; use :func:`load_ppo_policy` with ``step``."""
    from brax.training.agents.ppo import checkpoint as ppo_checkpoint

    config = ppo_checkpoint.network_config(
        observation_size=benv.observation_size,
        action_size=benv.action_size,
        normalize_observations=normalize,
        network_factory=factory,
    )

    def save(step, make_policy, params):
        if user_fn is not None:
            user_fn(step, make_policy, params)
        if step > 0:
            ppo_checkpoint.save(ckdir.absolute(), offset + int(step), params, config)

    return save


def _stiffness_spec(env: ContactEnv):
    """The ``stiffness=`` argument that rebuilds ``env``'s contact ("soft", "stiff", "gated[:W]",
    or a solref time constant in seconds)."""
    st = env.sim.stiffness
    if st.label in ("soft", "stiff", "model") or st.label.startswith("gated"):
        return st.label
    if st.timeconst is None:
        return st.label
    return float(st.timeconst)


def _wall_time(row: dict) -> float:
    """Wall time of a metrics.csv row (``wall_time_s`` in runs written before the rename)."""
    return float(row.get("wall_time", row.get("wall_time_s", 0.0)))


def _read_csv(path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def make_deterministic_policy(make_policy, params):
    """``policy(obs) -> action`` (the mean action, tanh-squashed), jitted; any batch shape."""
    pol = make_policy(params, deterministic=True)
    key = jax.random.PRNGKey(0)  # unused by the deterministic policy

    @jax.jit
    def policy(obs):
        return pol(jnp.asarray(obs, jnp.float32), key)[0]

    return policy


def load_ppo_policy(run_dir, env: ContactEnv | None = None, step: int | None = None):
    """The deterministic policy ``policy(obs) -> action`` saved by :func:`train_ppo` in run_dir.

    ``step`` selects the checkpoint ``checkpoints/<step>`` instead of the final parameters;
    ``env`` (optional) is checked against the saved observation and action sizes.
    """
    from brax.io import model as brax_model
    from brax.training.acme import running_statistics
    from brax.training.agents.ppo import networks as ppo_networks

    run_dir = Path(run_dir)
    cfg = json.loads((run_dir / CONFIG_FILE).read_text())
    if env is not None and (
        int(env.observation_size) != cfg["observation_size"]
        or int(env.action_size) != cfg["action_size"]
    ):
        raise ValueError(
            f"{run_dir} holds a policy for obs {cfg['observation_size']} / action "
            f"{cfg['action_size']}, env has {env.observation_size} / {env.action_size}"
        )
    if step is None:
        params = brax_model.load_params(str(run_dir / PARAMS_FILE))
    else:
        from brax.training.agents.ppo import checkpoint as ppo_checkpoint

        path = run_dir / CHECKPOINT_DIR / f"{int(step):012d}"
        if not path.is_dir():
            raise FileNotFoundError(f"no PPO checkpoint {path}")
        params = ppo_checkpoint.load(path.absolute())
    normalize = running_statistics.normalize if cfg["normalize_observations"] else (lambda x, y: x)
    network = _network_factory(cfg["network"])(
        cfg["observation_size"], cfg["action_size"], preprocess_observations_fn=normalize
    )
    make_policy = ppo_networks.make_inference_fn(network)
    return make_deterministic_policy(make_policy, params)


def evaluate(env: ContactEnv, policy, episodes: int, key, episode_length: int | None = None):
    """Mean undiscounted return of ``policy(obs) -> action`` over ``episodes`` episodes.

    The shared evaluator (:func:`bcg.learners.harness.evaluate`: plain step, each episode until
    its first terminated state, whose transition reward counts, or ``episode_length`` steps,
    default ``env.episode_length``). Returns ``(mean_return, returns (episodes,), lengths
    (episodes,))`` as numpy values.
    """
    from bcg.learners.harness import evaluate as shared_evaluate

    res = shared_evaluate(
        env, lambda _, obs: policy(obs), None, episodes, key, episode_length=episode_length
    )
    return res["mean_return"], np.asarray(res["returns"]), np.asarray(res["lengths"])
