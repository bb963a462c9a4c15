"""The controller's checkpoint watch: an empty local folder has nothing (answered without the
checkpoint package); what a job saves there later is seen once, with its step and size."""

import subprocess
import sys

from launcher.checkpoint import CheckpointStore
from launcher.controller.checkpoint_watch import CheckpointWatch
from tests.conftest import REPO


def test_empty_folder_then_a_save_then_nothing_new(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    watch = CheckpointWatch(str(folder))
    watch.baseline()
    assert watch.new() is None and watch.errors == 0
    CheckpointStore(str(folder)).save(7, {"weights.bin": b"x" * 1000}, metadata={"reason": "interval"})
    seen = watch.new()
    assert seen is not None
    assert (seen.step, seen.size_bytes, seen.reason) == (7, 1000, "interval")
    assert watch.new() is None  # seen once


def test_checkpoints_already_there_are_not_news(tmp_path):
    folder = tmp_path / "checkpoints"
    CheckpointStore(str(folder)).save(3, {"w": b"abc"})
    watch = CheckpointWatch(str(folder))
    watch.baseline()
    assert watch.new() is None


def test_an_empty_folder_is_answered_without_loading_the_checkpoint_package(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    probe = (
        "import sys\n"
        "from launcher.controller.checkpoint_watch import CheckpointWatch\n"
        "w = CheckpointWatch(sys.argv[1]); w.baseline()\n"
        "print(w.new(), 'launcher.checkpoint' in sys.modules)\n"
    )
    p = subprocess.run([sys.executable, "-c", probe, str(folder)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["None", "False"]
