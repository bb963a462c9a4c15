"""Provenance in a real temporary git repository."""

from __future__ import annotations

import hashlib
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from launcher.errors import BadInputError
from launcher.ledger import Ledger, RunRecord
from launcher.provenance import collect, data_hash, new_run_id, spec_hash

SPEC = "name: train\nresources:\n  accelerators: A10G:1\nrun: python train.py\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "specs").mkdir(parents=True)
    git(r, "init", "-q")
    (r / "train.py").write_text("print('hi')\n")
    (r / "specs" / "train.yaml").write_text(SPEC)
    (r / "uv.lock").write_text("version = 1\n")
    (r / ".gitignore").write_text("outputs/\n")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "init")
    return r


def prov(repo: Path, **kw):
    spec = repo / "specs" / "train.yaml"
    return collect(spec, spec.read_text(), **kw)


def test_clean_repo_has_revision_and_no_dirty_hash(repo: Path) -> None:
    p = prov(repo, seeds={"torch": 1}, image="img:1")
    assert p.code_revision == git(repo, "rev-parse", "HEAD")
    assert p.code_dirty_hash is None
    assert p.lockfile_hash == hashlib.sha256(b"uv.lock\0" + (12).to_bytes(8, "big") + b"version = 1\n").hexdigest()
    assert p.seeds == {"torch": 1} and p.image == "img:1" and p.data_hash is None
    assert p.host and p.launcher_version


def test_dirty_hash_follows_uncommitted_changes(repo: Path) -> None:
    (repo / "train.py").write_text("print('changed')\n")
    h1 = prov(repo).code_dirty_hash
    assert h1 is not None
    assert prov(repo).code_dirty_hash == h1  # stable
    (repo / "train.py").write_text("print('changed again')\n")
    h2 = prov(repo).code_dirty_hash
    assert h2 not in (None, h1)
    (repo / "notes.txt").write_text("untracked\n")
    h3 = prov(repo).code_dirty_hash
    assert h3 not in (None, h2)
    (repo / "notes.txt").write_text("untracked, edited\n")
    assert prov(repo).code_dirty_hash not in (None, h3)
    (repo / "outputs").mkdir()
    (repo / "outputs" / "big.bin").write_bytes(b"ignored")
    before = prov(repo).code_dirty_hash
    (repo / "outputs" / "big.bin").write_bytes(b"ignored, changed")
    assert prov(repo).code_dirty_hash == before  # .gitignore'd files do not count
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "more")
    clean = prov(repo)
    assert clean.code_dirty_hash is None and clean.code_revision == git(repo, "rev-parse", "HEAD")


def test_staged_changes_count_as_dirty(repo: Path) -> None:
    (repo / "train.py").write_text("print('staged')\n")
    git(repo, "add", "train.py")
    assert prov(repo).code_dirty_hash is not None


def test_outside_git_fields_are_none(tmp_path: Path) -> None:
    spec = tmp_path / "plain" / "s.yaml"
    spec.parent.mkdir()
    spec.write_text(SPEC)
    p = collect(spec, SPEC)
    assert p.code_revision is None and p.code_dirty_hash is None


def test_lockfile_found_upward_from_spec_dir(repo: Path) -> None:
    base = prov(repo).lockfile_hash
    (repo / "uv.lock").write_text("version = 2\n")
    assert prov(repo).lockfile_hash not in (None, base)
    (repo / "specs" / "requirements.lock").write_text("torch==2\n")  # nearer directory wins
    near = prov(repo).lockfile_hash
    (repo / "uv.lock").write_text("version = 3\n")
    assert prov(repo).lockfile_hash == near


def test_spec_hash_ignores_formatting_not_content() -> None:
    a = spec_hash("name: train\nrun: echo 1\n")
    assert spec_hash("# comment\nrun:   echo 1\nname: train\n") == a
    assert spec_hash("name: train\nrun: echo 2\n") != a
    assert len(spec_hash("not: [valid")) == 64  # unparsable specs still hash


def test_run_ids_are_sortable_and_unique() -> None:
    t1 = datetime(2026, 11, 30, 8, 0, 1, tzinfo=UTC)
    t2 = datetime(2026, 11, 30, 8, 0, 2, tzinfo=UTC)
    ids = [new_run_id(t1) for _ in range(50)]
    assert all(re.fullmatch(r"r-20261130-080001-[0-9a-f]{6}", i) for i in ids)
    assert len(set(ids)) == 50
    assert max(ids) < new_run_id(t2)
    p = collect(None, SPEC, now=lambda: t2)
    assert p.run_id.startswith("r-20261130-080002-") and p.created_at == t2


def test_data_hash_stable_order_and_content(tmp_path: Path) -> None:
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    (d / "a.csv").write_text("1,2\n")
    (d / "sub" / "b.csv").write_text("3,4\n")
    f = tmp_path / "labels.txt"
    f.write_text("cat\n")
    h = data_hash([d, f])
    assert h == data_hash([f, d])  # order of arguments does not matter
    (d / "sub" / "b.csv").write_text("3,5\n")
    assert data_hash([d, f]) != h
    (d / "sub" / "b.csv").write_text("3,4\n")
    assert data_hash([d, f]) == h
    (d / "sub" / "b.csv").rename(d / "sub" / "c.csv")  # renames change the hash
    assert data_hash([d, f]) != h
    assert data_hash([]) is None
    with pytest.raises(BadInputError, match="does not exist"):
        data_hash([tmp_path / "missing"])


def test_provenance_lands_in_the_ledger(repo: Path, tmp_path: Path) -> None:
    (repo / "train.py").write_text("print('dirty')\n")
    p = prov(repo, seeds={"torch": 3}, data_paths=[repo / "train.py"])
    with Ledger(f"sqlite:///{tmp_path / 'l.db'}") as led:
        led.create_run(RunRecord.from_provenance(p, name="train", spec_yaml=SPEC, project="vision", tags={"a": "b"}))
        got = led.get_run(p.run_id)
    assert (got.spec_hash, got.code_revision, got.code_dirty_hash, got.lockfile_hash) == (
        p.spec_hash, p.code_revision, p.code_dirty_hash, p.lockfile_hash,
    )  # fmt: skip
    assert (got.seeds, got.data_hash, got.host, got.created_at) == ({"torch": 3}, p.data_hash, p.host, p.created_at)
    assert got.tags == {"a": "b"} and got.project == "vision"
