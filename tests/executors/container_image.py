"""A tiny container image built offline: the host's /bin/sh (dash) and the libraries it links,
packed as a rootfs tarball and loaded with `podman import` (no registry needed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path


def build_rootfs_tar(dest: Path) -> Path:
    root = dest / "rootfs"
    (root / "bin").mkdir(parents=True)
    sh = Path(os.path.realpath(shutil.which("dash") or "/bin/sh"))
    shutil.copy2(sh, root / "bin" / "sh")
    ldd = subprocess.run(["ldd", str(sh)], capture_output=True, text=True, timeout=30).stdout
    for lib in re.findall(r"(/\S+\.so[.\d]*)", ldd):
        target = root / lib.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(lib), target)
    (root / "tmp").mkdir()
    tar = dest / "rootfs.tar"
    with tarfile.open(tar, "w") as t:
        t.add(root, arcname=".")
    return tar


def import_image(podman: str, tar: Path, ref: str) -> str:
    """`podman import` the tarball as `ref`; returns the image id."""
    p = subprocess.run([podman, "import", str(tar), ref], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"podman import failed: {p.stderr.strip()}")
    return p.stdout.strip().splitlines()[-1]


def remove_image(podman: str, ref: str) -> None:
    subprocess.run([podman, "rmi", "-f", ref], capture_output=True, timeout=120)
