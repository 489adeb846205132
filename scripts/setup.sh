#!/usr/bin/env bash
# Create .venv and install bcg with its pinned dependencies (only python3 needed).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev,export]"
# jax2onnx pins orbax-checkpoint<0.11.37 (conflicts with our pin; not needed to export)
.venv/bin/python -m pip install -q --no-deps jax2onnx==0.17.1
