"""A second real environment for the tests: a venv made with this interpreter's `venv` module and
a couple of packages pip installs from the package index, plus a tiny local package from a git
repository installed editable (its source revision is recorded)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}  # fmt: skip
PINS = ("six==1.16.0", "idna==3.6", "wheel==0.42.0")  # wheel: setuptools 65 builds editables with it


def _run(*argv: str, cwd: Path | None = None, timeout: float = 600) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    p = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**env, **GIT_ENV})
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed: {p.stderr[-2000:]}")


def git(repo: Path, *args: str) -> None:
    _run("git", "-C", str(repo), *args)


def make_local_package(root: Path) -> Path:
    pkg = root / "tinypkg"
    (pkg / "tinypkg").mkdir(parents=True)
    (pkg / "tinypkg" / "__init__.py").write_text("VALUE = 1\n")
    (pkg / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "tinypkg"
        version = "0.1"
        """))
    git(pkg, "init", "-q")
    git(pkg, "add", "-A")
    git(pkg, "commit", "-q", "-m", "first")
    return pkg


def make_small_venv(root: Path, local_pkg: Path | None = None) -> Path:
    """Returns the venv's python."""
    venv = root / "small-venv"
    _run(sys.executable, "-m", "venv", str(venv))
    py = venv / "bin" / "python"
    _run(str(py), "-m", "pip", "install", "-q", *PINS)
    if local_pkg is not None:
        _run(str(py), "-m", "pip", "install", "-q", "--no-build-isolation", "-e", str(local_pkg))
    return py
