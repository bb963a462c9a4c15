"""Run provenance: what a run was launched from, captured once at launch and stored in the ledger.

`collect()` never fails because git or a lockfile is absent (those fields become None); it fails
only on bad input (a data path that does not exist). Git is asked with GIT_OPTIONAL_LOCKS=0 so
a launch never takes the repository's index lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from launcher.errors import BadInputError

LOCKFILE_NAMES = ("uv.lock", "poetry.lock", "requirements.lock", "pdm.lock", "Pipfile.lock")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Provenance:
    run_id: str
    created_at: datetime
    spec_hash: str
    code_revision: str | None
    code_dirty_hash: str | None  # sha256 of uncommitted changes; None when clean or not in git
    lockfile_hash: str | None
    image: str | None
    seeds: dict[str, int] | None
    data_hash: str | None
    host: str
    launcher_version: str


def new_run_id(now: datetime) -> str:
    """Sortable by creation time: r-YYYYMMDD-HHMMSS-<6 hex>."""
    return f"r-{now.astimezone(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def spec_hash(spec_text: str) -> str:
    """sha256 of the spec's data (key order, comments and formatting do not matter)."""
    try:
        docs = list(yaml.safe_load_all(spec_text))
        canonical = json.dumps(docs, sort_keys=True, separators=(",", ":"), default=str)
    except yaml.YAMLError:
        canonical = "\n".join(line.rstrip() for line in spec_text.strip().splitlines())
    return hashlib.sha256(canonical.encode()).hexdigest()


def _git(cwd: Path, *args: str) -> bytes | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "-c", "core.quotepath=off", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_root(start: Path) -> Path | None:
    out = _git(start, "rev-parse", "--show-toplevel")
    return Path(out.decode().strip()) if out else None


def code_revision(root: Path) -> str | None:
    out = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    return out.decode().strip() if out else None


def code_dirty_hash(root: Path) -> str | None:
    """sha256 over `git diff HEAD` plus untracked (not ignored) files' names and contents."""
    has_head = code_revision(root) is not None
    h = hashlib.sha256()
    dirty = False
    if has_head:
        diff = _git(root, "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff")
        if diff:
            h.update(diff)
            dirty = True
        untracked_args = ("ls-files", "-z", "--others", "--exclude-standard")
    else:  # no commit yet: every file is uncommitted work
        untracked_args = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    listing = _git(root, *untracked_args) or b""
    for rel in sorted(p for p in listing.split(b"\0") if p):
        path = root / os.fsdecode(rel)
        h.update(b"\0untracked\0" + rel + b"\0")
        if path.is_file():
            _update_file(h, path)
        dirty = True
    return h.hexdigest() if dirty else None


def find_lockfiles(start: Path, stop: Path | None = None) -> list[Path]:
    """Lockfiles in the nearest directory (from `start` upward, not above `stop`) that has any."""
    start = start.resolve()
    for d in (start, *start.parents):
        found = sorted(d / n for n in LOCKFILE_NAMES if (d / n).is_file())
        if found:
            return found
        if stop is not None and d == stop.resolve():
            break
    return []


def lockfile_hash(start: Path, stop: Path | None = None) -> str | None:
    files = find_lockfiles(start, stop)
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        _update_file(h, f)
    return h.hexdigest()


def data_hash(paths: Iterable[Path]) -> str | None:
    """sha256 over files and directory trees: relative names and contents, in sorted order."""
    paths = sorted({Path(p).resolve() for p in paths})
    if not paths:
        return None
    h = hashlib.sha256()
    for top in paths:
        if not top.exists():
            raise BadInputError(f"data path {str(top)!r} does not exist")
        h.update(b"\0root\0" + top.name.encode() + b"\0")
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for f in files:
            rel = f.relative_to(top).as_posix() if f != top else ""
            h.update(b"\0file\0" + rel.encode() + b"\0")
            _update_file(h, f)
    return h.hexdigest()


def _update_file(h: "hashlib._Hash", path: Path) -> None:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        h.update(size.to_bytes(8, "big"))
        while chunk := fh.read(_CHUNK):
            h.update(chunk)


def launcher_version() -> str:
    # pyproject.toml takes its version from here, so no package metadata is read (a few ms).
    from launcher import __version__

    return __version__


def collect(
    spec_path: Path | None,
    spec_text: str,
    seeds: Mapping[str, int] | None = None,
    image: str | None = None,
    data_paths: Sequence[Path] = (),
    *,
    cwd: Path | None = None,
    now: Callable[[], datetime] | None = None,
) -> Provenance:
    """Capture provenance for a new run. Git and lockfiles are looked up from the spec's
    directory (or `cwd` when there is no spec file)."""
    created = (now or (lambda: datetime.now(UTC)))()
    start = (spec_path.resolve().parent if spec_path is not None else (cwd or Path.cwd())).resolve()
    root = git_root(start)
    return Provenance(
        run_id=new_run_id(created),
        created_at=created,
        spec_hash=spec_hash(spec_text),
        code_revision=code_revision(root) if root else None,
        code_dirty_hash=code_dirty_hash(root) if root else None,
        lockfile_hash=lockfile_hash(start, stop=root),
        image=image,
        seeds=dict(seeds) if seeds is not None else None,
        data_hash=data_hash(data_paths),
        host=socket.gethostname(),
        launcher_version=launcher_version(),
    )
