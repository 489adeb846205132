#!/usr/bin/env bash
# Create .venv and install bcg with the exact dependency versions of constraints.txt (only
# python3 needed). A plain `pip install ".[export]"` resolves the same ranges without them.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c constraints.txt -e ".[dev,export]"
