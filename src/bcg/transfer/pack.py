"""The smallest form of a trained SHAC / BPTT policy: a run directory holding ``run.json`` and
``policy.npz`` (the policy's parameters, :meth:`learner.policy_params`: actor and observation
normaliser) instead of whole-learner checkpoints, plus the run's ``metrics.csv`` and
``training.png``. :func:`bcg.transfer.policy.load_policy` reads it, so ``bcg eval``,
``transfer``, ``export`` and ``deploy`` accept it.

    pack_policy("runs/g1_jump/checkpoints/400", "results/g1/A")   # bcg pack RUN OUT
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np

from bcg.learners import record
from bcg.learners.rundir import (  # noqa: F401  (re-exported)
    POLICY_FILE,
    load_packed_params,
    widen_observation_params,
)

COPIED = ("metrics.csv", "training.png", "eval.json")


def pack_policy(
    path, out, action_range: tuple[str, float] | None = None, std_scale: float | None = None
) -> Path:
    """Write the policy of the run, checkpoint or packed policy ``path`` into the folder
    ``out``; returns it. ``run.json`` gains ``packed``: the source, iteration and env steps.

    ``action_range=("env.NAME", v)``: the env parameter ``NAME`` (one that sets how far an
    action moves the command, e.g. the G1's ``residual_scale`` or ``leg_residual_scale``) is
    set to ``v`` in the packed ``run.json``, and the policy is rescaled by
    :func:`scale_mean_action` with the per-action ratio ``s0 / s1`` of the env's
    :attr:`~bcg.envs.base.ContactEnv.action_scales` before and after, so that ``s1 a'`` equals
    ``s0 a`` to first order in the pre-squash mean: the packed policy starts a training at the
    wider (or narrower) range from the same behaviour wherever its actions are not
    saturated.

    ``std_scale=f``: the exploration noise's std times ``f`` (log_std + log f), the mean
    unchanged (:func:`scale_std`): a further training stage from the packed policy explores
    less (or more)."""
    import jax

    from bcg.transfer.policy import load_packed, load_state, split_checkpoint_path

    run_dir, step = split_checkpoint_path(path)
    packed = None
    if (run_dir / "run.json").exists():
        run = record.read(run_dir)
        packed = load_packed(run_dir, step, run)
    if packed is not None:  # a packed policy: repack it
        _, learner, params, it, env_steps = packed
        run = {k: v for k, v in run.items() if k != "packed"}
    else:
        run, learner, state, it, env_steps = load_state(path)
        params = learner.policy_params(state)
    if action_range is not None:
        name, value = _env_param(learner.env, *action_range)
        run_value = getattr(learner.env, name)
        new_scales = _scales(dataclasses.replace(learner.env, **{name: value}))
        if not np.all(np.isfinite(new_scales) & (new_scales > 0)):
            raise ValueError(
                f"env.{name}={value} gives action scales {new_scales}: they must be finite and > 0"
            )
        ratio = _scales(learner.env) / new_scales
        params = scale_mean_action(params, ratio)
        run = {**run, "env_params": {**(run.get("env_params") or {}), name: value}}
    if std_scale is not None:
        params = scale_std(params, std_scale)
    leaves = jax.tree_util.tree_leaves(params)
    out = Path(out)
    if out.resolve() == run_dir.resolve():
        raise ValueError(f"pack into another folder than the run itself ({run_dir})")
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / POLICY_FILE, *[np.asarray(x) for x in leaves])
    packed = {"source": str(path), "iteration": it, "env_steps": env_steps}
    if action_range is not None:
        packed["action_range"] = {"param": action_range[0], "from": run_value, "to": value}
    if std_scale is not None:
        packed["std_scale"] = float(std_scale)
    run = record.to_write(run)  # an older record stays completed as it was loaded
    (out / "run.json").write_text(json.dumps({**run, "packed": packed}, indent=2))
    for name in COPIED:
        if (run_dir / name).exists():
            shutil.copy2(run_dir / name, out / name)
    _trim_rows(out / "metrics.csv", it)
    return out


def scale_mean_action(params: dict, factor) -> dict:
    """Policy parameters (:meth:`policy_params`: ``actor``, ``obs_rms``) whose pre-squash mean
    is ``factor`` times the given one, mu' = factor mu (a scalar or one factor per action: the
    actor MLP's last Dense layer, kernel columns and bias, scaled), with the exploration noise
    scaled alike (log_std + log factor). Then tanh(mu') = factor tanh(mu) + O(mu^3):
    :func:`pack_policy`'s ``action_range``."""
    factor = np.asarray(factor, np.float64)
    if not np.all(np.isfinite(factor) & (factor > 0)):
        raise ValueError(f"action scale factors must be finite and > 0, got {factor}")
    actor = params["actor"]["params"]
    mlp = actor["MLP_0"]
    last = max((k for k in mlp if k.startswith("Dense_")), key=lambda k: int(k.split("_")[1]))
    head = {k: (v * factor).astype(v.dtype) for k, v in mlp[last].items()}
    actor = {**actor, "MLP_0": {**mlp, last: head}}
    return scale_std({**params, "actor": {**params["actor"], "params": actor}}, factor)


def scale_std(params: dict, factor) -> dict:
    """Policy parameters whose exploration std is ``factor`` (a scalar or one per action)
    times the given one (log_std' = log_std + log factor); the mean is unchanged."""
    factor = np.asarray(factor, np.float64)
    if not np.all(np.isfinite(factor) & (factor > 0)):
        raise ValueError(f"the std scale must be finite and > 0, got {factor}")
    actor = params["actor"]["params"]
    log_std = (actor["log_std"] + np.log(factor)).astype(actor["log_std"].dtype)
    return {**params, "actor": {**params["actor"], "params": {**actor, "log_std": log_std}}}


def _env_param(env, key: str, value: float) -> tuple[str, float]:
    """``(NAME, value)`` for ``key = "env.NAME"``, a numeric field of ``env``."""
    if not key.startswith("env."):
        raise ValueError(f"the action range is an env parameter env.NAME, got {key!r}")
    name = key[len("env.") :]
    if name not in {f.name for f in dataclasses.fields(env)}:
        raise ValueError(f"{type(env).__name__} has no parameter {name!r}")
    return name, float(value)


def _scales(env) -> np.ndarray:
    scales = np.asarray(env.action_scales, np.float64)
    if scales.shape != (env.action_size,):
        raise ValueError(f"{type(env).__name__}.action_scales must have one entry per action")
    return scales


def _trim_rows(path: Path, iteration: int) -> None:
    """Keep the CSV rows up to the packed iteration (a run may have logged past it)."""
    if not path.exists():
        return
    lines = path.read_text().splitlines()
    keep = [lines[0]] + [x for x in lines[1:] if int(float(x.split(",")[0])) <= iteration]
    path.write_text("\n".join(keep) + "\n")
