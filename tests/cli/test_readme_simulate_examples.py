"""Every `launcher simulate` and `--simulate-trace` example in the README and docs/ runs from a fresh clone:
nothing outside the repository, data shipped with the package (and declared as package data)."""

from __future__ import annotations

import hashlib
import re
import shlex
import tomllib
from fnmatch import fnmatch

import pytest

from tests.conftest import REPO, run_cli

README = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
SIMULATE_LINES = [ln.strip() for ln in README.splitlines() if ln.strip().startswith("launcher simulate ")]
SHARED = REPO.parent / "shared" / "data" / "spot-traces"
SAMPLES = REPO / "launcher" / "simulation" / "sample_traces"


def test_readme_has_simulate_examples_that_need_nothing_outside_the_repo():
    assert SIMULATE_LINES, "the docs lost their `launcher simulate` examples"
    for line in SIMULATE_LINES:
        assert "../shared" not in line, line
    for path in re.findall(r"--simulate-trace\s+(\S+)", README):
        assert "../shared" not in path, path
        assert (REPO / path).is_file(), f"README's --simulate-trace {path} is not in the repository"


@pytest.mark.parametrize("line", SIMULATE_LINES)
def test_readme_simulate_example_runs(line, tmp_path):
    argv = shlex.split(line)[1:]
    res = run_cli(*argv, env={"LAUNCHER_HOME": str(tmp_path / "home")})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip()


def test_sample_traces_are_package_data():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = cfg["tool"]["setuptools"]["package-data"]["launcher"]
    files = [p.relative_to(REPO / "launcher").as_posix() for p in SAMPLES.rglob("*") if p.is_file()]
    assert any(f.endswith(".json") for f in files) and "simulation/sample_traces/SOURCE.md" in files
    for f in files:
        assert any(fnmatch(f, g) for g in globs), f"{f} would be missing from the wheel"


@pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data/spot-traces")
def test_sample_traces_are_identical_to_the_upstream_files():
    for p in SAMPLES.rglob("*.json"):
        upstream = SHARED / p.relative_to(SAMPLES)
        assert hashlib.sha256(p.read_bytes()).digest() == hashlib.sha256(upstream.read_bytes()).digest(), p
