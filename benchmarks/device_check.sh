#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU (not run in CI; under 8 minutes on one GPU):
#   1. a Python with the CUDA build of JAX: the one already on the machine if it sees a GPU,
#      else .venv-gpu with jax[cuda12] at the version of constraints.txt (needs the registry);
#   2. the tests that make sense on a GPU (simulation, estimators, learners on tiny models);
#   3. g1_jump SHAC, 64 envs x 32 steps, a few iterations each with the analytic and the bcg
#      estimator, interleaved: env-steps/s of each and the device (benchmarks/throughput.py).
# Usage: bash benchmarks/device_check.sh [OUT_DIR]   (results: OUT_DIR/throughput.json, logs)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-results/device_check}}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 JAX_PLATFORMS=cuda
start=$(date +%s)
stage() { echo "== $1 ($(( $(date +%s) - start )) s)"; }

stage "python with a CUDA JAX"
PY=python3
if ! $PY -c "import jax, sys; sys.exit(0 if jax.devices('gpu') else 1)" 2>/dev/null; then
  JAXV=$(grep '^jax==' constraints.txt | cut -d= -f3)
  [ -x .venv-gpu/bin/python ] || python3 -m venv .venv-gpu
  .venv-gpu/bin/python -m pip install -q -c constraints.txt -e ".[dev]" "jax[cuda12]==$JAXV" || exit 1
  PY=.venv-gpu/bin/python
else
  # the machine's own JAX: add bcg and what it needs that is missing, without touching jax
  $PY -c "import bcg" 2>/dev/null || export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
$PY -c "import jax; print('JAX', jax.__version__, jax.devices())" || exit 1

stage "tests on the GPU"
timeout 240 $PY -m pytest -q -x -p no:cacheprovider tests/sim tests/estimators \
  tests/learners/test_shac.py tests/learners/test_masked_divergence.py 2>&1 | tee "$OUT/tests.log"
echo "tests exit code: ${PIPESTATUS[0]}"

stage "g1_jump SHAC throughput, analytic vs bcg"
timeout 300 $PY benchmarks/throughput.py --task g1_jump --stiffness stiff --num-envs 64 \
  --horizon 32 --estimators analytic,bcg --iterations 4 --json "$OUT/throughput.json" \
  2>&1 | tee "$OUT/throughput.log"
echo "throughput exit code: ${PIPESTATUS[0]}"
stage "done"
