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
    import socket
    import sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from launcher.errors import BadInputError
    from launcher.ledger import Ledger
    from launcher.metrics.exporter import ledger_metrics

    ledger = Ledger()
    render = ledger_metrics(ledger)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics here")
                return
            body = render()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # quiet: Prometheus scrapes often
            pass

    ThreadingHTTPServer.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        httpd = ThreadingHTTPServer((host, port), Handler)
    except OSError as e:
        raise BadInputError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sys.stderr.write(f"serving ledger metrics on http://{host}:{httpd.server_address[1]}/metrics\n")
    sys.stderr.flush()
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        ledger.close()
