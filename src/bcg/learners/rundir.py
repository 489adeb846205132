"""The run directory's format, for every learner: what ``bcg train`` writes and every command
that rebuilds a run reads. It imports no learner (learners and :mod:`bcg.transfer` import it).

    run.json          the run's record (:mod:`bcg.learners.record`, :mod:`bcg.learners.registry`)
    metrics.csv       one row per iteration (iteration, env_steps, wall_time, metrics...)
    checkpoints/<k>/  orbax checkpoints of the learner state after k iterations: its leaves by
                      position (``{"00000": array, ...}``; empty arrays are not stored), and the
                      iteration, env steps and wall time
    policy.npz        a packed policy's parameters (:mod:`bcg.transfer.pack`), no checkpoints
    training.png, eval.json, tb/   plots, evaluations, TensorBoard events
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

RUN_FILE = "run.json"
CSV_FILE = "metrics.csv"
CKPT_DIR = "checkpoints"
PLOT_FILE = "training.png"
EVAL_FILE = "eval.json"
POLICY_FILE = "policy.npz"


def write_run(run_dir, run: dict) -> Path:
    """Write the run description (every learner's, see :mod:`bcg.learners.registry`)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RUN_FILE
    path.write_text(json.dumps(run, indent=2))
    return path


def checkpoint_manager(run_dir: Path, max_to_keep: int = 3):
    import orbax.checkpoint as ocp

    opts = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)
    return ocp.CheckpointManager((run_dir / CKPT_DIR).absolute(), options=opts)


def payload(state, iteration: int, env_steps: int, wall_time: float) -> dict:
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(state)]
    return {  # orbax cannot store empty arrays: those come back from the template
        "leaves": {f"{i:05d}": x for i, x in enumerate(leaves) if x.size},
        "iteration": np.asarray(iteration, np.int64),
        "env_steps": np.asarray(env_steps, np.int64),
        "wall_time": np.asarray(wall_time, np.float64),
    }


def save_checkpoint(mgr, state, iteration: int, env_steps: int, wall_time: float):
    import orbax.checkpoint as ocp

    mgr.save(iteration, args=ocp.args.StandardSave(payload(state, iteration, env_steps, wall_time)))
    mgr.wait_until_finished()


def latest_step(run_dir) -> int | None:
    d = Path(run_dir) / CKPT_DIR
    if not d.is_dir():
        return None
    steps = [int(p.name) for p in d.iterdir() if p.is_dir() and p.name.isdigit()]
    return max(steps) if steps else None


def restore_checkpoint(run_dir, template_state, step: int | None = None, strict: bool = False):
    """``(state, iteration, env_steps, wall_time)`` from ``run_dir`` (newest or ``step``).

    ``strict``: ValueError unless the checkpoint holds exactly the template's leaves, with
    their shapes (a checkpoint of another learner configuration)."""
    import orbax.checkpoint as ocp

    run_dir = Path(run_dir)
    step = latest_step(run_dir) if step is None else step
    if step is None:
        raise FileNotFoundError(f"no checkpoint in {run_dir / CKPT_DIR}")
    mgr = checkpoint_manager(run_dir)
    target = payload(template_state, 0, 0, 0.0)
    p = mgr.restore(step, args=ocp.args.StandardRestore(target))
    mgr.close()
    where = run_dir / CKPT_DIR / str(step)
    state = transplant(dict(p["leaves"]), template_state, strict=strict, source=where)
    return state, int(p["iteration"]), int(p["env_steps"]), float(p["wall_time"])


def transplant(saved: dict, template_state, strict: bool = False, source="the saved state"):
    """``template_state`` with the arrays of ``saved`` (``{"00000": array, ...}``: the state's
    leaves by position, as checkpoints store them; empty arrays may be missing).

    Where only the environment states differ in shape (e.g. the env now carries more
    per-environment randomisation draws), everything else is taken and the environments start
    afresh (the template's). ``strict``: ValueError unless ``saved`` holds exactly the
    template's non-empty leaves with their shapes, environment states apart."""
    paths, treedef = jax.tree_util.tree_flatten_with_path(template_state)
    leaves = [x for _, x in paths]
    env = {f"{i:05d}" for i, (path, _) in enumerate(paths) if _in_env_state(path)}
    if strict:  # every non-empty leaf, by position and shape (empty arrays are not saved)
        want = {f"{i:05d}": tuple(np.shape(x)) for i, x in enumerate(leaves) if np.size(x)}
        have = {k: tuple(np.shape(v)) for k, v in saved.items()}
        if have != want:
            bad = {k for k in set(have) | set(want) if have.get(k) != want.get(k)}
            if not env or not bad <= env:
                raise ValueError(
                    f"{source} holds a different learner state ({len(have)} arrays vs this "
                    f"run's {len(want)}, or other shapes): --init-from and a schedule's "
                    "phases need the same learner, estimator, env sizes and networks"
                )
    shapes = {f"{i:05d}": tuple(np.shape(x)) for i, x in enumerate(leaves)}
    if any(
        tuple(np.shape(saved[k])) != shapes[k] if k in saved else np.prod(shapes[k]) > 0
        for k in env
    ):
        print(
            f"[bcg] {source}: the environment states differ in shape from this run's; they "
            "start afresh (policy, critic and optimiser are taken from it)"
        )
        saved = {k: v for k, v in saved.items() if k not in env}
    restored = [jnp.asarray(saved.get(f"{i:05d}", x)) for i, x in enumerate(leaves)]
    return jax.tree_util.tree_unflatten(treedef, restored)


