"""`launcher server [--host H] [--port P]`, `launcher server users add|list|remove`,
`launcher server tokens create|revoke`. User and token commands work on the ledger directly
(LAUNCHER_DB_URL): whoever can reach the database administers the server."""

from __future__ import annotations

import sys

import typer

from launcher.cli.app import app

server_app = typer.Typer(help="The team server: runs that outlive the laptop.", invoke_without_command=True)
users_app = typer.Typer(help="Users of the server and their role per project.", no_args_is_help=True)
tokens_app = typer.Typer(help="API tokens (shown once, stored hashed).", no_args_is_help=True)
server_app.add_typer(users_app, name="users")
server_app.add_typer(tokens_app, name="tokens")
app.add_typer(server_app, name="server")


@server_app.callback()
def server(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8470, "--port", help="Port to listen on (0: any free port, printed)."),
    lease_seconds: float = typer.Option(30.0, "--lease-seconds", help="A dead replica's runs are adopted after this long."),
    heartbeat_seconds: float | None = typer.Option(None, "--heartbeat-seconds", help="Lease renewal interval (default: a third of the lease)."),
    max_runs: int = typer.Option(50, "--max-runs", help="Most runs this replica drives at once."),
    claim_batch: int = typer.Option(4, "--claim-batch", help="Most new runs claimed per heartbeat (spreads work across replicas)."),
    local_jobs_user: str | None = typer.Option(
        None, "--local-jobs-user",
        help="Run non-admins' `--cloud local` jobs on this machine as this unprivileged user (the server must run as root). Unset: they are refused.",
    ),
) -> None:
    """Run a server replica: drive submitted runs (leases in the shared ledger) and serve the API."""
    if ctx.invoked_subcommand is not None:
        return
    from launcher.server.serve import serve

    serve(
        host=host, port=port, ttl_s=lease_seconds, heartbeat_s=heartbeat_seconds, max_runs=max_runs, claim_batch=claim_batch,
        local_jobs_user=local_jobs_user,
    )  # fmt: skip


def _users():
    from launcher.ledger import Ledger
    from launcher.server.auth import Users

    led = Ledger()
    return led, Users(led)


@users_app.command("add")
def users_add(
    name: str = typer.Argument(...),
    project: str = typer.Option("*", "--project", help="Project the role applies to ('*' = every project)."),
    role: str = typer.Option("member", "--role", help="viewer | member | admin"),
) -> None:
    """Add a user (or give an existing one a role on a project)."""
    from launcher.cli.render import info

    led, users = _users()
    with led:
        users.add(name, project=project, role=role)
    info(f"user {name}: {role} on {project}")


@users_app.command("list")
def users_list(json_out: bool = typer.Option(False, "--json")) -> None:
    """Users, their roles and active token ids."""
    from launcher.cli.render import print_json, print_table

    led, users = _users()
    with led:
        rows = users.list()
    if json_out:
        print_json({"users": rows})
        return
    print_table(None, ["USER", "ROLES", "TOKENS"], [
        [u["name"], ", ".join(f"{p}={r}" for p, r in sorted(u["roles"].items())), ", ".join(u["active_tokens"])] for u in rows
    ])  # fmt: skip


@users_app.command("remove")
def users_remove(name: str = typer.Argument(...)) -> None:
    """Remove a user with their roles and tokens (which stop working at once)."""
    from launcher.cli.render import info

    led, users = _users()
    with led:
        users.remove(name)
    info(f"user {name} removed")


@tokens_app.command("create")
def tokens_create(user: str = typer.Argument(...), label: str | None = typer.Option(None, "--label")) -> None:
    """Create a token for USER. It is printed once, on stdout; only its hash is kept."""
    from launcher.cli.render import info

    led, users = _users()
    with led:
        token_id, token = users.create_token(user, label=label)
    info(f"token {token_id} for {user} (shown once; store it now, e.g. LAUNCHER_TOKEN)")
    sys.stdout.write(token + "\n")


@tokens_app.command("revoke")
def tokens_revoke(token_id: str = typer.Argument(..., help="The token's id (or the token).")) -> None:
    """Revoke a token; requests with it fail from now on."""
    from launcher.cli.render import info

    led, users = _users()
    with led:
        users.revoke_token(token_id)
    info("token revoked")
