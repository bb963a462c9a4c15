"""Where state lives: everything under LAUNCHER_HOME (default ~/.launcher)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("LAUNCHER_HOME") or Path.home() / ".launcher").expanduser()


def ensure_home() -> Path:
    h = home()
    h.mkdir(mode=0o700, parents=True, exist_ok=True)
    return h


def runs_dir() -> Path:
    return home() / "runs"


def catalog_cache_dir() -> Path:
    return home() / "catalogs"


def risk_file() -> Path:
    """The user's interruption-risk overrides (optional)."""
    return home() / "risk.yaml"


def pulumi_state_dir() -> Path:
    return home() / "pulumi"


def db_url() -> str:
    """LAUNCHER_DB_URL, or the embedded SQLite ledger under LAUNCHER_HOME."""
    url = os.environ.get("LAUNCHER_DB_URL")
    if url:
        return url
    return f"sqlite:///{home() / 'ledger.db'}"