def _in_env_state(path) -> bool:
    """Whether a learner-state leaf lies in its environment states (the ``env`` field)."""
    return bool(path) and getattr(path[0], "name", None) == "env"


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_rows(path: Path, rows: list[dict], columns: list[str]):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


def split_checkpoint_path(path) -> tuple[Path, int | None]:
    """``(run_dir, step)`` for a run directory (step None: newest) or ``checkpoints/<k>``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such run directory or checkpoint: {path}")
    if path.name.isdigit() and path.parent.name == "checkpoints":
        return path.parent.parent, int(path.name)
    return path, None


def run_float64(path) -> bool:
    """Whether the run at ``path`` (a run directory or checkpoint) was trained in double
    precision (run.json's ``float64``; PPO runs without run.json: False)."""
    run_dir, _ = split_checkpoint_path(path)
    run_file = run_dir / "run.json"
    return (
        bool(json.loads(run_file.read_text()).get("float64", False)) if run_file.exists() else False
    )


def load_packed_params(run_dir: Path, learner, widen_observation: bool = False):
    """The policy parameters in ``run_dir/policy.npz``, in the pytree of ``learner``'s (shapes
    checked: a ValueError names a mismatch). ``widen_observation``: a policy packed for a
    shorter observation (the same features followed by new ones at the end) is widened to the
    learner's by :func:`widen_observation_params`."""
    import jax

    template = learner.policy_params(learner.init(jax.random.PRNGKey(0)))
    leaves, treedef = jax.tree_util.tree_flatten(template)
    with np.load(run_dir / POLICY_FILE) as f:
        saved = [f[f"arr_{i}"] for i in range(len(f.files))]
    if widen_observation and len(saved) == len(leaves):
        wide = widen_observation_params(saved, [np.asarray(x) for x in leaves])
        grown = [
            (a.shape[0], b.shape[0]) for a, b in zip(saved, wide, strict=True) if a.shape != b.shape
        ]
        if grown:
            print(
                f"[bcg] {run_dir / POLICY_FILE}: observation widened from {grown[0][0]} to "
                f"{grown[0][1]} features (zero input weights for the new ones)"
            )
        saved = wide
    if [x.shape for x in saved] != [np.shape(x) for x in leaves]:
        raise ValueError(
            f"{run_dir / POLICY_FILE} does not fit the policy that run.json builds "
            f"({len(saved)} arrays vs {len(leaves)}, or other shapes)"
        )
    return jax.tree_util.tree_unflatten(
        treedef, [jax.numpy.asarray(s, x.dtype) for s, x in zip(saved, leaves, strict=True)]
    )


def widen_observation_params(saved: list, template: list) -> list:
    """Policy parameters for an observation of ``n`` features widened to ``N > n`` by features
    appended at the end: every array whose leading axis is ``n`` where the template's is ``N``
    (same other axes) is extended along it. A 2-D array (the first layer's kernel, inputs x
    units) gets zero rows, so the widened policy computes exactly the old one until training
    moves them; a 1-D array (the observation normaliser's mean and variance) gets the
    template's entries (its prior, mean 0 and variance 1). Arrays of equal shape are kept; any
    other mismatch is left for the caller's shape check."""
    pairs = [
        (s.shape[0], t.shape[0])
        for s, t in zip(saved, template, strict=True)
        if s.ndim == t.ndim >= 1 and s.shape != t.shape and s.shape[1:] == t.shape[1:]
    ]
    if not pairs or len(set(pairs)) != 1 or not pairs[0][0] < pairs[0][1]:
        return saved
    n, big = pairs[0]
    out = []
    for s, t in zip(saved, template, strict=True):
        widened = s.ndim == t.ndim >= 1 and (s.shape[0], t.shape[0]) == (n, big)
        if widened and s.shape[1:] == t.shape[1:]:
            if s.ndim == 1:
                s = np.concatenate([s, t[n:].astype(s.dtype)])
            elif s.ndim == 2:
                s = np.concatenate([s, np.zeros((big - n, s.shape[1]), s.dtype)])
        out.append(s)
    return out
