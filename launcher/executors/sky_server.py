"""Our own SkyPilot API server: a HOME of its own, a free loopback port, usage collection off.

SkyPilot keeps its state (clusters, request logs, catalogs) under `~/.sky` of the process that
runs its API server. We start that server with HOME=`$LAUNCHER_SKY_HOME` (default
`$LAUNCHER_HOME/sky`) so it never mixes with a SkyPilot the user runs themselves; the user's
cluster configs (`~/.slurm`, `~/.kube`, `~/.ssh`) are linked into it. The port is picked free at
first start and remembered beside it; `SKYPILOT_API_SERVER_LOCAL_PORT` points the client in this
process at it. `python -m launcher.executors.sky_server stop` stops it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from launcher import paths
from launcher.errors import ProviderError

TELEMETRY_ENV = "SKYPILOT_DISABLE_USAGE_COLLECTION"
PORT_ENV = "SKYPILOT_API_SERVER_LOCAL_PORT"
HOME_ENV = "LAUNCHER_SKY_HOME"
START_TIMEOUT_S = 180.0
_LINKED = (".slurm", ".kube", ".ssh")


def sky_home() -> Path:
    return Path(os.environ.get(HOME_ENV) or paths.home() / "sky").expanduser()


def _port_file() -> Path:
    return sky_home() / "api_port"


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=3) as r:
            return r.status == 200
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(port: int) -> dict[str, str]:
    env = {**os.environ, "HOME": str(sky_home()), PORT_ENV: str(port)}
    env.setdefault(TELEMETRY_ENV, "1")
    env.pop("SKYPILOT_API_SERVER_ENDPOINT", None)
    return env


def _sky_cli(args: list[str], port: int, timeout_s: float) -> subprocess.CompletedProcess:
    code = "import sys; from sky.client.cli.command import cli; sys.exit(cli())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=server_env(port), capture_output=True, text=True,
        timeout=timeout_s, stdin=subprocess.DEVNULL, cwd=str(sky_home()),
    )  # fmt: skip


def _link_user_configs(home: Path) -> None:
    real = Path.home()
    for name in _LINKED:
        src, dst = real / name, home / name
        if src.exists() and not dst.exists() and not dst.is_symlink():
            dst.symlink_to(src)


def ensure_server() -> int:
    """Start (or find) the API server; set this process's client to it; returns its port."""
    from filelock import FileLock

    os.environ.setdefault(TELEMETRY_ENV, "1")
    home = sky_home()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    with FileLock(str(home / "api_server.lock"), timeout=START_TIMEOUT_S + 30):
        port = _recorded_port()
        if port is None or not _healthy(port):
            _link_user_configs(home)
            port = _free_port()
            try:
                done = _sky_cli(["api", "start"], port, START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise ProviderError(f"SkyPilot's API server did not start within {START_TIMEOUT_S:.0f}s (port {port})") from None
            if done.returncode != 0 or not _healthy(port):
                tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
                raise ProviderError(f"SkyPilot's API server did not start on 127.0.0.1:{port}: {tail}")
            _port_file().write_text(str(port))
    os.environ[PORT_ENV] = str(port)
    os.environ.pop("SKYPILOT_API_SERVER_ENDPOINT", None)
    return port


def _recorded_port() -> int | None:
    try:
        return int(_port_file().read_text().strip())
    except (OSError, ValueError):
        return None


def stop_server() -> bool:
    """Stop the API server of this home, if one runs. True when one was stopped."""
    port = _recorded_port()
    if port is None:
        return False
    running = _healthy(port)
    if running:
        _sky_cli(["api", "stop"], port, 60)
    _port_file().unlink(missing_ok=True)
    return running


def request_log_tail(request_id: str | None, lines: int = 12) -> str:
    """The last lines of SkyPilot's own log of a request (where its real cause is written)."""
    if not request_id:
        return ""
    for folder in (".sky/api_server/request_logs", "sky_logs/api_server/requests"):
        log = sky_home() / folder / f"{request_id}.log"
        try:
            text = log.read_text(errors="replace")
        except OSError:
            continue
        kept = [ln for ln in text.strip().splitlines() if ln.strip()]
        return "\n".join(kept[-lines:])
    return ""


def sky_check(kinds: list[str]) -> dict[str, tuple[bool, str]]:
    """Ask SkyPilot which of these infra kinds it can use: {'slurm/<cluster>': (ok, reason)}."""
    ensure_server()
    from sky.client import sdk

    out: dict[str, tuple[bool, str]] = {}
    infra_list = tuple("kubernetes" if k == "kubernetes" else k for k in kinds)
    sdk.get(sdk.check(infra_list=infra_list, verbose=False))
    for kind in kinds:
        try:
            names = sdk.get(sdk.enabled_clouds(expand=True))
        except Exception as e:  # noqa: BLE001 - reported per cluster
            return {f"{kind}/": (False, f"SkyPilot check failed: {e}")}
        for n in names:
            n = str(n).lower()
            if n.startswith(f"{kind}/") or (kind == "kubernetes" and n.startswith("k8s/")):
                target = n.split("/", 1)[1]
                out[f"{kind}/{target}"] = (True, "enabled in `sky check`")
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["stop"]:
        print("stopped SkyPilot API server" if stop_server() else "no SkyPilot API server running", file=sys.stderr)
        return 0
    if argv[:1] == ["start"]:
        print(ensure_server())
        return 0
    print("usage: python -m launcher.executors.sky_server start|stop", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
