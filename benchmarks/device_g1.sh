#!/usr/bin/env bash
# G1 jump on a GPU machine that has a CUDA JAX but neither MuJoCo nor the G1 model and no
# network (the `device` machines of this workplace). Not run in CI.
#
# Prepare here (with the registry), then carry .whl, .g1xml and the checkpoint's run directory:
#   bash scripts/device_bundle.sh          # wheels into .whl/, the G1 MJCF into .g1xml/
# Run there (T1 + T2 seconds at most):
#   bash benchmarks/device_g1.sh [OUT_DIR]
#   1. g1_policy_gradient.py at the initial policy and checkpoint 50 of
#      results/g1/shac_checkpoints/analytic_it50: summed variance and seconds per actor-window gradient
#      pass (--timing gradient: no SHAC iteration to compile), analytic vs bcg (tau 981.22 N,
#      12 slots, env_clip 3), 64 envs x 32 steps, interleaved;
#   2. throughput.py at 1024 envs x 32 steps, analytic vs bcg (the same settings, slots as a
#      fraction of the batch): env-steps/s of each on the GPU.
# Compiling dominates there (2026-12-06, H100, JAX 0.11.2: 189 s for the analytic gradient of
# stage 1). The JAX compilation cache is therefore packed into OUT_DIR/jax_cache.tar (if under
# 15 MiB) at the end; carried back as .jaxcache.tar, it is unpacked first, so that a later run on
# the same GPU kind and JAX version loads the executables instead of compiling them again.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-results/device_g1}}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 JAX_PLATFORMS=cuda,cpu
start=$(date +%s)
stage() { echo "== $1 ($(( $(date +%s) - start )) s)"; }
PY=${PY:-python3}
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site:$PWD/src:$PWD/benchmarks"
else
  export PYTHONPATH="$PWD/src:$PWD/benchmarks"
fi
[ -f .g1xml/g1_mjx_feetonly.xml ] && export BCG_G1_MJCF="$PWD/.g1xml/g1_mjx_feetonly.xml"
CACHE="$HOME/.cache/bcg/jax"  # the benchmarks' compilation cache directory
mkdir -p "$CACHE"
[ -f .jaxcache.tar ] && tar -xf .jaxcache.tar -C "$CACHE" && echo "cache: $(ls "$CACHE" | wc -l) entries"
pack_cache() {
  tar -cf "$OUT/jax_cache.tar" -C "$CACHE" . 2>/dev/null
  [ "$(stat -c %s "$OUT/jax_cache.tar")" -lt 15728640 ] || rm -f "$OUT/jax_cache.tar"
}
trap pack_cache EXIT
$PY -c "import jax, mujoco, mujoco.mjx as mjx; print('JAX', jax.__version__, jax.devices(), \
'mujoco', mujoco.__version__)" || exit 1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

BCG='{"tau": 981.22, "capacity": 12, "env_clip": 3.0}'
stage "g1_policy_gradient, 64 x 32, initial and checkpoint 50"
timeout "${T1:-330}" $PY benchmarks/g1_policy_gradient.py --bcg-params "$BCG" \
  --timing gradient --repeats 3 --out "$OUT/g1_policy_gradient_gpu.json" 2>&1 \
  | tee "$OUT/g1_policy_gradient_gpu.log"
echo "g1_policy_gradient exit code: ${PIPESTATUS[0]}"

stage "throughput, 1024 x 32, analytic vs bcg"
timeout "${T2:-200}" $PY benchmarks/throughput.py --task g1_jump --stiffness stiff \
  --num-envs 1024 --horizon 32 --estimators analytic,bcg --iterations 3 --warmup 1 \
  --param bcg.tau=981.22 --param bcg.capacity=0.1875 --param bcg.env_clip=3 \
  --json "$OUT/throughput_1024.json" 2>&1 | tee "$OUT/throughput_1024.log"
echo "throughput exit code: ${PIPESTATUS[0]}"
stage "done"
