"""A full disk is told as a full disk (exit 5: what is full, how much is free, what it needs), on a
real full filesystem: a small tmpfs mounted for the test (root only; skipped otherwise, since a
size-limited filesystem is the honest way to fill a disk without filling the machine's). The
ledger is called damaged only when an integrity check says so; a job whose output fills the disk
ends its run `failed (disk_full)` with the attempt closed, not stranded `running`; a checkpoint
that does not fit says so and leaves nothing half-written. A LAUNCHER_HOME of another user is a
clear error (exit 5), not an internal error (70)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from launcher.ledger import Ledger
from tests.cli.launch_helpers import clean_env  # noqa: F401
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture
def small_fs():
    """A 16 MiB tmpfs: filled for real by the tests, removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem to fill needs root")
    d = Path(tempfile.mkdtemp(prefix="launcher-fullfs-"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        shutil.rmtree(d, ignore_errors=True)
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)])
        shutil.rmtree(d, ignore_errors=True)


def _fill(fs: Path, leave_bytes: int = 0) -> Path:
    """Fill `fs` up, leaving about `leave_bytes` free. Returns the filler file."""
    filler = fs / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                st = os.statvfs(fs)
                free = st.f_bavail * st.f_frsize
                if free <= leave_bytes:
                    break
                f.write(b"\0" * min(1 << 16, max(4096, free - leave_bytes)))
                f.flush()
        except OSError:
            pass
    return filler


def _spec(tmp_path: Path, name: str, run: str) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(textwrap.dedent(f"""
        name: {name}
        resources: {{infra: local}}
        run: {run}
        launcher: {{project: p, owner: ana, expected_hours: 0.01, max_restarts: 0}}
    """))
    return p


def test_full_disk_is_not_a_damaged_ledger(tmp_path, small_fs, monkeypatch) -> None:
    home = small_fs / "home"
    monkeypatch.setenv("LAUNCHER_HOME", str(home))
    assert run_cli("launch", str(_spec(tmp_path, "ok", "echo hi")), "--yes", "--cheapest").returncode == 0
    filler = _fill(small_fs)
    for args in (("runs", "list"), ("launch", str(_spec(tmp_path, "more", "echo hi")), "--yes", "--cheapest")):
        res = run_cli(*args, timeout=120)
        assert res.returncode == 5, (args, res.stderr)
        assert "is full" in res.stderr and "free there" in res.stderr and "free space" in res.stderr, res.stderr
        assert "damaged" not in res.stderr and "backup" not in res.stderr and "internal error" not in res.stderr
    filler.unlink()
    res = run_cli("runs", "list", "--json", timeout=60)
    assert res.returncode == 0 and '"ok"' in res.stdout, res.stderr  # intact: nothing to restore


def test_damaged_ledger_is_damaged_after_an_integrity_check(launcher_home) -> None:
    Ledger().close()
    db = launcher_home / "ledger.db"
    data = bytearray(db.read_bytes())
    data[100:612] = b"\xff" * 512  # the schema's b-tree page damaged, the file header intact
    db.write_bytes(bytes(data))
    res = run_cli("runs", "list", timeout=60)
    assert res.returncode == 5, res.stderr
    assert "is damaged" in res.stderr and "integrity check" in res.stderr and "restore it from a backup" in res.stderr


def test_job_filling_the_disk_ends_its_run_cleanly(tmp_path, small_fs, monkeypatch) -> None:
    home = small_fs / "home"
    monkeypatch.setenv("LAUNCHER_HOME", str(home))
    assert run_cli("launch", str(_spec(tmp_path, "warm", "echo hi")), "--yes", "--cheapest").returncode == 0
    _fill(small_fs, leave_bytes=6 << 20)  # room for the run's 4 MiB reserve, and 2 MiB for its output
    spec = _spec(tmp_path, "noisy", "'yes \"a line of output\" | head -c 100000000; echo after $?; sleep 30'")
    res = run_cli("launch", str(spec), "--yes", "--cheapest", timeout=180)
    assert res.returncode == 5, res.stderr
    assert "disk full" in res.stderr and "free there" in res.stderr and "internal error" not in res.stderr, res.stderr
    assert "failed: disk_full" in res.stderr, res.stderr
    with Ledger() as led:
        run = next(r for r in led.list_runs() if r.name == "noisy")
        attempts = led.attempts(run.run_id)
        events = [e.kind for e in led.events(run.run_id)]
    assert (run.state, run.end_reason) == ("failed", "disk_full")
    assert len(attempts) == 1 and attempts[0].ended_at is not None and attempts[0].end_reason
    assert "disk_full" in events
    with Ledger() as led:
        assert led.open_attempts(run_id=run.run_id) == []
    assert not (home / "runs" / run.run_id / ".space-reserve").exists()


def test_checkpoint_that_does_not_fit_says_so_and_leaves_nothing(small_fs) -> None:
    from launcher.checkpoint.store import CheckpointStore
    from launcher.errors import DiskFullError

    store = CheckpointStore(small_fs / "ckpt")
    store.save(1, {"w": b"x" * 1000})
    _fill(small_fs, leave_bytes=1 << 20)
    with pytest.raises(DiskFullError) as err:
        store.save(2, {"w": b"y" * (3 << 20)})
    msg = str(err.value)
    assert "checkpoint step 2" in msg and "3.0 MiB" in msg and "free there" in msg, msg
    assert [c.step for c in store.checkpoints()] == [1]
    assert sorted(p.name for p in (small_fs / "ckpt").iterdir()) == [store.checkpoints()[0].checkpoint_id]


def test_another_users_home_is_a_clear_error_not_an_internal_one(tmp_path) -> None:
    """LAUNCHER_HOME is root's 0700 directory; the command runs as `nobody`."""
    from tests.server.helpers import nobody_runs_python, searchable_dir

    with nobody_runs_python(), searchable_dir() as d:
        home = d / "home"
        home.mkdir(mode=0o700)
        assert run_cli("runs", "list", env={"LAUNCHER_HOME": str(home)}).returncode == 0  # root's state now exists
        spec = d / "t.yaml"
        spec.write_text("name: t\nrun: echo hi\nlauncher: {project: p, expected_hours: 0.01}\n")
        os.chmod(spec, 0o644)
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "LAUNCHER_HOME": str(home), "HOME": str(d),
               "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}  # fmt: skip
        for args in (("runs", "list"), ("launch", str(spec), "--yes", "--cheapest", "--cloud", "local"), ("doctor",)):
            res = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "launcher.cli.main", *args],
                capture_output=True, text=True, env=env, cwd=str(d), timeout=120,
            )  # fmt: skip
            assert res.returncode == 5, (args, res.returncode, res.stderr)
            assert "Permission denied" in res.stderr and str(home) in res.stderr and "LAUNCHER_HOME" in res.stderr, res.stderr
            assert "internal error" not in res.stderr and "Traceback" not in res.stderr
