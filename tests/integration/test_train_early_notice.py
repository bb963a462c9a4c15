"""task_specs/train.py gets a preemption notice before torch is even imported: it must still
exit with PREEMPTED_EXIT_CODE (not die with 143), without training a step or writing anything."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from launcher.checkpoint import PREEMPTED_EXIT_CODE

TRAIN = Path(__file__).resolve().parents[2] / "task_specs" / "train.py"


def test_sigterm_during_start_up_exits_75_without_training(tmp_path):
    ckpt = tmp_path / "ck"
    proc = subprocess.Popen(
        [sys.executable, str(TRAIN), "--epochs", "1", "--checkpoint-dir", str(ckpt)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    first = proc.stdout.readline()
    # The handler is live from the first line on, while torch and numpy are still loading.
    assert json.loads(first) == {"event": "start", "notice_handler": True}
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == PREEMPTED_EXIT_CODE, err[-2000:]
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert events == [{"event": "preempted", "step": 0, "source": "signal", "before_training": True}]
    assert not ckpt.exists() or not any(ckpt.iterdir())  # nothing trained, nothing saved
