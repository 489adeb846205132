"""Regression guard for jax/jaxlib 0.10.2 on CPU (jax issue 39103).

That release compiles ``vmap(lambda r: sum((M @ r) ** 2))`` over many rows to a wrong reduction:
on rows ``(i, 0, 0)`` with ``M = I`` the last entry must be ``(n - 1)^2`` exactly, but the jitted
result is off by about 0.1-0.8% from 16385 rows (float64) / 32769 rows (float32) up. Our dynamics
are full of this pattern (vmapped Jacobian products followed by sums), so a miscompiling JAX must
fail the suite. The check runs in a subprocess so that it can switch float64 on and off without
touching the rest of the suite's JAX configuration.
"""

import json
import os
import subprocess
import sys

import pytest

_SCRIPT = r"""
import json, sys
import jax
jax.config.update("jax_enable_x64", sys.argv[1] == "float64")
import jax.numpy as jnp

dtype, n = getattr(jnp, sys.argv[1]), int(sys.argv[2])
i = jnp.arange(n, dtype=dtype)
x = jnp.stack((i, jnp.zeros_like(i), jnp.zeros_like(i)), axis=1)
m = jnp.eye(3, dtype=dtype)
f = lambda x: jax.vmap(lambda row: jnp.sum((m @ row) ** 2))(x)
print(json.dumps({"eager": float(f(x)[-1]), "jit": float(jax.jit(f)(x)[-1]),
                  "jax": jax.__version__, "backend": jax.default_backend()}))
"""


@pytest.mark.parametrize("dtype,n", [("float64", 16_385), ("float32", 32_769)])
def test_vmapped_matvec_reduction_jit_equals_eager(dtype, n):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, dtype, str(n)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    exact = float(n - 1) ** 2  # representable exactly in both dtypes at these sizes
    assert r["eager"] == exact, r
    assert r["jit"] == r["eager"], f"jit != eager on JAX {r['jax']} ({r['backend']}): {r}"


def test_bcg_refuses_the_miscompiling_jax(monkeypatch):
    from bcg import _check_jax_version

    with pytest.raises(RuntimeError, match="0.10.2"):
        _check_jax_version("0.10.2")
    _check_jax_version("0.10.1")
