"""kill -9 at random moments during saves, many times: the next resume always loads a valid
checkpoint with exactly the content that was saved for its step, and progress never goes back."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

from launcher.checkpoint import CheckpointStore

from tests.checkpoint.saver_loop import content

ITERATIONS = 32


def test_kill_dash_9_during_saves_never_leaves_an_unloadable_store(tmp_path):
    root = tmp_path / "ck"
    script = Path(__file__).parent / "saver_loop.py"
    rng = random.Random(1234)
    last_step = -1
    killed_mid_save = 0
    for _ in range(ITERATIONS):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(root)], stdout=subprocess.PIPE, text=True, bufsize=1
        )
        assert proc.stdout.readline().startswith("resumed ")  # killing after start-up repair
        time.sleep(rng.uniform(0.0, 0.25))
        proc.kill()
        proc.wait()
        proc.stdout.close()

        leftovers = [
            p for p in root.iterdir()
            if not (p / "MANIFEST.json").exists() or any(q.name.startswith(".") for q in p.iterdir())
        ] if root.exists() else []
        killed_mid_save += bool(leftovers)

        store = CheckpointStore(root)
        loaded = store.restore(repair=False)
        if last_step >= 0:
            assert loaded is not None, "a committed checkpoint vanished after kill -9"
        if loaded is not None:
            assert loaded.step >= last_step
            assert loaded.files == content(loaded.step)
            last_step = loaded.step
    assert last_step > 0
    # The kills must actually have landed inside saves, or this test proves nothing.
    assert killed_mid_save >= ITERATIONS // 8, killed_mid_save
