"""CheckpointStore: atomic saves, the latest valid checkpoint, keep-last-N, never a torn load.

Layout under the store root (a directory or a bucket prefix), one folder per save:

    ckpt-000000000120-<unique>/state.pt
    ckpt-000000000120-<unique>/progress.json
    ckpt-000000000120-<unique>/MANIFEST.json     <- written last: the commit point

Each object is written atomically (temp file + fsync + rename locally; a single PUT in S3/GCS).
A folder without a manifest is an unfinished save; a folder whose manifest does not match its
files (missing, truncated, corrupted) is torn. Neither is ever returned by `latest()` or
`restore()`; with `repair=True` (the single writer, at start-up) both are deleted.

One writer per store at a time: a repairing reader would delete a live writer's unfinished save.
Readers that run beside a writer (the controller) pass `repair=False`.
"""

from __future__ import annotations

import errno
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.checkpoint.manifest import MANIFEST_NAME, FileEntry, Manifest, ManifestError, sha256_hex
from launcher.checkpoint.storage import Storage, open_storage
from launcher.errors import BadInputError, NotFoundError, disk_full

PREFIX = "ckpt-"
_ID_RE = re.compile(r"^ckpt-(\d{12})-[0-9a-f]+$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*(/[A-Za-z0-9_\-][A-Za-z0-9_.\-]*)*$")


class CheckpointCorruptError(NotFoundError):
    """A checkpoint exists but its files do not match its manifest (torn or damaged)."""


@dataclass(frozen=True)
class Checkpoint:
    checkpoint_id: str
    step: int
    saved_at_unix_ns: int
    files: tuple[FileEntry, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    url: str = ""

    @property
    def file_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.files)


@dataclass(frozen=True)
class LoadedCheckpoint:
    checkpoint: Checkpoint
    files: dict[str, bytes]

    @property
    def step(self) -> int:
        return self.checkpoint.step


@dataclass(frozen=True)
class _Scan:
    committed: list[tuple[Checkpoint, str]]  # (checkpoint, id), newest first
    unreadable: list[str]  # ids whose manifest cannot be parsed (torn)
    uncommitted: list[str]  # ids without a manifest (unfinished save)


