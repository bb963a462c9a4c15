"""The object-store interface every checkpoint storage backend implements.

Keys are '/'-separated paths relative to the store's root (a directory or a bucket prefix).
`put` must be atomic per object: a reader sees the old object, the new one, or none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class Storage(ABC):
    """Minimal object-store interface shared by the local, S3 and GCS backends."""

    url: str

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write one object atomically (durable when this returns)."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """Read one object; FileNotFoundError when it does not exist."""

    @abstractmethod
    def list(self, prefix: str = "") -> list[str]:
        """All keys under `prefix`, sorted."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove one object; already gone is success."""

    def size(self, key: str) -> int:
        """Size in bytes without reading the object; FileNotFoundError when it does not exist.
        Backends override this with a metadata call."""
        return len(self.get(key))

    def delete_prefix(self, prefix: str) -> None:
        """Remove every object under `prefix` (a checkpoint's folder)."""
        for key in self.list(prefix):
            self.delete(key)


def join_key(prefix: str, key: str) -> str:
    return f"{prefix}/{key}" if prefix else key
