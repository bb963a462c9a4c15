"""The server's HTTP API (Starlette; served by uvicorn).

    POST /api/v1/runs                 submit (member of the spec's project)  -> {"run_id"}
    GET  /api/v1/runs                 runs the caller may see (status / runs list)
    GET  /api/v1/runs/{run}           one run (runs show)
    GET  /api/v1/runs/{run}/logs      NDJSON log chunks by byte offset; follow=1 streams
    POST /api/v1/runs/{run}/down      cancel (member)
    GET  /metrics                     Prometheus text format (any valid token)
    GET  /healthz                     no token needed

Every API call needs `Authorization: Bearer <token>` (401 without a valid one, 403 without the
role). Errors are JSON {"error", "hint"} with a 4xx status and one readable message; a bug is a
500 that says "internal error" (details only in the server's own log, never a token).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import wraps
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from launcher.errors import BadInputError, ConflictError, LauncherError, NotFoundError
from launcher.server.auth import Principal, Users, redact_tokens
from launcher.server.errors import http_status
from launcher.server.logs import log_chunks, parse_offsets

FOLLOW_KEEPALIVE_S = 1.0
POLL_S = 0.2


def _default(o: Any) -> Any:
    if isinstance(o, datetime):
        return o.isoformat()
    return str(o)


def json_response(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, default=_default), status_code=status, media_type="application/json")


def _error(e: LauncherError) -> Response:
    body = {"error": redact_tokens(e.message)}
    if e.hint:
        body["hint"] = redact_tokens(e.hint)
    headers = {"WWW-Authenticate": "Bearer"} if http_status(e) == 401 else None
    r = json_response(body, http_status(e))
    if headers:
        r.headers.update(headers)
    return r


def create_app(ledger, *, metrics: Callable[[], bytes] | None = None, local_jobs=None) -> Starlette:
    """`ledger`: a LeaseLedger shared by the request threads (SQLAlchemy's pool is thread-safe).
    `local_jobs`: server.local_jobs.LocalJobs (default: non-admins' local jobs refused)."""
    from launcher.server.local_jobs import LocalJobs

    users = Users(ledger)
    local_jobs = local_jobs or LocalJobs()

    def endpoint(fn: Callable[..., Response]) -> Callable[[Request], Any]:
        """Authenticate, run `fn(request, principal, body)` in a worker thread (ledger calls
        block), map errors to one JSON message."""
        from starlette.concurrency import run_in_threadpool

        def call(request: Request, body: bytes) -> Response:
            try:
                principal = users.authenticate(request.headers.get("authorization"))
                return fn(request, principal, body)
            except LauncherError as e:
                return _error(e)
            except OSError as e:  # a full disk or a permission denied on the server's state: told, not a 500
                from launcher import paths
                from launcher.errors import from_os_error

                known = from_os_error(e, state_home=paths.home())
                if known is None:
                    traceback.print_exc(file=sys.stderr)
                    return json_response({"error": "internal error (see the server's log)"}, 500)
                return _error(known)
            except Exception:
                traceback.print_exc(file=sys.stderr)
                return json_response({"error": "internal error (see the server's log)"}, 500)

        @wraps(fn)
        async def handler(request: Request) -> Response:
            body = await request.body()
            return await run_in_threadpool(call, request, body)

        return handler

    def _body(request_body: bytes) -> Any:
        try:
            return json.loads(request_body or b"null")
        except ValueError:
            raise BadInputError("the request body is not JSON") from None

    def _run(run_ref: str, principal: Principal, role: str):
        try:  # a prefix or name matches only the caller's projects: an ambiguity lists no other project's run
            run = ledger.find_run(run_ref, projects=principal.visible_projects())
        except NotFoundError as e:  # its did-you-mean hint would name other projects' runs
            raise NotFoundError(e.message) from None
        principal.require(role, run.project)
        return run

    def _int(request: Request, name: str, default: int | None) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise BadInputError(f"query parameter {name!r} must be an integer, got {raw!r}") from None

    # ---- routes --------------------------------------------------------------------------------
    @endpoint
    def submit(request: Request, principal: Principal, body: bytes) -> Response:
        from launcher.server.submission import parse_submission, record_submission
        from launcher.spec.loader import load_spec_text

        sub = parse_submission(_body(body))
        project = load_spec_text(sub.spec_yaml).spec.launcher.project
        principal.require("member", project)
        _, refuse_local = local_jobs.decide(principal, project)
        run_id = record_submission(sub, ledger, submitted_by=principal.user, refuse_local=refuse_local)
        return json_response({"run_id": run_id}, 201)

    @endpoint
    def list_runs(request: Request, principal: Principal, body: bytes) -> Response:
        from launcher.controller.states import LIVE_STATES
        from launcher.controller.summary import run_summary

        state = request.query_params.get("state")
        live = request.query_params.get("live") == "1"
        limit = _int(request, "limit", 100)
        runs = ledger.list_runs(
            state=list(LIVE_STATES) if live else state, project=request.query_params.get("project") or None, limit=limit
        )
        visible = principal.visible_projects()
        rows = [run_summary(ledger, r) for r in runs if visible is None or r.project in visible]
        return json_response({"runs": rows})

    @endpoint
    def show_run(request: Request, principal: Principal, body: bytes) -> Response:
        from launcher.controller.summary import run_detail

        run = _run(request.path_params["run"], principal, "viewer")
        return json_response(run_detail(ledger, run))

    @endpoint
    def logs(request: Request, principal: Principal, body: bytes) -> Response:
        from launcher.controller.runner import run_dir

        run = _run(request.path_params["run"], principal, "viewer")
        rank = _int(request, "rank", None)
        offsets = parse_offsets(request.query_params.get("offsets", ""))
        follow = request.query_params.get("follow") == "1"
        attempts = ledger.attempts(run.run_id)
        num_nodes = attempts[-1].num_nodes if attempts else 1
        rd = run_dir(run.run_id)

        def stream() -> Iterator[bytes]:
            yield _line({"multi": num_nodes > 1})
            last_sent = time.monotonic()
            while True:
                ended = ledger.get_run(run.run_id).is_terminal or not follow
                sent = False
                for chunk in log_chunks(rd, offsets, rank=rank, complete_lines=not ended):
                    offsets[chunk["rank"]] = chunk["offset"]
                    sent = True
                    yield _line(chunk)
                if ended:
                    yield _line({"end": True, "state": ledger.get_run(run.run_id).state})
                    return
                if sent:
                    last_sent = time.monotonic()
                elif time.monotonic() - last_sent >= FOLLOW_KEEPALIVE_S:
                    last_sent = time.monotonic()
                    yield _line({})  # keeps proxies open and notices a client that left
                time.sleep(POLL_S)

        return StreamingResponse(stream(), media_type="application/x-ndjson")

    @endpoint
    def down(request: Request, principal: Principal, body: bytes) -> Response:
        run = _run(request.path_params["run"], principal, "member")
        wait_s = min(float(_int(request, "wait", 30) or 0), 600.0)
        state, how = _down(ledger, run.run_id, wait_s)
        return json_response({"run_id": run.run_id, "state": state, "how": how})

    @endpoint
    def metrics_endpoint(request: Request, principal: Principal, body: bytes) -> Response:
        if metrics is None:
            return json_response({"error": "metrics are not enabled on this server"}, 404)
        return Response(metrics(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def healthz(request: Request) -> Response:
        return json_response({"ok": True})

    async def not_found(request: Request, exc: Exception) -> Response:
        return json_response({"error": f"no such endpoint: {request.method} {request.url.path}"}, 404)

    async def bad_method(request: Request, exc: Exception) -> Response:
        return json_response({"error": f"{request.method} is not allowed on {request.url.path}"}, 405)

    routes = [
        Route("/healthz", healthz),
        Route("/api/v1/runs", submit, methods=["POST"]),
        Route("/api/v1/runs", list_runs, methods=["GET"]),
        Route("/api/v1/runs/{run}", show_run, methods=["GET"]),
        Route("/api/v1/runs/{run}/logs", logs, methods=["GET"]),
        Route("/api/v1/runs/{run}/down", down, methods=["POST"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: bad_method})


def _line(obj: dict) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _down(ledger, run_id: str, wait_s: float) -> tuple[str, str]:
    """Ask the run's owner to stop it: STOPPING in the ledger (compare-and-set), which its
    controller notices within a heartbeat; a run nobody holds is finished by whichever replica
    claims it next. Never signals a process: the owner may be any replica."""
    from launcher.controller.states import LIVE_STATES
    from launcher.ledger.records import EndReason, RunState

    run = ledger.get_run(run_id)
    if run.is_terminal:
        return run.state, "already ended"
    if run.state != RunState.STOPPING:
        try:
            ledger.set_run_state(run_id, RunState.STOPPING, reason=EndReason.CANCELLED, expected_from=LIVE_STATES - {RunState.STOPPING})
        except ConflictError:
            pass
    deadline = time.monotonic() + wait_s
    while True:
        run = ledger.get_run(run_id)
        if run.is_terminal:
            return run.state, "its controller stopped it"
        if time.monotonic() >= deadline:
            return run.state, f"stopping (not ended within {wait_s:g}s; its controller finishes it)"
        time.sleep(POLL_S)
