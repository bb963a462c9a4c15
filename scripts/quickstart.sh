#!/usr/bin/env bash
# First run on a fresh machine: install gpu-launcher (with the training extra) into .venv and
# run the example training job on the embedded local backend. requirements.lock is passed as
# constraints, so the user's install has exactly the versions the tests run (scripts/test.sh
# later only adds the test tools and extras to the same environment, never changes a version).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c requirements.lock -e '.[train]'
exec .venv/bin/launch task_specs/train.yaml --cheapest --yes
