"""pricing.atomic: whole files or none, private by default, flushed to disk unless asked not to."""

from __future__ import annotations

import os
import stat

import pytest

from pricing import atomic
from pricing.atomic import atomic_write_bytes, atomic_write_text


@pytest.fixture
def fsyncs(monkeypatch):
    calls: list[int] = []
    real = os.fsync

    def counting(fd):
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", counting)
    return calls


def test_a_durable_write_replaces_the_file_privately_and_flushes_file_and_folder(tmp_path, fsyncs):
    path = tmp_path / "state" / "x.json"
    atomic_write_text(path, "old")
    atomic_write_text(path, "new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(os.listdir(path.parent)) == ["x.json"]  # no temp file left
    assert len(fsyncs) == 4  # the file and its folder, per write


def test_a_write_that_need_not_survive_a_power_loss_skips_the_flushes_only(tmp_path, fsyncs):
    path = tmp_path / "run" / "procs.json"
    atomic_write_text(path, "old")
    fsyncs.clear()
    atomic_write_text(path, "new", durable=False)
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(path.parent) == ["procs.json"]
    assert fsyncs == []


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "state" / "x.json"
    atomic_write_bytes(path, b"old", mode=0o644)

    def fail(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", fail)
    with pytest.raises(OSError, match="No space"):
        atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"old"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(path.parent) == ["x.json"]
