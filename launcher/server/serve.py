"""`launcher server`: one replica (lease loop + controllers) and the HTTP API in one process."""

from __future__ import annotations

import os
import socket
import sys

from launcher.errors import BadInputError

SERVER_POOL_SIZE = 8  # PostgreSQL connections per replica (plus as many on bursts)


def serve(
    *, host: str, port: int, ttl_s: float, heartbeat_s: float | None, max_runs: int, claim_batch: int = 4,
    local_jobs_user: str | None = None,
) -> None:  # fmt: skip
    """Run until SIGTERM/SIGINT, then hand this replica's leases back (another replica takes the
    runs at once) and exit. `local_jobs_user`: run non-admins' local jobs as that unprivileged
    user (launcher.server.local_jobs); checked before anything starts."""
    import uvicorn

    from launcher import paths
    from launcher.server.local_jobs import LocalJobs

    local_jobs = LocalJobs()
    if local_jobs_user:
        from launcher.executors.job_user import resolve_job_user

        local_jobs = LocalJobs(run_as=resolve_job_user(local_jobs_user, home=paths.ensure_home()))

    from launcher.ledger.leases import LeaseLedger
    from launcher.metrics.exporter import ledger_metrics
    from launcher.server.app import create_app
    from launcher.server.replica import Replica, _stderr

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        raise BadInputError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    ledger = LeaseLedger(pool_size=SERVER_POOL_SIZE)
    try:
        replica = Replica(ledger, ttl_s=ttl_s, heartbeat_s=heartbeat_s, max_runs=max_runs, claim_batch=claim_batch, local_jobs=local_jobs)
    except ValueError as e:
        raise BadInputError(str(e)) from None
    app = create_app(ledger, metrics=ledger_metrics(ledger, replica=replica), local_jobs=local_jobs)
    bound = sock.getsockname()[1]
    who = f"as user {local_jobs_user}" if local_jobs_user else "refused (admins' only)"
    _stderr(f"launcher server {replica.owner_id} listening on http://{host}:{bound} (ledger {ledger.url}, lease {ttl_s:g}s; non-admins' local jobs {who})")
    replica.start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        n = replica.stop(release=True)
        _stderr(f"launcher server {replica.owner_id} stopped; handed back {n} lease(s)")
        sys.stderr.flush()
        os._exit(0)  # controller threads must not outlive their (released) leases
