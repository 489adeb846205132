#!/usr/bin/env bash
# The main job on a built-in default: installs if needed, then trains the pogo stick to hop with
# SHAC + BCG on stiff (gated) contact: 60 iterations x 16 envs x 32 steps, a few minutes on a
# 2-core CPU. Prints the evaluation before and after training and saves results/demo_pogo/
# (training.png, metrics.csv, eval.json, TensorBoard events, checkpoints). Extra arguments go to
# `bcg train` (e.g. --estimator analytic to see vanilla SHAC stall on the same contact).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/bcg train --task pogo_hop --stiffness gated --learner shac --estimator bcg \
    --param bcg.tau=70 --iterations 60 --run-dir results/demo_pogo "$@"
