"""An HTTP proxy in front of moto_server that answers the next N requests with the service's
throttling error (moto itself never throttles), so botocore's real retry handling is exercised.
`only` picks which requests may be throttled (e.g. one region's CloudWatch calls, by the
credential scope of their signature). EC2 speaks XML (RequestLimitExceeded); CloudWatch, as
botocore calls it, AWS JSON 1.0 (ThrottlingException): each is answered in kind."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

THROTTLE_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>RequestLimitExceeded</Code>'
    b"<Message>Request limit exceeded.</Message></Error></Errors><RequestID>throttle</RequestID></Response>"
)


# AWS JSON 1.0 (CloudWatch as botocore speaks it now): the error type names the throttling.
THROTTLE_JSON = b'{"__type": "com.amazonaws.cloudwatch#ThrottlingException", "message": "Rate exceeded"}'


class ThrottleProxy:
    def __init__(self, upstream: str, only: Callable[[dict[str, str]], bool] | None = None) -> None:
        self.upstream = urlparse(upstream)
        self.only = only
        self.throttle_next = 0
        self.throttled = 0
        self.forwarded = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                chosen = proxy.only is None or proxy.only(dict(self.headers))
                with proxy._lock:
                    throttle = chosen and proxy.throttle_next > 0
                    if throttle:
                        proxy.throttle_next -= 1
                        proxy.throttled += 1
                    else:
                        proxy.forwarded += 1
                json_protocol = (self.headers.get("Content-Type") or "").startswith("application/x-amz-json")
                if throttle and json_protocol:
                    status, headers, data = 400, {"Content-Type": "application/x-amz-json-1.0"}, THROTTLE_JSON
                elif throttle:
                    status, headers, data = 503, {"Content-Type": "text/xml"}, THROTTLE_BODY
                else:
                    conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=30)
                    conn.request(self.command, self.path, body=body, headers=dict(self.headers))
                    resp = conn.getresponse()
                    status, data = resp.status, resp.read()
                    headers = {k: v for k, v in resp.getheaders() if k.lower() not in ("content-length", "transfer-encoding", "connection")}
                    conn.close()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
