#!/usr/bin/env bash
# First run on a fresh machine: install gpu-launcher (with the training extra) into .venv and
# run the example training job on the embedded local backend.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[train]'
exec .venv/bin/launch task_specs/train.yaml --cheapest --yes
