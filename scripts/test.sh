#!/usr/bin/env bash
# The test command (README, CI): fast suite, slow tests excluded (see benchmarks/).
set -euo pipefail
cd "$(dirname "$0")/.."
export JAX_PLATFORMS=cpu
.venv/bin/python -m pytest -q "$@"
