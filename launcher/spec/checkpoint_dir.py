"""Where a job may keep its checkpoints: `launcher.checkpoint.dir` is a bucket URL, or a local
directory inside an allowed root (the spec's directory, its workdir, or LAUNCHER_HOME). `..` is
refused outright: a resumed job loads what it finds there, so it must not point at a place
another user or run controls."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from launcher.errors import SpecError


def check_checkpoint_dir(loaded, *, home: Path) -> Path | None:
    """The resolved local checkpoint dir (None: default or a bucket URL); SpecError otherwise."""
    ckpt = loaded.spec.launcher.checkpoint if loaded.spec.launcher else None
    raw = ckpt.dir if ckpt else None
    if not raw or "://" in raw:
        return None
    if ".." in PurePosixPath(raw).parts:
        raise SpecError(f"{loaded.label}: launcher.checkpoint.dir {raw!r} climbs out with '..'; give a path inside the spec's directory, the workdir or LAUNCHER_HOME")
    target = loaded.resolve(raw).resolve()
    roots = [loaded.base_dir.resolve(), home.resolve()]
    if loaded.workdir is not None:
        roots.append(loaded.workdir.resolve())
    if not any(target == r or r in target.parents for r in roots):
        shown = ", ".join(str(r) for r in roots)
        raise SpecError(f"{loaded.label}: launcher.checkpoint.dir {raw!r} is outside the allowed roots ({shown})",
                        hint="use a relative path, a path under LAUNCHER_HOME, or a bucket URL (s3://, gs://)")
    return target
