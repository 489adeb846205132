#!/usr/bin/env bash
# The test command (README and CI): installs if needed, then the fast suite (slow tests are
# excluded; they run in benchmarks/run_all.sh) on BCG_TEST_WORKERS processes (default 2, whole
# files per process: most of a test's time is a single-threaded XLA compile).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export JAX_PLATFORMS=cpu
.venv/bin/python -m pytest -q -n "${BCG_TEST_WORKERS:-2}" --dist loadfile "$@"
