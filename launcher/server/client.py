"""The CLI's side of the server API (httpx). Several URLs (replicas) are tried in order; a
replica that does not answer is skipped. Errors come back as the same LauncherError types the
local commands raise, with the server's one-line message."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx

from launcher.errors import (
    BadInputError,
    ConflictError,
    DiskFullError,
    LauncherError,
    NotFoundError,
    ProviderError,
    RefusedError,
)
from launcher.executors.ansi import strip_ansi
from launcher.server.errors import ForbiddenError, UnauthenticatedError
from launcher.server.logs import format_offsets

_ERRORS: dict[int, type[LauncherError]] = {
    400: BadInputError, 401: UnauthenticatedError, 403: ForbiddenError, 404: NotFoundError,
    405: BadInputError, 409: ConflictError, 422: RefusedError, 507: DiskFullError,
}  # fmt: skip
FAILOVER_WAIT_S = 120.0  # how long `logs --follow` keeps trying when no replica answers


class ServerClient:
    def __init__(self, urls: tuple[str, ...], token: str | None, *, timeout_s: float = 30.0) -> None:
        if not urls:
            raise BadInputError("no server URL")
        self.urls = urls
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = httpx.Timeout(timeout_s, connect=5.0)

    # ---- plumbing ------------------------------------------------------------------------------
    def _request(self, method: str, path: str, **kw: Any) -> Any:
        last: Exception | None = None
        timeout = kw.pop("timeout", self._timeout)
        for url in self.urls:
            try:
                r = httpx.request(method, url + path, headers=self._headers, timeout=timeout, **kw)
            except httpx.TransportError as e:
                last = e
                continue
            return _decode(r)
        raise ProviderError(f"no server answered ({', '.join(self.urls)}): {type(last).__name__}")

    # ---- API -----------------------------------------------------------------------------------
    def submit(self, submission: dict) -> str:
        return self._request("POST", "/api/v1/runs", json=submission)["run_id"]

    def runs(self, *, live: bool = False, state: str | None = None, project: str | None = None, limit: int | None = None) -> list[dict]:
        params = {k: v for k, v in {"live": "1" if live else None, "state": state, "project": project, "limit": limit}.items() if v is not None}
        return [_dates(r) for r in self._request("GET", "/api/v1/runs", params=params)["runs"]]

    def run(self, run: str) -> dict:
        return _dates(self._request("GET", f"/api/v1/runs/{run}"))

    def down(self, run: str, *, wait_s: float) -> dict:
        return self._request("POST", f"/api/v1/runs/{run}/down", params={"wait": int(wait_s)}, timeout=httpx.Timeout(wait_s + 30, connect=5.0))

    def logs(self, run: str, sink: Callable[[str], None], *, follow: bool, rank: int | None = None,
             failover_wait_s: float = FAILOVER_WAIT_S, on_reconnect: Callable[[str], None] | None = None) -> str | None:  # fmt: skip
        """Print a run's log lines through `sink`; with `follow`, until the run ends, carrying on
        at the same byte offsets on another replica when the one streaming goes away. Returns
        the run's final state (None when not following)."""
        offsets: dict[int, int] = {}
        partial: dict[int, str] = {}
        multi = False
        down_since: float | None = None
        while True:
            for url in self.urls:
                params: dict[str, Any] = {"follow": "1" if follow else "0", "offsets": format_offsets(offsets)}
                if rank is not None:
                    params["rank"] = rank
                try:
                    with httpx.stream("GET", f"{url}/api/v1/runs/{run}/logs", params=params, headers=self._headers,
                                      timeout=httpx.Timeout(30.0, connect=5.0)) as r:  # fmt: skip
                        if r.status_code >= 400:
                            r.read()
                            _decode(r)
                        down_since = None
                        for raw in r.iter_lines():
                            if not raw:
                                continue
                            msg = json.loads(raw)
                            if "multi" in msg:
                                multi = bool(msg["multi"]) and rank is None
                            elif "text" in msg:
                                r_ = int(msg["rank"])
                                offsets[r_] = int(msg["offset"])
                                text = partial.pop(r_, "") + msg["text"]
                                *lines, rest = text.split("\n")
                                if rest:
                                    partial[r_] = rest
                                for line in lines:
                                    sink((f"(rank {r_}) " if multi else "") + strip_ansi(line))
                            elif msg.get("end"):
                                for r_, rest in sorted(partial.items()):
                                    sink((f"(rank {r_}) " if multi else "") + strip_ansi(rest))
                                return msg.get("state") if follow else None
                except (httpx.TransportError, httpx.StreamError) as e:
                    if on_reconnect is not None:
                        on_reconnect(f"{url}: {type(e).__name__}; trying again")
                    continue
            # No replica answered (or the stream broke everywhere): wait a little, bounded.
            down_since = down_since or time.monotonic()
            if time.monotonic() - down_since > failover_wait_s:
                raise ProviderError(f"no server answered for {failover_wait_s:.0f}s ({', '.join(self.urls)})")
            time.sleep(0.5)


def _decode(r: httpx.Response) -> Any:
    try:
        body = r.json()
    except ValueError:
        body = None
    if r.status_code < 400:
        return body
    msg = body.get("error") if isinstance(body, dict) else None
    hint = body.get("hint") if isinstance(body, dict) else None
    cls = _ERRORS.get(r.status_code, ProviderError)
    raise cls(msg or f"server answered HTTP {r.status_code}", hint=hint)


def _dates(row: dict) -> dict:
    for k in ("created_at", "ended_at", "deadline_at"):
        if isinstance(row.get(k), str):
            row[k] = datetime.fromisoformat(row[k])
    return row
