"""A separate process writing to the ledger, for the concurrency and kill -9 tests.

    python worker.py burst URL GO_FILE INDEX N_RUNS SHARED_RUN   -> one JSON line on stdout
    python worker.py loop URL PREFIX                             -> 'kind id' per committed write
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

from launcher.errors import ConflictError
from launcher.ledger import EndReason, EventKind, Ledger, NewAttempt, RunRecord, RunState

ATTEMPT = NewAttempt(cloud="aws", region="us-east-1", instance_type="g5.xlarge", price_usd_per_hour=1.0, spot=True)


def run_record(run_id: str, owner: str) -> RunRecord:
    return RunRecord(run_id=run_id, name="w", spec_hash="0" * 64, spec_yaml="run: true", project="conc", owner=owner)


def burst(url: str, go: Path, index: int, n_runs: int, shared: str) -> None:
    while not go.exists():  # start together
        time.sleep(0.005)
    out: dict[str, object] = {"index": index}
    with Ledger(url) as led:  # the schema upgrade races here on a fresh database
        try:
            led.create_run(run_record(shared, "shared"))
            out["created_shared"] = True
        except ConflictError:
            out["created_shared"] = False
        for i in range(n_runs):
            rid = f"w{index}-{i}"
            led.create_run(run_record(rid, f"o{index}"), tags={"worker": str(index)})
            a = led.add_attempt(rid, ATTEMPT)
            led.set_run_state(rid, RunState.RUNNING, expected_from=RunState.PENDING)
            led.add_event(rid, EventKind.CHECKPOINT, {"i": i}, attempt_id=a.attempt_id)
            led.heartbeat(run_id=rid)
            led.end_attempt(a.attempt_id, EndReason.COMPLETED)
        try:
            led.set_run_state(shared, RunState.RUNNING, expected_from=RunState.PENDING)
            out["won_cas"] = True
        except ConflictError:
            out["won_cas"] = False
        out["shared_seq"] = led.add_attempt(shared, ATTEMPT).seq
    print(json.dumps(out), flush=True)


def loop(url: str, prefix: str) -> None:
    with Ledger(url) as led:
        print("ready -", flush=True)
        for i in itertools.count():
            rid = f"{prefix}-{i}"
            led.create_run(run_record(rid, "loop"), tags={"i": str(i)})
            print(f"run {rid}", flush=True)
            a = led.add_attempt(rid, ATTEMPT)
            print(f"attempt {a.attempt_id}", flush=True)
            e = led.add_event(rid, EventKind.LOG, {"line": "x" * 200})
            print(f"event {e.id}", flush=True)


if __name__ == "__main__":
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "burst":
        burst(url, Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        loop(url, sys.argv[3])
