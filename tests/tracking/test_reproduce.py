"""`launcher reproduce RUN [--check]` through the real CLI, on runs launched from a real temporary
git repository: the example training job reproduces with identical weights; a changed data file,
uncommitted changes that were not kept, and an environment that differs from the lockfile are
refused with a message naming what differs, and nothing is launched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.cli.launch_helpers import clean_env, ledger_runs  # noqa: F401
from tests.conftest import REPO, run_cli

pytestmark = [pytest.mark.usefixtures("clean_env")]

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}  # fmt: skip


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def make_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, text in files.items():
        (repo / name).write_text(textwrap.dedent(text))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def launched_run_id(r) -> str:
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = ledger_runs()
    return run.run_id


@pytest.mark.slow
def test_example_run_reproduces_with_identical_weights_and_a_changed_data_file_is_named(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("1,2,3\n")
    (data / "labels.csv").write_text("0\n1\n")
    repo = make_repo(tmp_path, {
        "requirements.lock": f"numpy=={version('numpy')}\ntorch=={version('torch')}\n",
        "spec.yaml": f"""
            name: digits
            workdir: .
            resources: {{cpus: 1+}}
            run: python train.py --epochs 1 --batch-size 40 --seed 0 --checkpoint-every-steps 10
            launcher: {{project: repro, expected_hours: 0.01, seeds: {{train: 0}}, data: [{data}]}}
            """,
    })  # fmt: skip
    shutil.copy(REPO / "task_specs" / "train.py", repo / "train.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "train")
    first = launched_run_id(run_cli("launch", str(repo / "spec.yaml"), "--yes", "--cheapest", timeout=600))
    r = run_cli("reproduce", first, "--check", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "identical weights" in r.stderr
    runs = ledger_runs()
    assert len(runs) == 2
    new = next(x for x in runs if x.run_id != first)
    orig = next(x for x in runs if x.run_id == first)
    from launcher.ledger import Ledger

    with Ledger() as led:
        got = [e.data["final_weights_sha256"] for run in (orig, new) for e in led.events(run.run_id, kind="results")]
        assert [e.data for e in led.events(new.run_id, kind="reproduces")] == [{"run_id": first}]
    assert len(got) == 2 and got[0] == got[1] and len(got[0]) == 64
    # The new run was launched from the recorded revision, clean, with the same lockfile and data.
    assert (new.code_revision, new.code_dirty_hash, new.lockfile_hash, new.data_hash, new.seeds) == (
        orig.code_revision, None, orig.lockfile_hash, orig.data_hash, {"train": 0},
    )  # fmt: skip
    assert not any((Path(os.environ["LAUNCHER_HOME"]) / "reproduce").iterdir())  # worktree removed

    # One data file changes: refused, naming it; nothing launched.
    (data / "labels.csv").write_text("0\n2\n")
    r = run_cli("reproduce", first, "--check", timeout=120)
    assert r.returncode == 3, r.stderr
    assert f"{data / 'labels.csv'} changed" in r.stderr and "train.csv" not in r.stderr
    assert len(ledger_runs()) == 2

    d = run_cli("runs", "diff", first, new.run_id, "--json")
    assert d.returncode == 0, d.stderr
    import json

    rows = {(x["section"], x["field"]): x for x in json.loads(d.stdout)["rows"]}
    assert rows[("results", "final_weights_sha256")]["same"] is True
    assert rows[("provenance", "spec_hash")]["same"] is True


# A job whose "weights" are the sha256 of its own source: reproducing it proves which code ran.
CODE_JOB = {
    "job.py": "print('hello')\n",
    "spec.yaml": """
        name: codejob
        workdir: .
        run: python -c "import hashlib; print('final_weights_sha256=' + hashlib.sha256(open('job.py','rb').read()).hexdigest())"
        launcher: {project: repro, expected_hours: 0.01}
        """,
}


def test_uncommitted_changes_are_rebuilt_when_kept_and_refused_when_not(tmp_path):
    import hashlib

    repo = make_repo(tmp_path, CODE_JOB)
    (repo / "job.py").write_text("print('changed, not committed')\n")
    (repo / "notes.txt").write_text("untracked\n")
    first = launched_run_id(run_cli("launch", str(repo / "spec.yaml"), "--yes", "--cheapest"))
    (repo / "job.py").write_text("print('changed again after the launch')\n")  # the repo moves on
    r = run_cli("reproduce", first, "--check")
    assert r.returncode == 0, r.stderr[-3000:]
    want = hashlib.sha256(b"print('changed, not committed')\n").hexdigest()
    assert f"final_weights_sha256={want}" in r.stdout

    shutil.rmtree(Path(os.environ["LAUNCHER_HOME"]) / "runs" / first / "lineage")
    r = run_cli("reproduce", first, "--check")
    assert r.returncode == 3
    assert "uncommitted changes" in r.stderr and "cannot be recovered" in r.stderr
    assert len(ledger_runs()) == 2


def test_a_run_records_the_environment_it_really_had_and_reproduces_in_it_whatever_its_lockfile_says(tmp_path):
    # The lockfile pins a pyyaml nobody has: the run still ran with the installed one, and that
    # is what it records and what `reproduce` checks.
    repo = make_repo(tmp_path, {**CODE_JOB, "requirements.lock": "pyyaml==0.0.1\n"})
    first = launched_run_id(run_cli("launch", str(repo / "spec.yaml"), "--yes", "--cheapest"))
    show = run_cli("runs", "show", first, "--json")
    import json

    env = json.loads(show.stdout)["environment"]
    assert f"{len(_dists())} distributions" in env
    r = run_cli("reproduce", first, "--check")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "identical weights" in r.stderr


def _dists():
    from launcher.environment import current

    return current().distributions


def _with_older_six(tmp_path) -> dict:
    """This environment plus a real six 1.16.0 (pip, from the package index) first on the path."""
    target = tmp_path / "older-six"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), "six==1.16.0"],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    return {"PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
def test_another_environment_is_one_table_of_differences_and_runs_diff_shows_them_package_by_package(tmp_path):
    import json

    import six

    repo = make_repo(tmp_path, CODE_JOB)
    first = launched_run_id(run_cli("launch", str(repo / "spec.yaml"), "--yes", "--cheapest"))
    older = _with_older_six(tmp_path)
    r = run_cli("reproduce", first, "--check", env=older)
    assert r.returncode == 3, r.stderr
    assert "differs from the one run" in r.stderr and "in 1 package" in r.stderr and "--make-env DIR" in r.stderr
    (row,) = [ln for ln in r.stderr.splitlines() if " six " in ln]
    assert six.__version__ in row and "1.16.0" in row and row.index(six.__version__) < row.index("1.16.0")
    assert len(ledger_runs()) == 1  # nothing launched
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("")
    r = run_cli("reproduce", first, "--check", "--make-env", str(used), env=older)
    assert r.returncode == 2 and "not empty" in r.stderr and len(ledger_runs()) == 1

    r = run_cli("launch", str(repo / "spec.yaml"), "--yes", "--cheapest", env=older)
    assert r.returncode == 0, r.stderr[-2000:]
    second = next(x.run_id for x in ledger_runs() if x.run_id != first)
    d = json.loads(run_cli("runs", "diff", first, second, "--json").stdout)
    rows = {(x["section"], x["field"]): x for x in d["rows"]}
    assert rows[("environment", "package six")] == {"section": "environment", "field": "package six", "a": six.__version__, "b": "1.16.0", "same": False}
    assert rows[("environment", "distributions_hash")]["same"] is False and rows[("environment", "python")]["same"] is True
    assert [k for k in rows if k[0] == "environment" and k[1].startswith("package")] == [("environment", "package six")]
    text = run_cli("runs", "diff", first, second, "--only-differences").stdout
    assert "package six" in text


TRAIN_ARGS = "--epochs 3 --batch-size 40 --seed 0 --checkpoint-every-steps 10 --step-time-s 0.09"
PREEMPTIONS = ["--simulate-preemptions", "3", "--simulate-seed", "1", "--simulate-within", "4", "--grace-seconds", "60"]


@pytest.mark.slow
def test_a_run_preempted_three_times_reproduces_with_identical_weights_in_the_environment_it_ran_in(tmp_path):
    repo = make_repo(tmp_path, {
        "requirements.lock": "pyyaml==0.0.1\n",  # not what is installed: the run's record is what counts
        "spec.yaml": f"""
            name: digits
            workdir: .
            run: python train.py {TRAIN_ARGS}
            launcher: {{project: repro, expected_hours: 0.01, seeds: {{train: 0}}}}
            """,
    })  # fmt: skip
    shutil.copy(REPO / "task_specs" / "train.py", repo / "train.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "train")
    first = launched_run_id(run_cli("launch", str(repo / "spec.yaml"), "--yes", "--cheapest", *PREEMPTIONS, timeout=900))
    from tests.cli.launch_helpers import ledger_attempts

    assert [a.end_reason for a in ledger_attempts(first)] == ["preempted"] * 3 + ["completed"]
    r = run_cli("reproduce", first, "--check", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "identical weights" in r.stderr


@pytest.mark.slow
def test_make_env_rebuilds_the_environment_a_run_had_and_reproduces_from_it(tmp_path):
    """End to end through the CLI: a run launched from a second real venv (this repository
    installed editable with its core dependencies only, by pip from the package index), then
    `reproduce --check --make-env DIR` from the shared venv: the table, DIR built with exactly the
    recorded distributions, the reproduction run from DIR's python, identical weights."""
    from launcher.environment import of_interpreter
    from tests.tracking.small_venv import _run

    src = tmp_path / "launcher-src"  # a copy: an editable build writes into its source directory
    for part in ("launcher", "pricing", "infra"):
        shutil.copytree(REPO / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / part, src / part)
    core = tmp_path / "core-venv"
    _run(sys.executable, "-m", "venv", str(core))
    _run(str(core / "bin" / "python"), "-m", "pip", "install", "-q", "-e", str(src), timeout=1200)
    repo = make_repo(tmp_path, CODE_JOB)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([str(core / "bin" / "python"), "-m", "launcher.cli.main", "launch", str(repo / "spec.yaml"), "--yes", "--cheapest"],
                       capture_output=True, text=True, env=env, timeout=600, cwd=str(src))  # fmt: skip
    first = launched_run_id(r)
    dest = tmp_path / "rebuilt"
    r = run_cli("reproduce", first, "--check", "--make-env", str(dest), timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "environment: run" in r.stderr and "make-env: installing" in r.stderr and "identical weights" in r.stderr
    assert of_interpreter(dest / "bin" / "python").distributions_hash == of_interpreter(core / "bin" / "python").distributions_hash
    assert len(ledger_runs()) == 2


def test_reproduce_unknown_run_is_not_found():
    r = run_cli("reproduce", "r-nope", "--check")
    assert r.returncode == 7, r.stderr
