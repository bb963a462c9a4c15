"""The workdir snapshot a run takes at launch: bounded, contained, and checked before anything
is written.

The walk never follows a symlink (links inside the workdir are copied as links, never their
targets), skips special files (devices, FIFOs, sockets: reading one can block forever), never
enters the launcher's own home (ledger, run directories) and stops as soon as the workdir is over
the limits, naming the parts that made it large.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from launcher.errors import BadInputError

MAX_WORKDIR_FILES = 10_000
MAX_WORKDIR_BYTES = 512 << 20  # 512 MiB: put datasets in `file_mounts`/buckets, not the workdir
SKIP_DIRS = frozenset({".git", ".venv", "venv", "__pycache__", "node_modules", ".mypy_cache", ".pytest_cache"})


@dataclass
class WorkdirScan:
    files: int = 0
    bytes: int = 0
    skipped_special: list[str] = field(default_factory=list)
    skipped_home: list[str] = field(default_factory=list)
    by_top: dict[str, list[int]] = field(default_factory=dict)  # first-level entry -> [files, bytes]


def _excluded(path: str, excluded: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    return any(real == e or real.startswith(e + os.sep) for e in excluded)


def _walk(root: Path, excluded: tuple[str, ...], scan: WorkdirScan, on_entry=None) -> None:
    """Depth-first over `root` without following links; `on_entry(rel, kind)` for each kept entry
    (kind: dir | file | link). Raises BadInputError once over the limits."""
    stack = [""]
    while stack:
        rel = stack.pop()
        here = os.path.join(root, rel) if rel else str(root)
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError as e:
            raise BadInputError(f"cannot read workdir {here}: {e.strerror}") from None
        for e in entries:
            r = os.path.join(rel, e.name) if rel else e.name
            top = r.split(os.sep, 1)[0]
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                kind = "link"
            elif stat.S_ISDIR(st.st_mode):
                if e.name in SKIP_DIRS:
                    continue
                if _excluded(e.path, excluded):
                    scan.skipped_home.append(r)
                    continue
                kind = "dir"
            elif stat.S_ISREG(st.st_mode):
                kind = "file"
            else:
                scan.skipped_special.append(r)
                continue
            size = st.st_size if kind == "file" else 0
            scan.files += 1
            scan.bytes += size
            t = scan.by_top.setdefault(top, [0, 0])
            t[0] += 1
            t[1] += size
            if scan.files > MAX_WORKDIR_FILES or scan.bytes > MAX_WORKDIR_BYTES:
                raise _too_large(root, scan)
            if on_entry is not None:
                on_entry(r, kind)
            if kind == "dir":
                stack.append(r)


def _too_large(root: Path, scan: WorkdirScan) -> BadInputError:
    biggest = sorted(scan.by_top.items(), key=lambda kv: (kv[1][1], kv[1][0]), reverse=True)[:3]
    parts = ", ".join(f"{name} ({n:,} files, {b / (1 << 20):.1f} MiB)" for name, (n, b) in biggest)
    what = f"more than {MAX_WORKDIR_FILES:,} files" if scan.files > MAX_WORKDIR_FILES else f"more than {MAX_WORKDIR_BYTES >> 20} MiB"
    return BadInputError(
        f"workdir {root} holds {what} (the limits are {MAX_WORKDIR_FILES:,} files and {MAX_WORKDIR_BYTES >> 20} MiB); largest parts: {parts}",
        hint="point workdir at your code only; data belongs in file_mounts or a bucket",
    )


def check_workdir(workdir: Path, *, excluded: list[Path]) -> WorkdirScan:
    """Refuse (BadInputError) a workdir that is missing or over the limits; nothing is written."""
    if not workdir.is_dir():
        raise BadInputError(f"workdir {str(workdir)!r} is not a directory", hint="workdir is relative to the spec file")
    scan = WorkdirScan()
    _walk(workdir, _real(excluded), scan)
    return scan


def walk_workdir(workdir: Path, *, excluded: list[Path], on_entry) -> WorkdirScan:
    """`on_entry(rel, kind)` for every entry a copy of the workdir keeps (kind: dir | file | link),
    by the same rules and limits as `copy_workdir`."""
    scan = WorkdirScan()
    _walk(workdir, _real(excluded), scan, on_entry)
    return scan


def copy_workdir(workdir: Path, dest: Path, *, excluded: list[Path]) -> WorkdirScan:
    """Copy the workdir into `dest` (created 0700): regular files, directories and links as
    links; special files, the launcher's home and SKIP_DIRS are left out."""
    scan = WorkdirScan()
    excl = _real([*excluded, dest])
    dest.mkdir(mode=0o700, parents=True)

    def copy(rel: str, kind: str) -> None:
        src, dst = os.path.join(workdir, rel), dest / rel
        if kind == "dir":
            dst.mkdir(mode=0o700)
        elif kind == "link":
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copyfile(src, dst, follow_symlinks=False)
            os.chmod(dst, 0o700 if os.access(src, os.X_OK) else 0o600)

    _walk(workdir, excl, scan, copy)
    return scan


def _real(paths: list[Path]) -> tuple[str, ...]:
    return tuple(os.path.realpath(p) for p in paths)
