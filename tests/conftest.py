"""Shared fixtures: an isolated LAUNCHER_HOME, the shared data folder, and real local servers
(moto_server for AWS, gcp-storage-emulator for GCS) on 127.0.0.1 with free ports."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.providers import registry

# The fake provider is for tests only: the product's registry does not list it.
registry.register("fake", "launcher.providers.fake:FakeProvider")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")


@pytest.fixture(autouse=True)
def launcher_home(tmp_path, monkeypatch) -> Path:
    """Every test gets its own LAUNCHER_HOME so nothing leaks into ~/.launcher."""
    home = tmp_path / "launcher-home"
    home.mkdir()
    monkeypatch.setenv("LAUNCHER_HOME", str(home))
    monkeypatch.delenv("LAUNCHER_DB_URL", raising=False)
    monkeypatch.delenv("LAUNCHER_CATALOG_DIR", raising=False)
    return home


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A free loopback port for a server a test starts (and may stop and start again on the same
    port). Taken outside the kernel's ephemeral range where there is room: a port from that range
    can be handed, between the pick and the server's bind or between a stop and a restart, to any
    client's outgoing connection or any `bind(0)` on the machine; outside it only another pick
    like this one can take it, and each pick checks the port is free."""
    import random

    lo, hi = _ephemeral_range()
    outside = [r for r in (range(20000, min(lo, 32768)), range(max(hi + 1, 61000), 65536)) if len(r) > 0]
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(50) if outside else ():
        r = rng.choice(outside)
        port = rng.randrange(r.start, r.stop)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on 127.0.0.1:port (or any address) per /proc/net/tcp."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                inodes.add(f[9])
    return inodes


def _owned_by(pid: int, inodes: set[str]) -> bool:
    """True when the process (or one of its children) holds one of these sockets."""
    pids = [pid]
    try:
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            fds = list(Path(f"/proc/{p}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return True
    return False


def wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Wait until `proc` itself listens on `port`: another process answering there (a port that
    was free when picked and taken since) does not count."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        inodes = _listening_inodes(port)
        if inodes and _owned_by(proc.pid, inodes):
            return
        time.sleep(0.1)
    raise TimeoutError(f"process {proc.pid} was not listening on port {port} after {timeout_s}s")


def _venv_bin(name: str) -> str:
    cand = Path(sys.executable).parent / name
    return str(cand) if cand.exists() else (shutil.which(name) or name)


def _serve(argv_for_port, attempts: int = 3):
    """Start a server process on a free loopback port; yield its URL; stop it. A port taken by
    someone else between picking and binding makes our server exit or never own the listener:
    then try again on another port."""
    for attempt in range(attempts):
        port = free_port()
        proc = subprocess.Popen(argv_for_port(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(port, proc)
            break
        except (RuntimeError, TimeoutError):
            _stop(proc)
            if attempt == attempts - 1:
                raise
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def moto_server():
    """A real moto_server process on 127.0.0.1. Yields its endpoint URL."""
    yield from _serve(lambda port: [_venv_bin("moto_server"), "-H", "127.0.0.1", "-p", str(port)])


_MOTO_ACCOUNTS = itertools.count(1)


def fresh_moto_account(moto_server: str, monkeypatch) -> str:
    """Point boto3 (standard env vars) at the moto server with credentials for an AWS account
    of this test's own: nothing an earlier test left (instances, metrics, objects, Cost
    Explorer results) is visible in it. moto gives STS AssumeRole into any account id
    (docs/multi_account.rst); a fresh account costs one STS call, where `/moto-api/reset`
    makes moto rebuild every backend (seconds per test on a loaded machine). Returns the id."""
    import boto3

    account = f"{(os.getpid() % 100_000) * 10_000_000 + next(_MOTO_ACCOUNTS):012d}"
    sts = boto3.client(
        "sts", endpoint_url=moto_server, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    creds = sts.assume_role(RoleArn=f"arn:aws:iam::{account}:role/test", RoleSessionName="test")["Credentials"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds["SecretAccessKey"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", creds["SessionToken"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # boto3's default session (boto3.client(...)) caches the first credentials it saw: give
    # this test one that reads its own.
    boto3.setup_default_session(botocore_session=botocore_session())
    return account


_BOTO_LOADER = None


def botocore_session():
    """A fresh botocore session (credentials read anew from the environment) sharing one model
    loader: parsing EC2's service model costs about a second per fresh loader."""
    global _BOTO_LOADER
    import botocore.session

    core = botocore.session.Session()
    if _BOTO_LOADER is None:
        _BOTO_LOADER = core.get_component("data_loader")
    core.register_component("data_loader", _BOTO_LOADER)
    return core


@pytest.fixture
def aws_account(moto_server, monkeypatch) -> str:
    """The id of this test's own moto account (see fresh_moto_account)."""
    return fresh_moto_account(moto_server, monkeypatch)


@pytest.fixture
def aws_env(aws_account, moto_server) -> str:
    """boto3 pointed at the moto server, in an account of this test's own. Yields the URL."""
    return moto_server


@pytest.fixture(scope="session")
def gcs_emulator():
    """A real gcp-storage-emulator process on 127.0.0.1. Yields its host URL."""
    yield from _serve(lambda port: [_venv_bin("gcp-storage-emulator"), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"])


@pytest.fixture
def gcs_env(gcs_emulator, monkeypatch) -> str:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    return gcs_emulator


def run_cli(*args: str, env: dict | None = None, timeout: float = 120, cwd: Path | None = None):
    """Run the real `launcher` console entry point in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "launcher.cli.main", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=str(cwd or REPO),
    )


@pytest.fixture(autouse=True)
def _restore_tracebacklimit():
    """SkyPilot leaves `sys.tracebacklimit = 0` behind when it raises (ux_utils); a later test in
    the same worker (Pulumi's stack capture) would then see an empty stack."""
    had, saved = hasattr(sys, "tracebacklimit"), getattr(sys, "tracebacklimit", None)
    yield
    if had:
        sys.tracebacklimit = saved
    elif hasattr(sys, "tracebacklimit"):
        del sys.tracebacklimit
