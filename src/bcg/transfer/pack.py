"""The smallest form of a trained SHAC / BPTT policy: a run directory holding ``run.json`` and
``policy.npz`` (the policy's parameters, :meth:`learner.policy_params`: actor and observation
normaliser) instead of whole-learner checkpoints, plus the run's ``metrics.csv`` and
``training.png``. :func:`bcg.transfer.policy.load_policy` reads it, so ``bcg eval``,
``transfer``, ``export`` and ``deploy`` accept it.

    pack_policy("runs/g1_jump/checkpoints/400", "results/g1/A")   # bcg pack RUN OUT
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

POLICY_FILE = "policy.npz"
COPIED = ("metrics.csv", "training.png", "eval.json")


def pack_policy(path, out) -> Path:
    """Write the policy of the run or checkpoint ``path`` into the folder ``out``; returns it.
    ``run.json`` gains ``packed``: the source, iteration and env steps."""
    import jax

    from bcg.transfer.policy import load_state, split_checkpoint_path

    run_dir, _ = split_checkpoint_path(path)
    run, learner, state, it, env_steps = load_state(path)
    leaves = jax.tree_util.tree_leaves(learner.policy_params(state))
    out = Path(out)
    if out.resolve() == run_dir.resolve():
        raise ValueError(f"pack into another folder than the run itself ({run_dir})")
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / POLICY_FILE, *[np.asarray(x) for x in leaves])
    packed = {"source": str(path), "iteration": it, "env_steps": env_steps}
    (out / "run.json").write_text(json.dumps({**run, "packed": packed}, indent=2))
    for name in COPIED:
        if (run_dir / name).exists():
            shutil.copy2(run_dir / name, out / name)
    _trim_rows(out / "metrics.csv", it)
    return out


def _trim_rows(path: Path, iteration: int) -> None:
    """Keep the CSV rows up to the packed iteration (a run may have logged past it)."""
    if not path.exists():
        return
    lines = path.read_text().splitlines()
    keep = [lines[0]] + [x for x in lines[1:] if int(float(x.split(",")[0])) <= iteration]
    path.write_text("\n".join(keep) + "\n")


def load_packed_params(run_dir: Path, learner):
    """The policy parameters in ``run_dir/policy.npz``, in the pytree of ``learner``'s (shapes
    checked: a ValueError names a mismatch)."""
    import jax

    template = learner.policy_params(learner.init(jax.random.PRNGKey(0)))
    leaves, treedef = jax.tree_util.tree_flatten(template)
    with np.load(run_dir / POLICY_FILE) as f:
        saved = [f[f"arr_{i}"] for i in range(len(f.files))]
    if [x.shape for x in saved] != [np.shape(x) for x in leaves]:
        raise ValueError(
            f"{run_dir / POLICY_FILE} does not fit the policy that run.json builds "
            f"({len(saved)} arrays vs {len(leaves)}, or other shapes)"
        )
    return jax.tree_util.tree_unflatten(
        treedef, [jax.numpy.asarray(s, x.dtype) for s, x in zip(saved, leaves, strict=True)]
    )
