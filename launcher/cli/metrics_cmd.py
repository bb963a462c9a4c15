"""`launcher metrics serve --port P`: the ledger's Prometheus metrics for a single user (the
team server exports the same at /metrics)."""

from __future__ import annotations

import typer

from launcher.cli.app import app

metrics_app = typer.Typer(help="Prometheus metrics from the ledger.", no_args_is_help=True)
app.add_typer(metrics_app, name="metrics")


@metrics_app.command("serve")
def metrics_serve(
    port: int = typer.Option(9477, "--port", help="Port (0: any free port, printed)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
) -> None:
    """Serve /metrics until interrupted."""
    import sys

    from prometheus_client import start_http_server

    from launcher.errors import BadInputError
    from launcher.ledger import Ledger
    from launcher.metrics.exporter import ledger_registry

    ledger = Ledger()
    try:
        httpd, thread = start_http_server(port, addr=host, registry=ledger_registry(ledger))
    except OSError as e:
        ledger.close()
        raise BadInputError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sys.stderr.write(f"serving ledger metrics on http://{host}:{httpd.server_address[1]}/metrics\n")
    sys.stderr.flush()
    try:
        while thread.is_alive():
            thread.join(timeout=1.0)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.shutdown()
        httpd.server_close()
        ledger.close()