class CheckpointStore:
    """Checkpoints of one job in one place (`/path`, `file://`, `s3://b/p`, `gs://b/p`)."""

    def __init__(
        self,
        location: str | Path | Storage,
        *,
        keep_last: int | None = 3,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if keep_last is not None and keep_last < 1:
            raise BadInputError(f"keep_last must be at least 1 (got {keep_last})")
        self.storage = location if isinstance(location, Storage) else open_storage(str(location))
        self.keep_last = keep_last
        self._clock_ns = clock_ns

    @property
    def url(self) -> str:
        return self.storage.url

    # ---- writing -------------------------------------------------------------------------
    def save(
        self,
        step: int,
        files: Mapping[str, bytes | bytearray | memoryview | str | Path],
        metadata: Mapping[str, Any] | None = None,
    ) -> Checkpoint:
        """Write the files, then the manifest (the commit), then prune to `keep_last`.

        `files` maps a name to bytes or to a local file path whose content is copied."""
        if step < 0:
            raise BadInputError(f"checkpoint step must be >= 0 (got {step})")
        if not files:
            raise BadInputError("a checkpoint needs at least one file")
        blobs: dict[str, bytes] = {}
        for name, value in files.items():
            if not _NAME_RE.match(name) or name == MANIFEST_NAME:
                raise BadInputError(f"invalid checkpoint file name {name!r}")
            blobs[name] = Path(value).read_bytes() if isinstance(value, (str, Path)) else bytes(value)
        now = self._clock_ns()
        ckpt_id = f"{PREFIX}{step:012d}-{now:x}{secrets.token_hex(3)}"
        manifest = Manifest(
            checkpoint_id=ckpt_id,
            step=step,
            saved_at_unix_ns=now,
            files=tuple(FileEntry(n, sha256_hex(d), len(d)) for n, d in blobs.items()),
            metadata=dict(metadata or {}),
        )
        try:
            manifest_bytes = manifest.to_bytes()  # before any write: bad metadata fails cleanly
        except (TypeError, ValueError) as exc:
            raise BadInputError(f"checkpoint metadata must be JSON values: {exc}") from exc
        try:
            for name, data in blobs.items():
                self.storage.put(f"{ckpt_id}/{name}", data)
            self.storage.put(f"{ckpt_id}/{MANIFEST_NAME}", manifest_bytes)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self._delete(ckpt_id)  # give the room back: an unfinished save is never loaded anyway
            needed = sum(len(d) for d in blobs.values()) + len(manifest_bytes)
            where = getattr(self.storage, "root", None) or self.url
            raise disk_full(f"checkpoint step {step}", where, needed_bytes=needed) from exc
        checkpoint = self._checkpoint(manifest)
        if self.keep_last is not None:
            self.prune(self.keep_last, _just_saved=ckpt_id)
        return checkpoint

    def prune(self, keep_last: int, *, _just_saved: str | None = None) -> list[str]:
        """Delete committed checkpoints beyond the newest `keep_last`, and unfinished saves
        older than the one just written. Returns the deleted ids."""
        scan = self._scan()
        doomed = [cid for _c, cid in scan.committed[keep_last:]]
        if _just_saved is not None:
            just_step = _step_of(_just_saved)
            doomed += [cid for cid in scan.uncommitted if cid != _just_saved and _step_of(cid) <= just_step]
        for cid in doomed:
            self._delete(cid)
        return doomed

    def repair(self) -> list[str]:
        """Delete unfinished and torn checkpoints. Only for the single writer (see module doc)."""
        scan = self._scan()
        doomed = list(scan.uncommitted) + list(scan.unreadable)
        for ckpt, cid in scan.committed:
            try:
                self._read_verified(ckpt)
            except CheckpointCorruptError:
                doomed.append(cid)
        for cid in doomed:
            self._delete(cid)
        return doomed

    # ---- reading -------------------------------------------------------------------------
    def checkpoints(self) -> list[Checkpoint]:
        """Committed checkpoints (manifest present and readable), newest first, NOT verified."""
        return [c for c, _ in self._scan().committed]

    def latest(self, *, repair: bool = True, verify: str = "content") -> Checkpoint | None:
        """The newest checkpoint whose files all match its manifest, or None.

        verify="content" reads every file and checks its sha256 (what a resume needs);
        verify="size" only compares object sizes, without downloading: cheap for a watcher on
        large checkpoints, catches missing and truncated files but not same-size corruption
        (which `restore`/`load` still refuse). A size check never repairs."""
        if verify == "size":
            for ckpt in self.checkpoints():
                if self._sizes_match(ckpt):
                    return ckpt
            return None
        if verify != "content":
            raise BadInputError(f"verify must be 'content' or 'size' (got {verify!r})")
        found = self.restore(repair=repair)
        return found.checkpoint if found else None

    def restore(self, *, repair: bool = True) -> LoadedCheckpoint | None:
        """Load the newest valid checkpoint (each file read once and verified), or None.

        Torn or unfinished checkpoints are skipped, and deleted when `repair` is true."""
        scan = self._scan()
        doomed = list(scan.uncommitted) + list(scan.unreadable)
        result = None
        for ckpt, cid in scan.committed:
            try:
                result = LoadedCheckpoint(ckpt, self._read_verified(ckpt))
                break
            except CheckpointCorruptError:
                doomed.append(cid)
        if repair:
            newest_ok = result.checkpoint.checkpoint_id if result else None
            for cid in doomed:
                if cid != newest_ok:
                    self._delete(cid)
        return result

    def load(self, checkpoint: Checkpoint | str | None = None) -> LoadedCheckpoint:
        """Load one checkpoint (by object or id; None = the latest valid one), verifying every
        file against the manifest. Raises NotFoundError / CheckpointCorruptError."""
        if checkpoint is None:
            found = self.restore(repair=False)
            if found is None:
                raise NotFoundError(f"no valid checkpoint in {self.url}")
            return found
        cid = checkpoint if isinstance(checkpoint, str) else checkpoint.checkpoint_id
        try:
            manifest = Manifest.from_bytes(self.storage.get(f"{cid}/{MANIFEST_NAME}"))
        except FileNotFoundError as exc:
            raise NotFoundError(f"checkpoint {cid} not found in {self.url}") from exc
        except ManifestError as exc:
            raise CheckpointCorruptError(f"checkpoint {cid} in {self.url}: {exc}") from exc
        ckpt = self._checkpoint(manifest)
        return LoadedCheckpoint(ckpt, self._read_verified(ckpt))

    # ---- internals -----------------------------------------------------------------------
    def _checkpoint(self, m: Manifest) -> Checkpoint:
        return Checkpoint(
            checkpoint_id=m.checkpoint_id,
            step=m.step,
            saved_at_unix_ns=m.saved_at_unix_ns,
            files=m.files,
            metadata=m.metadata,
            url=f"{self.url.rstrip('/')}/{m.checkpoint_id}",
        )

    def _read_verified(self, ckpt: Checkpoint) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for entry in ckpt.files:
            try:
                data = self.storage.get(f"{ckpt.checkpoint_id}/{entry.name}")
            except FileNotFoundError as exc:
                raise CheckpointCorruptError(f"{ckpt.url}: file {entry.name} is missing") from exc
            if len(data) != entry.size_bytes or sha256_hex(data) != entry.sha256:
                raise CheckpointCorruptError(
                    f"{ckpt.url}: file {entry.name} does not match the manifest "
                    f"({len(data)} bytes, expected {entry.size_bytes})"
                )
            out[entry.name] = data
        return out

    def _sizes_match(self, ckpt: Checkpoint) -> bool:
        for entry in ckpt.files:
            try:
                if self.storage.size(f"{ckpt.checkpoint_id}/{entry.name}") != entry.size_bytes:
                    return False
            except FileNotFoundError:
                return False
        return True

    def _scan(self) -> _Scan:
        groups: dict[str, set[str]] = {}
        for key in self.storage.list():
            head, sep, rest = key.partition("/")
            if sep and _ID_RE.match(head):
                groups.setdefault(head, set()).add(rest)
        committed, unreadable, uncommitted = [], [], []
        for cid, names in groups.items():
            if MANIFEST_NAME not in names:
                uncommitted.append(cid)
                continue
            try:
                manifest = Manifest.from_bytes(self.storage.get(f"{cid}/{MANIFEST_NAME}"))
            except FileNotFoundError:
                uncommitted.append(cid)  # deleted between list and get
                continue
            except ManifestError:
                unreadable.append(cid)
                continue
            if manifest.checkpoint_id != cid:
                unreadable.append(cid)  # a manifest copied into the wrong folder
                continue
            committed.append((self._checkpoint(manifest), cid))
        committed.sort(key=lambda pair: (pair[0].step, pair[0].saved_at_unix_ns, pair[1]), reverse=True)
        return _Scan(committed, sorted(unreadable), sorted(uncommitted))

    def _delete(self, cid: str) -> None:
        # Manifest first: from that moment the checkpoint is uncommitted, never half-present.
        self.storage.delete(f"{cid}/{MANIFEST_NAME}")
        self.storage.delete_prefix(f"{cid}/")


def _step_of(cid: str) -> int:
    m = _ID_RE.match(cid)
    return int(m.group(1)) if m else -1
