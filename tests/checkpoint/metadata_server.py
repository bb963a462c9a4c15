"""A local stand-in for the AWS (IMDSv2) and GCP metadata servers, on 127.0.0.1.

It answers like the real ones: AWS gives a session token on PUT /latest/api/token, requires it
on reads, and returns 404 for spot/instance-action until an action is scheduled; GCP requires
`Metadata-Flavor: Google` and returns FALSE/TRUE for instance/preempted."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "imds-token-123"


class MetadataServer:
    def __init__(self, imdsv2: bool = True) -> None:
        self.preempted = False
        self.imdsv2 = imdsv2
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, body: str = "", ctype: str = "text/plain") -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self):
                outer.requests.append(("PUT", self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.path == "/latest/api/token" and outer.imdsv2:
                    if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                        return self._send(400)
                    return self._send(200, TOKEN)
                return self._send(403)

            def do_GET(self):
                outer.requests.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.path == "/latest/meta-data/spot/instance-action":
                    if outer.imdsv2 and self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                        return self._send(401)
                    if not outer.preempted:
                        return self._send(404, "Not Found")
                    doc = {"action": "terminate", "time": "2026-11-30T09:00:00Z"}
                    return self._send(200, json.dumps(doc), "application/json")
                if self.path == "/computeMetadata/v1/instance/preempted":
                    if self.headers.get("Metadata-Flavor") != "Google":
                        return self._send(403)
                    return self._send(200, "TRUE" if outer.preempted else "FALSE")
                return self._send(404)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> MetadataServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
