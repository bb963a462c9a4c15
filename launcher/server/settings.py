"""Where the CLI finds the team server: `--server URL` (commas for several replicas), else
LAUNCHER_SERVER, else `server:` in $LAUNCHER_HOME/config.yaml; the token from LAUNCHER_TOKEN,
else `token:` in the same file (which should then be private: mode 0600)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from launcher import paths
from launcher.errors import BadInputError

CONFIG_FILE = "config.yaml"


class UserConfig(BaseModel):
    # Other keys belong to other parts of the launcher: ignored here, validated by their owners.
    model_config = ConfigDict(extra="ignore", defer_build=True)  # see config_file.defaults

    server: str | None = None
    token: str | None = None


@dataclass(frozen=True)
class ServerSettings:
    urls: tuple[str, ...]
    token: str | None


def _config() -> UserConfig:
    from launcher.config_file import load_yaml_model

    return load_yaml_model(paths.home() / CONFIG_FILE, UserConfig, missing_ok=True, what="user config")


def server_settings(flag: str | None = None) -> ServerSettings | None:
    """None when no server is configured (the commands then work on the local ledger)."""
    cfg: UserConfig | None = None
    raw = flag or os.environ.get("LAUNCHER_SERVER")
    if not raw:
        cfg = _config()
        raw = cfg.server
    if not raw:
        return None
    urls = tuple(u.strip().rstrip("/") for u in raw.split(",") if u.strip())
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise BadInputError(f"server URL {u!r} must start with http:// or https://")
    token = os.environ.get("LAUNCHER_TOKEN") or (cfg or _config()).token
    return ServerSettings(urls, token)
