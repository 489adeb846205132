"""Data parallelism: one SHAC iteration with the env batch sharded over 2 forced host devices
equals the single-device one (float64), and the arrays really are split over the 2 devices.

JAX fixes its device count at import, so each case runs ``sharding_check.py`` in a fresh
process with ``XLA_FLAGS=--xla_force_host_platform_device_count=2``; inside it the same
learner runs without a mesh (device 0) and sharded over both devices.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from bcg.learners import parallel

SCRIPT = Path(__file__).parent / "sharding_check.py"


def _run(estimator: str) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    env["JAX_PLATFORMS"] = "cpu"
    env["BCG_JAX_CACHE"] = str(jax.config.jax_compilation_cache_dir)  # the tests' cache
    p = subprocess.run(
        [sys.executable, str(SCRIPT), estimator],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _check(out: dict, tol: float):
    assert out["devices"] == 2 and out["x64"]
    # the sharded run really is split over 2 devices (env batch) / replicated (parameters);
    # the reference run lives on one
    assert out["env_sharded_2"], out["env_sharding_2"]
    assert out["actor_replicated_2"]
    assert out["one_device_on"] == 1
    for k in ("grad", "actor", "critic", "state", "metrics"):
        assert out[k]["max_rel_diff"] <= tol, (k, out[k])
    m1, m2 = out["metrics_1"], out["metrics_2"]
    assert m1.keys() == m2.keys()
    assert m1["actor_grad_norm"] > 1e-4  # a real gradient was compared


def test_two_devices_match_one_analytic():
    out = _run("analytic")
    # parameters are float32 (networks initialised in float32): 1 ulp of summation order
    _check(out, tol=1e-6)
    err = out["errors"]
    assert "divisible by the number of devices (2)" in err["learner"]
    assert err["cli_rc"] == 2 and "bcg: error: num_envs (3) must be divisible" in err["cli"]


@pytest.mark.slow  # compiling BCG's MJX contact step twice: ~7 min cold on the 2-core machine
def test_two_devices_match_one_bcg():
    out = _run("bcg")
    _check(out, tol=1e-6)
    m = out["metrics_1"]
    # stiff impacts bundled, and the 2-slot compaction overflowed: the batch-level logic ran
    assert m["triggered_fraction"] > 0 and m["bundled_fraction"] > 0 and m["overflow"] > 0


def test_sharding_helpers_single_device():
    """In-process (one device): mesh, divisibility and sharding trees."""
    mesh = parallel.make_mesh(1)
    assert mesh.axis_names == ("envs",) and mesh.devices.size == 1
    parallel.check_divisible(3, mesh)
    with pytest.raises(ValueError, match="between 1 and"):
        parallel.make_mesh(len(jax.devices()) + 1)
    from toy import toy_env

    from bcg import estimators as E
    from bcg.learners.shac import SHAC, SHACConfig

    learner = SHAC(toy_env(), E.make("analytic"), SHACConfig(num_envs=2, actor_hidden=(4,)))
    assert learner.mesh is None and learner.state_shardings(None) is None
    sharded = learner.sharded(1)
    assert sharded.mesh is not None and learner.mesh is None  # a copy
    state = jax.eval_shape(sharded.init, jax.random.PRNGKey(0))
    sh = sharded.state_shardings(state)
    assert sh.env.step.spec == jax.sharding.PartitionSpec("envs")
    assert sh.ret.spec == jax.sharding.PartitionSpec("envs")
    assert sh.actor["params"]["log_std"].spec == jax.sharding.PartitionSpec()
