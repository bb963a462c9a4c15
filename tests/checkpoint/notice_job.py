"""Subprocess for the notice tests: a step loop that saves and exits on a preemption notice."""

from __future__ import annotations

import json
import sys
import time

from launcher.checkpoint import PREEMPTED_EXIT_CODE, CheckpointStore, notice


def main(url: str) -> int:
    store = CheckpointStore(url)
    poller = notice.install()
    found = store.restore()
    step = found_step = found.step if found else 0
    print(json.dumps({"ready": step, "polling": poller.cloud if poller else None}), flush=True)
    while step < 100_000:
        time.sleep(0.005)  # one "training step"
        step += 1
        if step == found_step + 1:  # the test's cue: the job has made progress
            print(json.dumps({"stepped": step}), flush=True)
        if notice.requested():
            store.save(step, {"progress.json": json.dumps({"step": step}).encode()})
            print(json.dumps({"preempted_at": step, "source": notice.notice().source}), flush=True)
            return PREEMPTED_EXIT_CODE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
