"""Atomic file writes for the catalog cache: temp file in the same folder, fsync, rename, fsync the folder.

A crash at any point leaves either the old file or the new one, never a torn one. `launcher`
uses the same helper for its own state (it may import `pricing`; `pricing` never imports it).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path | str, data: bytes, *, mode: int | None = None, durable: bool = True) -> None:
    """`mode`: the file's permissions (default 0600, private: mkstemp's). `durable=False` skips
    the fsyncs, for a file that means nothing after a power loss: the rename still makes it
    atomic against a crash of the process, without flushing the filesystem journal (each flush
    writes every dirty page it holds, 5-20 ms while a job writes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_text(path: Path | str, text: str, *, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def fsync_dir(directory: Path | str) -> None:
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
