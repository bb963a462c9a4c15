"""Abusive input files are refused at once (exit 2, within seconds, bounded memory) and leave
nothing behind: YAML alias bombs, devices, blocking /proc files, FIFOs, oversize files.
Through the real CLI entry point."""

from __future__ import annotations

import os
import time

import pytest

from tests.conftest import run_cli


def _bomb(levels: int = 9) -> str:
    lines = ["name: bomb", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines + ["run: echo hi", ""])


def _refused(res, *needles: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr[-2000:])
    assert "Traceback" not in res.stderr
    assert len(res.stderr) < 2000, res.stderr[:300]
    for n in needles:
        assert n in res.stderr, res.stderr


def _timed(*args: str):
    t0 = time.monotonic()
    res = run_cli(*args, timeout=60)
    return res, time.monotonic() - t0


def test_yaml_bomb_spec_is_refused_quickly(tmp_path, launcher_home):
    spec = tmp_path / "bomb.yaml"
    spec.write_text(_bomb())
    res, took = _timed("launch", str(spec), "--dry-run")
    _refused(res, "expands to more than")
    assert took < 20  # interpreter start included; the bomb itself used to run for minutes
    assert not (launcher_home / "ledger.db").exists()


def test_yaml_bomb_reaper_policy_is_refused(tmp_path):
    policy = tmp_path / "reap.yaml"
    policy.write_text(_bomb().replace("name: bomb\n", "").replace("run: echo hi\n", ""))
    _refused(run_cli("reap", "--policy", str(policy), "--dry-run", timeout=60), "expands to more than")


@pytest.mark.parametrize("path", ["/dev/zero", "/proc/kmsg"])
def test_device_and_blocking_proc_files_are_refused_as_traces(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} is absent here")
    res, took = _timed("launch", "task_specs/train.yaml", "--dry-run", "--simulate-trace", path)
    _refused(res, path)
    assert took < 20


def test_fifo_spec_and_cases_are_refused(tmp_path):
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    _refused(run_cli("launch", str(fifo), "--dry-run", timeout=30), "not a regular file")
    _refused(run_cli("simulate", "--cases", str(fifo), "--trace-root", str(tmp_path), timeout=30), "not a regular file")


def test_oversize_spec_is_refused_naming_the_limit(tmp_path):
    spec = tmp_path / "big.yaml"
    spec.write_text("name: big\nrun: |\n" + ("  echo padding padding padding\n" * 60_000))
    _refused(run_cli("launch", str(spec), "--dry-run", timeout=30), "the limit is 1.0 MiB")
