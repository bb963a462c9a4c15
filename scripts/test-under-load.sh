#!/usr/bin/env bash
# The suite N times in a row (default 5) while another process keeps one core busy; stops at the
# first red run. Prepare the environment as .ci/run does first (LAUNCHER_TEST_PG_URL set, and
# `scripts/local-slurm.sh up` for the Slurm module), or the tests needing them skip.
# Usage: bash scripts/test-under-load.sh [N] [pytest args...]   (logs: $LOG_DIR, default /tmp)
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
shift || true
log_dir=${LOG_DIR:-/tmp}
python3 -c "while True: pass" &
busy=$!
trap 'kill $busy 2>/dev/null' EXIT
for i in $(seq 1 "$runs"); do
  started=$(date +%s)
  bash scripts/test.sh -p no:cacheprovider "$@" > "$log_dir/test-under-load-$i.log" 2>&1
  rc=$?
  echo "run $i of $runs: exit $rc in $(( $(date +%s) - started ))s: $(tail -1 "$log_dir/test-under-load-$i.log")"
  if [ $rc -ne 0 ]; then exit $rc; fi
done
exit 0
