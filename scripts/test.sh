#!/usr/bin/env bash
# Set up the pinned test environment in .venv and run the whole default test suite.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Skip the install when the lockfile has not changed since the last one (fast reruns).
stamp=.venv/.lock-$(sha256sum requirements.lock pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.lock
  .venv/bin/python -m pip install -q --no-deps -e .
  rm -f .venv/.lock-*
  touch "$stamp"
fi
[ "${TEST_SH_INSTALL_ONLY:-}" = 1 ] && exit 0
export SKYPILOT_DISABLE_USAGE_COLLECTION=1
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadgroup "$@"
