"""The workdir snapshot is bounded and contained (real CLI): a workdir that is a link to `/` is
refused before anything is written, naming what made it large; LAUNCHER_HOME inside the workdir
is never copied into itself; links are copied as links, special files are skipped."""

from __future__ import annotations

import os
import stat
import time

from launcher.spec.workdir import MAX_WORKDIR_FILES
from tests.conftest import run_cli

SPEC = """name: wd
workdir: ./wd
resources: {cpus: 1+}
run: ls -la > listing.txt; echo done
launcher: {project: wd, owner: ana, experiment: e, expected_hours: 0.01, budget_usd: 1}
"""


def test_workdir_linked_to_root_is_refused_before_anything_is_written(tmp_path, launcher_home):
    os.symlink("/", tmp_path / "wd")
    (tmp_path / "spec.yaml").write_text(SPEC)
    t0 = time.monotonic()
    res = run_cli("launch", str(tmp_path / "spec.yaml"), "--yes", "--cheapest", timeout=120)
    assert res.returncode == 2, (res.returncode, res.stderr[-1500:])
    assert time.monotonic() - t0 < 60
    assert "workdir / holds more than" in res.stderr and "largest parts:" in res.stderr, res.stderr
    assert f"the limits are {MAX_WORKDIR_FILES:,} files" in res.stderr
    assert len(res.stderr) < 1500
    assert not (launcher_home / "ledger.db").exists() and not (launcher_home / "runs").exists()


def test_home_inside_workdir_links_and_fifos(tmp_path, monkeypatch):
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "train.py").write_text("print('hi')\n")
    os.symlink("/etc", wd / "etc-link")  # copied as a link, never its target
    os.mkfifo(wd / "pipe")  # a special file: reading it would block
    home = wd / ".launcher-home"
    monkeypatch.setenv("LAUNCHER_HOME", str(home))
    (tmp_path / "spec.yaml").write_text(SPEC)
    for _ in range(2):
        res = run_cli("launch", str(tmp_path / "spec.yaml"), "--yes", "--cheapest", timeout=120)
        assert res.returncode == 0, res.stderr[-1500:]
    snapshots = sorted(home.glob("runs/*/workdir"))
    assert len(snapshots) == 2
    for snap in snapshots:
        names = {p.name for p in snap.iterdir()}
        assert names == {"train.py", "etc-link", "listing.txt"}, names
        assert os.readlink(snap / "etc-link") == "/etc"
        assert stat.S_IMODE(os.stat(snap).st_mode) == 0o700
    assert sum(1 for _ in home.rglob("ledger.db")) == 1
