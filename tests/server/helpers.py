"""Server processes for the tests: real `launcher server` replicas on free loopback ports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port, wait_for_port


@dataclass
class ServerProc:
    proc: subprocess.Popen
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def owner_id(self, timeout_s: float = 30.0) -> str:
        """From the replica's first log line ('launcher server OWNER listening on ...')."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self.log.read_text().splitlines():
                if " listening on " in line:
                    return line.split("launcher server ", 1)[1].split(" ", 1)[0]
            time.sleep(0.1)
        raise TimeoutError(f"no 'listening' line in {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def cli_env(**extra: str) -> dict[str, str]:
    """The test's environment, with the venv's bin first on PATH (train.yaml runs `python`)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def start_server(log_dir: Path, *args: str, env: dict[str, str] | None = None) -> ServerProc:
    port = free_port()
    log = log_dir / f"server-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "launcher.cli.main", "server", "--port", str(port), *args],
            stdout=out, stderr=subprocess.STDOUT, cwd=str(REPO), env=env or cli_env(),
        )  # fmt: skip
    server = ServerProc(proc, port, log)
    try:
        wait_for_port(port, proc, timeout_s=60)
    except BaseException:
        server.stop()
        raise
    return server


def run_cli_env(*args: str, env: dict[str, str], timeout: float = 120, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher.cli.main", *args], capture_output=True, text=True, cwd=str(REPO),
        env=env, timeout=timeout, input=input,
    )  # fmt: skip


def make_token(user: str, project: str, role: str, env: dict[str, str]) -> str:
    r = run_cli_env("server", "users", "add", user, "--project", project, "--role", role, env=env)
    assert r.returncode == 0, r.stderr
    r = run_cli_env("server", "tokens", "create", user, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@contextmanager
def nobody_runs_python() -> Iterator[list[str]]:
    """Server arguments that let members run `--cloud local` jobs: as `nobody`
    (`--local-jobs-user nobody`; the server must run as root, else the test is skipped). Where this
    interpreter lives under a private directory (pyenv under /root on these machines), nobody gets
    search permission there (a POSIX ACL entry of its own, removed afterwards), as an operator
    would install the launcher where every user can run it. LAUNCHER_HOME must be reachable too:
    see `searchable_dir`."""
    import pwd

    from launcher.executors.job_user import _unreachable_ancestor

    if os.geteuid() != 0:
        pytest.skip("members' local jobs run as another user (--local-jobs-user), which needs the server to run as root")
    nobody = pwd.getpwnam("nobody")
    granted: list[Path] = []
    try:
        while (d := _unreachable_ancestor(Path(sys.executable).resolve() / "x", nobody.pw_uid, nobody.pw_gid, {nobody.pw_gid})) is not None:
            if d in granted or shutil.which("setfacl") is None or subprocess.run(["setfacl", "-m", "u:nobody:x", str(d)]).returncode != 0:
                pytest.skip(f"nobody cannot reach {sys.executable} ({d}) and no ACL can be set")
            granted.append(d)
        yield ["--local-jobs-user", "nobody"]
    finally:
        for d in granted:
            subprocess.run(["setfacl", "-x", "u:nobody", str(d)])


@contextmanager
def searchable_dir() -> Iterator[Path]:
    """A fresh directory whose parents every user may search (pytest's tmp dirs are root's 0700)."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="launcher-srv-", dir="/tmp"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
