"""The environment a run really had, read from real environments: the shared venv these tests run
in and a second small venv built with pip in the test (two packages from the index and an
editable local package from a git repository). What differs is found package by package, a
source revision counts for local installs (except the run's own repository), and `--make-env`'s
builder makes a venv that reads back exactly as recorded (real pip from the package index)."""

from __future__ import annotations

import pytest

from launcher.environment import Distribution, current, differences, hash_distributions, of_interpreter
from launcher.errors import BadInputError, ProviderError
from launcher.tracking.make_env import build_env
from tests.tracking.small_venv import git, make_local_package, make_small_venv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("envs")
    pkg = make_local_package(root)
    return make_small_venv(root, pkg), pkg


def _head(repo) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_a_second_real_venv_is_read_from_here_with_the_local_packages_revision(small):
    py, pkg = small
    env = of_interpreter(py)
    got = env.by_name()
    assert (got["six"].version, got["idna"].version) == ("1.16.0", "3.6")
    assert got["tinypkg"].source == f"editable {pkg}" and got["tinypkg"].revision == _head(pkg)
    assert got["six"].source is None and "pyyaml" not in got and "gpu-launcher" not in got
    assert env.distributions_hash == hash_distributions(reversed(env.distributions))  # order does not matter


def test_the_shared_venv_and_the_small_one_differ_package_by_package(small):
    py, _ = small
    here, other = current(), of_interpreter(py)
    diffs = {d.name: d for d in differences(here, other)}
    import six
    import yaml

    assert diffs["six"].recorded == six.__version__ and diffs["six"].here == "1.16.0" and diffs["six"].kind == "changed"
    assert diffs["pyyaml"].recorded == yaml.__version__ and diffs["pyyaml"].here is None and diffs["pyyaml"].kind == "missing"
    assert diffs["tinypkg"].recorded is None and diffs["tinypkg"].kind == "added"
    assert "python" not in diffs  # same interpreter
    assert differences(here, current()) == []  # the same environment read twice


def test_a_new_commit_in_an_editable_source_is_a_non_blocking_difference_except_in_the_runs_own_repository(small):
    py, pkg = small
    before = of_interpreter(py)
    (pkg / "tinypkg" / "__init__.py").write_text("VALUE = 2\n")
    git(pkg, "commit", "-q", "-am", "second")
    after = of_interpreter(py)
    (d,) = differences(before, after)
    assert d.name == "tinypkg" and d.recorded.startswith("0.1 @ ") and d.here == f"0.1 @ {_head(pkg)}"
    assert d.blocking is False  # live code moved on: shown, and the weights check decides
    assert all(x.blocking for x in differences(current(), after) if x.name != "tinypkg")
    assert differences(before, after, own_source=pkg) == []
    (pkg / "tinypkg" / "__init__.py").write_text("VALUE = 3\n")  # uncommitted
    assert of_interpreter(py).by_name()["tinypkg"].revision == _head(pkg) + "+dirty"


def test_make_env_builds_a_venv_that_reads_back_exactly_as_recorded(small, tmp_path):
    py, _ = small
    recorded = of_interpreter(py)
    lines: list[str] = []
    built = build_env(recorded, tmp_path / "rebuilt", timeout_s=600, progress=lines.append, use_uv=False)
    assert of_interpreter(built).distributions_hash == recorded.distributions_hash
    assert any("installing" in ln for ln in lines) and lines[-1].endswith(f"has the {len(recorded.distributions)} recorded distributions")


def test_make_env_is_bounded_and_refuses_a_used_directory(small, tmp_path):
    py, _ = small
    recorded = of_interpreter(py)
    with pytest.raises(ProviderError, match="ran out of time"):
        build_env(recorded, tmp_path / "slow", timeout_s=0.5, use_uv=False)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    with pytest.raises(BadInputError, match="not empty"):
        build_env(recorded, tmp_path / "used", use_uv=False)


def test_pins_name_the_revision_of_local_installs():
    assert Distribution("a", "1").pin == "a==1"
    assert Distribution("a", "1", "editable /x", "abc").pin == "a==1 @ abc"
