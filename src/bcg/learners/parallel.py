"""Data parallelism for the gradient learners: the environment batch sharded over devices.

A :class:`jax.sharding.Mesh` with one axis ``"envs"`` over the chosen devices; every array
whose leading axis is the environment batch E (the estimator carry of the environments, the
per-environment episode counters and return streams, the rollout's per-step outputs) is
sharded along that axis (``PartitionSpec("envs")``: E / D environments per device), while the
parameters, optimiser moments, normalisers, RNG key and counters are replicated.

The iteration is compiled once for the whole mesh with ``jax.jit`` (GSPMD): the learner pins
the env axis with :func:`constrain_envs` (``lax.with_sharding_constraint``) at every rollout
step, and the harness commits the state with :func:`state_shardings` and compiles the
iteration with the same input / output shardings. GSPMD keeps the program's *global*
semantics: sums and means over environments (the actor loss, the metrics, the critic
minibatches) become per-device partial sums plus an all-reduce, and batch-level estimator
logic (BCG's ``lax.cond`` on "any environment bundles" and its argsort compaction into C
slots over the whole batch) sees the whole batch, gathering across devices where it must.
The result therefore equals the single-device one up to floating-point summation order
(tested with two forced host devices), and the RNG (threefry, partitionable) draws the same
numbers for any device count.

Several hosts. ``jax.devices()`` lists the devices of every process once
``jax.distributed.initialize()`` has run (one process per host, before any JAX
computation), so the same mesh spans hosts and the same compiled iteration runs as one
multi-controller SPMD program: each process starts the same script with the same seed, the
learner state is built identically everywhere (``init`` is deterministic) and committed to the
global shardings, and the replicated metrics are readable on every process. Not done and not
tested here: the harness writes its CSV / TensorBoard / checkpoints from every process and
reads sharded arrays with ``np.asarray``, which needs fully addressable arrays; a multi-host
run would gather the state (``jax.experimental.multihost_utils.process_allgather``) and
write from process 0 only.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = "envs"


def make_mesh(devices=None) -> Mesh:
    """A 1-D mesh ``("envs",)`` over ``devices``: a list of devices, a count (the first N of
    ``jax.devices()``) or None (all devices)."""
    avail = jax.devices()
    if devices is None:
        devs = avail
    elif isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        n = int(devices)
        if not 1 <= n <= len(avail):
            raise ValueError(
                f"devices must be between 1 and the {len(avail)} available device(s), got {n}"
            )
        devs = avail[:n]
    else:
        devs = list(devices)
        if not devs:
            raise ValueError("devices: empty device list")
    return Mesh(np.asarray(devs, dtype=object), (AXIS,))


def check_divisible(num_envs: int, mesh: Mesh) -> None:
    """ValueError unless the environment batch splits evenly over the mesh."""
    n = mesh.devices.size
    if num_envs % n:
        raise ValueError(
            f"num_envs ({num_envs}) must be divisible by the number of devices ({n}) to shard "
            f"the environment batch; choose num_envs a multiple of {n} or fewer devices"
        )


def env_sharding(mesh: Mesh, ndim: int = 1, axis: int = 0) -> NamedSharding:
    """Sharding of an array whose axis ``axis`` is the environment batch."""
    spec = [None] * max(ndim, axis + 1)
    spec[axis] = AXIS
    return NamedSharding(mesh, PartitionSpec(*spec))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def constrain_envs(tree, mesh: Mesh | None, axis: int = 0):
    """``with_sharding_constraint`` of every leaf of ``tree`` to the env axis ``axis``
    (no-op without a mesh, or for leaves without that axis)."""
    if mesh is None:
        return tree

    def one(x):
        if x.ndim <= axis:
            return x
        return jax.lax.with_sharding_constraint(x, env_sharding(mesh, x.ndim, axis))

    return jax.tree_util.tree_map(one, tree)


def tree_shardings(tree, mesh: Mesh, env_fields: tuple[str, ...] = ()) -> object:
    """Shardings for a learner state dataclass / NamedTuple: the top-level fields named in
    ``env_fields`` get the env sharding on every leaf (leading axis E), everything else is
    replicated."""
    rep = replicated(mesh)
    out = {}
    for name in _fields(tree):
        sub = getattr(tree, name)
        if name in env_fields:
            out[name] = jax.tree_util.tree_map(lambda x: env_sharding(mesh, x.ndim), sub)
        else:
            out[name] = jax.tree_util.tree_map(lambda x: rep, sub)
    return _replace(tree, out)


def _fields(tree):
    if hasattr(tree, "_fields"):
        return tree._fields
    import dataclasses

    return [f.name for f in dataclasses.fields(tree)]


def _replace(tree, values: dict):
    if hasattr(tree, "_replace"):
        return tree._replace(**values)
    import dataclasses

    return dataclasses.replace(tree, **values)


def is_sharded_over(x: jax.Array, n: int) -> bool:
    """True when ``x`` lives on ``n`` devices with its leading axis split between them."""
    return (
        len(x.sharding.device_set) == n
        and x.addressable_shards[0].data.shape[0] * n == (x.shape[0])
    )
