"""The controller's view of a job's checkpoints: which new, complete checkpoints appeared in the
job's checkpoint store since the last look. The controller records each as a `checkpoint` event
on the attempt that wrote it (step, size), which is what the cost report uses to price the work
a preemption lost and the checkpoint storage.

A look is cheap: the store is listed, manifests read and files only size-checked
(`latest(verify="size")`), never downloaded. Errors never reach the run (a store that
cannot be read right now is looked at again later).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class SeenCheckpoint:
    checkpoint_id: str
    step: int
    size_bytes: int
    saved_at: str  # ISO 8601, from the manifest
    reason: str | None  # why the job saved (train.py: interval, preemption, final, ...)

    def event_data(self) -> dict:
        return {"checkpoint_id": self.checkpoint_id, "step": self.step, "size_bytes": self.size_bytes,
                "saved_at": self.saved_at, "reason": self.reason}  # fmt: skip


class CheckpointWatch:
    def __init__(self, location: str, *, seen: frozenset[str] = frozenset()) -> None:
        self.location = location
        self.remote = "://" in location and not location.startswith("file://")
        self._seen: set[str] = set(seen)  # checkpoint ids already recorded
        self._store = None
        self.errors = 0

    def baseline(self) -> None:
        """Checkpoints already there (earlier attempts, earlier controllers) are not news."""
        self._seen |= {c.checkpoint_id for c in self._checkpoints()}

    def new(self) -> SeenCheckpoint | None:
        """The newest complete checkpoint, when it was not seen before (checkpoints saved and
        pruned between two looks are skipped: what matters is the latest restorable state)."""
        if self._empty_local_dir():
            return None
        c = self._call(lambda store: store.latest(verify="size"))
        if c is None or c.checkpoint_id in self._seen:
            return None
        self._seen.add(c.checkpoint_id)
        saved = datetime.fromtimestamp(c.saved_at_unix_ns / 1e9, UTC).isoformat()
        size = sum(f.size_bytes for f in c.files)
        return SeenCheckpoint(c.checkpoint_id, c.step, size, saved, c.metadata.get("reason"))

    def _checkpoints(self) -> list:
        if self._empty_local_dir():
            return []
        return self._call(lambda store: store.checkpoints()) or []

    def _empty_local_dir(self) -> bool:
        """A local store whose folder holds nothing has no checkpoints: said without loading the
        checkpoint package (most runs save none before their first look)."""
        if "://" in self.location:
            return False
        try:
            with os.scandir(self.location) as entries:
                return next(entries, None) is None
        except OSError:  # missing or unreadable: the store says what it says
            return False

    def _call(self, fn):
        try:
            if self._store is None:
                from launcher.checkpoint import CheckpointStore

                self._store = CheckpointStore(self.location, keep_last=None)
            return fn(self._store)
        except Exception:
            self.errors += 1
            return None
