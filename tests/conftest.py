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
# XLA compiles per test (count, seconds): many small ones mean code run op by op, outside jit
_XLA_COMPILES: dict = collections.defaultdict(lambda: [0, 0.0])
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_compiled = [0, 0.0]  # this process's running total
_reported = [0, 0.0]  # ... as of the last report


def _count_compile(event, duration_secs, **_):
    if event == _COMPILE_EVENT:
        _compiled[0] += 1
        _compiled[1] += duration_secs


jax.monitoring.register_event_duration_secs_listener(_count_compile)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report carries the XLA compiles made since the previous report (worker
    side; pytest-xdist sends user_properties to the controller)."""
    delta = (_compiled[0] - _reported[0], _compiled[1] - _reported[1])
    _reported[:] = _compiled
    outcome = yield
    rep = outcome.get_result()
    rep.user_properties = [*rep.user_properties, ("xla_compiles", delta)]


def pytest_runtest_logreport(report):
    _FILE_SECONDS[report.nodeid.split("::")[0]] += report.duration
    for name, value in report.user_properties:
        if name == "xla_compiles":
            _XLA_COMPILES[report.nodeid][0] += value[0]
            _XLA_COMPILES[report.nodeid][1] += value[1]


def pytest_terminal_summary(terminalreporter):
    if not _FILE_SECONDS:
        return
    total = sum(_FILE_SECONDS.values())
    terminalreporter.section("time per test file (setup + call + teardown; all workers)")
    for path, sec in _FILE_SECONDS.most_common(20):
        terminalreporter.write_line(f"{sec:8.1f}s {100 * sec / total:5.1f}%  {path}")
    terminalreporter.write_line(f"{total:8.1f}s in {len(_FILE_SECONDS)} files")
    if _XLA_COMPILES:
        terminalreporter.section("XLA compiles per test (most first; compile seconds)")
        top = sorted(_XLA_COMPILES.items(), key=lambda kv: -kv[1][0])[:10]
        for nodeid, (n, sec) in top:
            terminalreporter.write_line(f"{n:6d} {sec:7.1f}s  {nodeid}")
        n_all = sum(n for n, _ in _XLA_COMPILES.values())
        s_all = sum(sec for _, sec in _XLA_COMPILES.values())
        terminalreporter.write_line(f"{n_all:6d} {s_all:7.1f}s in all")
