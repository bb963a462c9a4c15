"""Checkpoint objects as files under a directory; every write is temp file + fsync + rename."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from launcher.atomic import atomic_write_bytes, fsync_dir
from launcher.checkpoint.storage_base import Storage


class LocalStorage(Storage):
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.url = f"file://{self.root}"

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if path != self.root and self.root not in path.parents:
            raise ValueError(f"key {key!r} escapes the checkpoint root")
        return path

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        if not path.parent.is_dir():
            # Make the new folder's own directory entry durable too, not just the file in it.
            path.parent.mkdir(parents=True, exist_ok=True)
            parent = path.parent
            while parent != self.root and self.root in parent.parents:
                fsync_dir(parent.parent)
                parent = parent.parent
        atomic_write_bytes(path, data)

    def get(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def size(self, key: str) -> int:
        return self._path(key).stat().st_size

    def list(self, prefix: str = "") -> list[str]:
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        keys = []
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                keys.append(Path(dirpath, name).relative_to(self.root).as_posix())
        return sorted(keys)

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            pass

    def delete_prefix(self, prefix: str) -> None:
        # Leftover temp files (from a kill during a write) go with the folder.
        path = self._path(prefix)
        shutil.rmtree(path, ignore_errors=True)
        fsync_dir(path.parent)
