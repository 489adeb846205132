"""JAX settings of a ``bcg`` command: the backend (``--platform``), the precision and the
persistent compilation cache (``BCG_JAX_CACHE``), and the line that names the devices."""

from __future__ import annotations

import os
from pathlib import Path

PLATFORMS = ("cpu", "gpu", "cuda", "rocm", "tpu")


def select_platform(platform: str | None) -> None:
    """``--platform``: restrict JAX to one backend; None leaves the choice to JAX (its default
    device, or the ``JAX_PLATFORMS`` environment variable). Must run before JAX starts."""
    if platform is None:
        return
    if platform not in PLATFORMS:
        raise ValueError(f"--platform must be one of {', '.join(PLATFORMS)}, got {platform!r}")
    os.environ["JAX_PLATFORMS"] = platform
    import jax

    jax.config.update("jax_platforms", platform)


def device_line() -> str:
    """One line naming the JAX backend and the devices a command runs on."""
    import jax

    devs = jax.devices()
    kinds = sorted({d.device_kind for d in devs})
    return (
        f"[bcg] JAX {jax.__version__}, backend {jax.default_backend()}: {len(devs)} device(s) "
        f"({', '.join(kinds)})"
    )


def setup_jax(x64: bool) -> None:
    """Precision and the persistent compilation cache (the platform is JAX's choice)."""
    import jax

    jax.config.update("jax_enable_x64", x64)
    cache = os.environ.get("BCG_JAX_CACHE", str(Path.home() / ".cache" / "bcg" / "jax"))
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
