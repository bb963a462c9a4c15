"""The team server client for commands that also work on the local ledger (status, runs, logs,
down): None when no server is configured, so they read the local ledger as before."""

from __future__ import annotations

import typer

SERVER_OPTION_HELP = "Ask the team server at URL (default: LAUNCHER_SERVER or `server:` in ~/.launcher/config.yaml)."


def server_option():
    return typer.Option(None, "--server", metavar="URL", help=SERVER_OPTION_HELP)


def remote_client(flag: str | None):
    from launcher.server.settings import server_settings

    settings = server_settings(flag)
    if settings is None:
        return None
    from launcher.server.client import ServerClient

    return ServerClient(settings.urls, settings.token)
