"""Subprocess for the kill -9 test: resume from the latest checkpoint, then save forever.

The content of step N is a pure function of N, so the test can check what it loads against
an independent expectation, not only against the manifest."""

from __future__ import annotations

import json
import random
import sys

from launcher.checkpoint import CheckpointStore

SIZE_BYTES = 3 * 1024 * 1024


def content(step: int) -> dict[str, bytes]:
    rng = random.Random(step)
    return {
        "weights.bin": rng.randbytes(SIZE_BYTES),
        "optimizer.bin": rng.randbytes(SIZE_BYTES // 3),
        "progress.json": json.dumps({"step": step}).encode(),
    }


def main(url: str) -> None:
    store = CheckpointStore(url, keep_last=2)
    found = store.restore()  # the single writer repairs at start-up
    step = found.step + 1 if found else 0
    print(f"resumed {found.step if found else -1}", flush=True)
    while True:
        store.save(step, content(step))
        print(f"saved {step}", flush=True)
        step += 1


if __name__ == "__main__":
    main(sys.argv[1])
