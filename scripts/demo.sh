#!/usr/bin/env bash
# The main job on a built-in default: installs if needed, then the gradient report on the stiff
# bouncing ball (table printed; results/grad_bouncing_ball.{json,png} saved). Extra arguments go
# to `bcg grad`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export JAX_PLATFORMS=cpu
.venv/bin/bcg grad "$@"
