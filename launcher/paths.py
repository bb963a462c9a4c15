"""Where state lives: everything under LAUNCHER_HOME (default ~/.launcher)."""

from __future__ import annotations

import os
from pathlib import Path


_user_umask: int | None = None


def make_state_private() -> None:
    """State is private whatever the caller's umask: dirs 0700, files 0600 (jobs inherit it, so
    the checkpoints a resumed job loads cannot be replaced by another local user). The caller's
    umask is kept for files made for the user to share (reports)."""
    global _user_umask
    previous = os.umask(0o077)
    if _user_umask is None:
        _user_umask = previous


def user_umask() -> int:
    """The umask the user ran us with (before make_state_private)."""
    if _user_umask is not None:
        return _user_umask
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def home() -> Path:
    return Path(os.environ.get("LAUNCHER_HOME") or Path.home() / ".launcher").expanduser()


def ensure_home() -> Path:
    h = home()
    h.mkdir(mode=0o700, parents=True, exist_ok=True)
    return h


def runs_dir() -> Path:
    return home() / "runs"


def clusters_file() -> Path:
    """The declared clusters (`launcher clusters`); launcher.clusters reads and writes it."""
    return home() / "clusters.yaml"


def catalog_cache_dir() -> Path:
    return home() / "catalogs"


def risk_file() -> Path:
    """The user's interruption-risk overrides (optional)."""
    return home() / "risk.yaml"


def pulumi_state_dir() -> Path:
    return home() / "pulumi"


def daemon_socket() -> Path:
    """The command daemon's Unix socket (`launcher daemon`); private like the rest of the home."""
    return home() / "daemon.sock"


def daemon_lock() -> Path:
    """Held by the running command daemon for its whole life: one daemon per LAUNCHER_HOME."""
    return home() / "daemon.lock"


def daemon_log() -> Path:
    return home() / "daemon.log"


def db_url() -> str:
    """LAUNCHER_DB_URL, or the embedded SQLite ledger under LAUNCHER_HOME."""
    url = os.environ.get("LAUNCHER_DB_URL")
    if url:
        return url
    return f"sqlite:///{home() / 'ledger.db'}"
