"""Wall-time comparison robust to background load on a shared machine."""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import numpy as np


def interleaved_medians(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median wall time (s) of each zero-argument call, the calls interleaved round-robin so
    that background load hits every entry alike (results are waited for with
    ``jax.block_until_ready``)."""
    ts = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f())
            ts[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in ts.items()}
