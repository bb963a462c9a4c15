"""What `launcher reproduce` needs beyond the run's provenance, recorded at launch.

* `lineage` event in the ledger: the sha256 of every file under the spec's `launcher.data`
  paths (so a refusal can name the file that changed), the spec's path inside its repository.
* `environment` event: the Python environment the run really had (launcher.environment): every
  installed distribution with its version and, for local installs, source revision, and their hash.
* `runs/<id>/lineage/`: the uncommitted changes the run was launched with (`git diff HEAD` as a
  binary patch, untracked files copied) when they are small enough to keep, so the exact code
  can be rebuilt on a clean checkout of the recorded revision.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from launcher.provenance import _git, code_revision, git_root

LINEAGE_EVENT = "lineage"
ENVIRONMENT_EVENT = "environment"
LINEAGE_DIR = "lineage"
PATCH_NAME = "uncommitted.patch"
UNTRACKED_DIR = "untracked"
MAX_SAVED_UNTRACKED_BYTES = 64 << 20


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def data_file_hashes(loaded) -> dict[str, str]:
    """Each file under the spec's `launcher.data` paths -> sha256. Files under the spec's base
    directory are named relative to it (so a checkout elsewhere compares equal), others by
    their absolute path."""
    base = Path(loaded.base_dir).resolve()
    out: dict[str, str] = {}
    for top in sorted({loaded.resolve(p) for p in (loaded.spec.launcher.data or [])}):
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else []
        for f in files:
            out[_display(f, base)] = file_sha256(f)
    return out


def _display(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return str(path)


def record_lineage(ledger, run_id: str, loaded, run_dir: Path) -> dict:
    """Write the `lineage` event and the saved uncommitted changes; returns the event data."""
    start = (loaded.path.resolve().parent if loaded.path is not None else Path(loaded.base_dir)).resolve()
    root = git_root(start)
    data: dict = {"data_files": data_file_hashes(loaded)}
    if root is not None:
        data["git_root"] = str(root)
        if loaded.path is not None:
            data["spec_relpath"] = loaded.path.resolve().relative_to(root.resolve()).as_posix()
        data["base_relpath"] = os.path.relpath(Path(loaded.base_dir).resolve(), root.resolve())
        data["uncommitted_saved"] = save_uncommitted(root, run_dir / LINEAGE_DIR)
    ledger.add_event(run_id, LINEAGE_EVENT, data)
    record_environment(ledger, run_id)
    return data


def record_environment(ledger, run_id: str) -> dict:
    """The `environment` event: this interpreter's distributions (the local backend's jobs run
    with it)."""
    from launcher.environment import current

    data = current().to_json()
    ledger.add_event(run_id, ENVIRONMENT_EVENT, data)
    return data


def recorded_environment(ledger, run_id: str):
    """The Environment a run recorded, or None (launched by an older launcher)."""
    from launcher.environment import Environment

    events = ledger.events(run_id, kind=ENVIRONMENT_EVENT)
    return Environment.from_json(events[-1].data) if events else None


def save_uncommitted(root: Path, dest: Path) -> bool:
    """Keep the working tree's changes against HEAD: a binary patch and the untracked (not
    ignored) files. False when there is nothing to keep or they are too large."""
    if code_revision(root) is None:
        return False
    patch = _git(root, "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff") or b""
    listing = _git(root, "ls-files", "-z", "--others", "--exclude-standard") or b""
    untracked = [os.fsdecode(p) for p in listing.split(b"\0") if p]
    if not patch and not untracked:
        return False
    size = sum((root / rel).stat().st_size for rel in untracked if (root / rel).is_file())
    if size > MAX_SAVED_UNTRACKED_BYTES:
        return False
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    (dest / PATCH_NAME).write_bytes(patch)
    for rel in untracked:
        src = root / rel
        if src.is_file():
            target = dest / UNTRACKED_DIR / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return True
