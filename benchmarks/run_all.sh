#!/usr/bin/env bash
# The slow tests (excluded from CI: G1 / MJX compiles, two-device BCG sharding), then print the
# benchmark commands behind the README tables (each takes minutes to an hour on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export JAX_PLATFORMS=cpu
.venv/bin/python -m pytest -q -m slow "$@"
grep -h '^`python benchmarks/\|^    python benchmarks/' README.md benchmarks/*.py | sort -u
