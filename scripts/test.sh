#!/usr/bin/env bash
# The test command (README and CI): installs if needed, then the fast suite (slow tests are
# excluded; they run in benchmarks/run_all.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export JAX_PLATFORMS=cpu
.venv/bin/python -m pytest -q "$@"
