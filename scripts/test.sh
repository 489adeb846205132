#!/usr/bin/env bash
# The test command (README and CI): installs if needed, then the fast suite on BCG_TEST_WORKERS
# processes (default 2, whole files per process: most of a test's time is a single-threaded XLA
# compile), and prints the 25 slowest tests. `--full` also runs the long end-to-end tests
# (marked slow); other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export JAX_PLATFORMS=cpu
args=()
for a in "$@"; do
  if [ "$a" = "--full" ]; then args+=(-m "slow or not slow"); else args+=("$a"); fi
done
.venv/bin/python -m pytest -q -n "${BCG_TEST_WORKERS:-2}" --dist loadfile --durations=25 "${args[@]}"
