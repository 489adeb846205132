"""Test configuration: float64, CPU, persistent compilation cache (compiles are slow here)."""

import collections
import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
# machine-wide cache: survives fresh clones on the same machine (CI runs on it)
_cache = Path(os.environ.get("BCG_JAX_CACHE", Path.home() / ".cache" / "bcg" / "jax-tests"))
jax.config.update("jax_compilation_cache_dir", str(_cache))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@pytest.fixture
def restore_jax(monkeypatch):
    """For in-process CLI runs: keep the tests' compile cache, and restore float64 afterwards
    (the CLI sets the precision of the process)."""
    cache = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("BCG_JAX_CACHE", str(cache))
    yield
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_compilation_cache_dir", cache)


# where the suite's time goes, per file (scripts/test.sh also prints the slowest tests)
_FILE_SECONDS: collections.Counter = collections.Counter()


def pytest_runtest_logreport(report):
    _FILE_SECONDS[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    if not _FILE_SECONDS:
        return
    total = sum(_FILE_SECONDS.values())
    terminalreporter.section("time per test file (setup + call + teardown; all workers)")
    for path, sec in _FILE_SECONDS.most_common(20):
        terminalreporter.write_line(f"{sec:8.1f}s {100 * sec / total:5.1f}%  {path}")
    terminalreporter.write_line(f"{total:8.1f}s in {len(_FILE_SECONDS)} files")
