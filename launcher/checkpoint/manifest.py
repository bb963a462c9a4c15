"""The checkpoint manifest: the list of files with their sha256 and size.

Writing the manifest is what commits a checkpoint. It carries a hash of its own canonical body,
so a manifest damaged after it was written reads as torn instead of as garbage.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

MANIFEST_NAME = "MANIFEST.json"
FORMAT_VERSION = 1


class ManifestError(ValueError):
    """The manifest is unreadable, incomplete or does not match its own checksum."""


@dataclass(frozen=True)
class FileEntry:
    name: str
    sha256: str
    size_bytes: int


@dataclass(frozen=True)
class Manifest:
    checkpoint_id: str
    step: int
    saved_at_unix_ns: int
    files: tuple[FileEntry, ...]
    metadata: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "checkpoint_id": self.checkpoint_id,
            "step": self.step,
            "saved_at_unix_ns": self.saved_at_unix_ns,
            "files": [
                {"name": f.name, "sha256": f.sha256, "size_bytes": f.size_bytes} for f in self.files
            ],
            "metadata": self.metadata,
        }

    def to_bytes(self) -> bytes:
        body = self.body()
        return json.dumps(
            {**body, "manifest_sha256": _canonical_sha256(body)}, indent=1, sort_keys=True
        ).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        try:
            raw = json.loads(data.decode("utf-8"))
            claimed = raw.pop("manifest_sha256")
            if raw.get("format") != FORMAT_VERSION:
                raise ManifestError(f"unsupported manifest format {raw.get('format')!r}")
            if _canonical_sha256(raw) != claimed:
                raise ManifestError("manifest does not match its own checksum")
            files = tuple(
                FileEntry(name=str(f["name"]), sha256=str(f["sha256"]), size_bytes=int(f["size_bytes"]))
                for f in raw["files"]
            )
            return cls(
                checkpoint_id=str(raw["checkpoint_id"]),
                step=int(raw["step"]),
                saved_at_unix_ns=int(raw["saved_at_unix_ns"]),
                files=files,
                metadata=dict(raw.get("metadata") or {}),
            )
        except ManifestError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise ManifestError(f"unreadable manifest: {exc}") from exc

    def entry(self, name: str) -> FileEntry:
        for f in self.files:
            if f.name == name:
                return f
        raise KeyError(name)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical_sha256(body: dict[str, Any]) -> str:
    return sha256_hex(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8"))
