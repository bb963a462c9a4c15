"""A local HTTP server that speaks the Compute Engine v1 REST shapes the gcp provider uses.

There is no usable Compute emulator, so tests point the real `google-cloud-compute` client
(transport="rest") at this server. It implements, with the real JSON shapes:

  GET    /compute/v1/projects/{p}/aggregated/instances      filter, maxResults, pageToken paging
  GET    /compute/v1/projects/{p}/zones/{z}/instances/{name}
  DELETE /compute/v1/projects/{p}/zones/{z}/instances/{name} -> zone operation (RUNNING, then DONE)
  POST   /compute/v1/projects/{p}/zones/{z}/instances/{name}/setLabels  (labelFingerprint checked)
  POST   /compute/v1/projects/{p}/zones/{z}/instances/{name}/stop
  GET    /compute/v1/projects/{p}/zones/{z}/operations/{op}   and  POST .../{op}/wait
  GET    /compute/v1/projects/{p}/zones/{z}/operations        filter (e.g. operationType)
  GET    /v3/projects/{p}/timeSeries     (Cloud Monitoring) filter, interval, pageToken paging;
         per-series alignment (ALIGN_MEAN / ALIGN_MAX over alignmentPeriod, periods ending at the
         interval's end, each point stamped with its period's end); raw points without one

Errors use Google's error body ({"error": {"code", "message", "errors": [{"reason"}]}}).
`fail_next(method, status)` injects API errors (429 for throttling, 503, ...). Unknown filter
syntax is a 400, so a provider that sends something this server does not understand fails loudly.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

BASE = "https://www.googleapis.com/compute/v1"


def _fingerprint(labels: dict) -> str:
    import base64

    return base64.b64encode(hashlib.sha1(json.dumps(labels, sort_keys=True).encode()).digest()[:8]).decode()


@dataclass
class _Fault:
    method: str
    status: int
    remaining: int
    path_contains: str = ""


@dataclass
class GceState:
    instances: dict[tuple[str, str, str], dict] = field(default_factory=dict)  # (project, zone, name)
    operations: dict[tuple[str, str, str], dict] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path?query)
    faults: list[_Fault] = field(default_factory=list)
    polls_until_done: int = 1  # an operation reports RUNNING this many times before DONE
    series: list[dict] = field(default_factory=list)  # Cloud Monitoring time series (with _project)


class GceServer:
    def __init__(self) -> None:
        self.state = GceState()
        self._lock = threading.RLock()
        self._ids = itertools.count(1_000_000_000_001)
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def start(self) -> GceServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def reset(self) -> None:
        with self._lock:
            self.state = GceState()

    # ---- seeding (what a Pulumi stack or a user would have created) ---------------------------
    def add_instance(
        self,
        project: str,
        zone: str,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        machine_type: str = "g2-standard-4",
        status: str = "RUNNING",
        spot: bool = True,
        created: str = "2026-11-30T00:00:00.000-08:00",
    ) -> dict:
        with self._lock:
            labels = dict(labels or {})
            inst = {
                "kind": "compute#instance",
                "id": str(next(self._ids)),
                "creationTimestamp": created,
                "name": name,
                "zone": f"{BASE}/projects/{project}/zones/{zone}",
                "machineType": f"{BASE}/projects/{project}/zones/{zone}/machineTypes/{machine_type}",
                "status": status,
                "labels": labels,
                "labelFingerprint": _fingerprint(labels),
                "scheduling": (
                    {"provisioningModel": "SPOT", "preemptible": True, "instanceTerminationAction": "DELETE"}
                    if spot
                    else {"provisioningModel": "STANDARD", "preemptible": False, "automaticRestart": True}
                ),
                "networkInterfaces": [{"networkIP": f"10.128.0.{len(self.state.instances) % 250 + 2}"}],
                "selfLink": f"{BASE}/projects/{project}/zones/{zone}/instances/{name}",
            }
            self.state.instances[(project, zone, name)] = inst
            return inst

    def add_series(self, project: str, metric: str, instance: dict, values_by_minutes_ago: dict[int, float],
                   metric_labels: dict[str, str] | None = None) -> None:
        """A Cloud Monitoring series for `instance` (as returned by add_instance)."""
        from datetime import UTC, datetime, timedelta

        now = datetime.now(UTC)
        points = [
            {
                "interval": {"startTime": (now - timedelta(minutes=m)).isoformat().replace("+00:00", "Z"),
                             "endTime": (now - timedelta(minutes=m)).isoformat().replace("+00:00", "Z")},
                "value": {"doubleValue": v},
            }
            for m, v in sorted(values_by_minutes_ago.items())
        ]
        zone = instance["zone"].rsplit("/", 1)[1]
        with self._lock:
            self.state.series.append({
                "_project": project,
                "metric": {"type": metric, "labels": dict(metric_labels or {})},
                "resource": {"type": "gce_instance",
                             "labels": {"project_id": project, "instance_id": instance["id"], "zone": zone}},
                "metricKind": "GAUGE", "valueType": "DOUBLE", "points": points,
            })

    def _time_series(self, project: str, q: dict) -> tuple[int, dict]:
        from datetime import datetime

        pred = _parse_filter(q.get("filter", ""))
        start = datetime.fromisoformat(q["interval.startTime"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(q["interval.endTime"].replace("Z", "+00:00"))
        matching = []
        for ts in self.state.series:
            if ts["_project"] != project or not pred(ts):
                continue
            pts = [p for p in ts["points"]
                   if start <= datetime.fromisoformat(p["interval"]["endTime"].replace("Z", "+00:00")) <= end]
            if pts and q.get("aggregation.perSeriesAligner"):
                pts = _align(pts, end, int(q["aggregation.alignmentPeriod"].rstrip("s")), q["aggregation.perSeriesAligner"])
            if pts:
                matching.append({**_public(ts), "points": pts})
        size = int(q.get("pageSize", 1000))
        first = int(q.get("pageToken", "0") or 0)
        out: dict = {"timeSeries": matching[first : first + size]}
        if first + size < len(matching):
            out["nextPageToken"] = str(first + size)
        return 200, out

    def preempt(self, project: str, zone: str, name: str) -> None:
        """What GCE does to a SPOT VM with termination action DELETE: a done
        `compute.instances.preempted` operation, then the VM is gone."""
        with self._lock:
            inst = self.state.instances.pop((project, zone, name))
            self._new_op(project, zone, "compute.instances.preempted", inst, done=True)

    def fail_next(self, method: str, status: int, times: int = 1, path_contains: str = "") -> None:
        with self._lock:
            self.state.faults.append(_Fault(method.upper(), status, times, path_contains))

    # ---- internals ----------------------------------------------------------------------------
    def _new_op(self, project: str, zone: str, op_type: str, inst: dict, done: bool = False) -> dict:
        op_id = str(next(self._ids))
        op = {
            "kind": "compute#operation",
            "id": op_id,
            "name": f"operation-{op_id}",
            "zone": f"{BASE}/projects/{project}/zones/{zone}",
            "operationType": op_type,
            "targetLink": inst["selfLink"],
            "targetId": inst["id"],
            "status": "DONE" if done else "PENDING",
            "progress": 100 if done else 0,
            "insertTime": "2026-11-30T00:00:00.000-08:00",
            "selfLink": f"{BASE}/projects/{project}/zones/{zone}/operations/operation-{op_id}",
            "_polls": 0,
        }
        self.state.operations[(project, zone, op["name"])] = op
        return op

    def _advance(self, key: tuple[str, str, str]) -> dict:
        """Operations complete after `polls_until_done` looks; completing applies the effect."""
        op = self.state.operations[key]
        if op["status"] != "DONE":
            op["_polls"] += 1
            if op["_polls"] > self.state.polls_until_done:
                op["status"], op["progress"] = "DONE", 100
                project, zone, _ = key
                name = op["targetLink"].rsplit("/", 1)[1]
                if op["operationType"] == "delete":
                    self.state.instances.pop((project, zone, name), None)
                elif op["operationType"] == "stop" and (project, zone, name) in self.state.instances:
                    self.state.instances[(project, zone, name)]["status"] = "TERMINATED"
            else:
                op["status"] = "RUNNING"
        return op

    def handle(self, method: str, raw_path: str, body: bytes) -> tuple[int, dict]:
        with self._lock:
            self.state.requests.append((method, raw_path))
            for f in self.state.faults:
                if f.method == method and f.path_contains in raw_path and f.remaining > 0:
                    f.remaining -= 1
                    return _error(f.status, f"injected {f.status}", "rateLimitExceeded" if f.status == 429 else "backendError")
            url = urlparse(raw_path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            parts = url.path.strip("/").split("/")
            if parts[:2] == ["v3", "projects"] and parts[3:] == ["timeSeries"] and method == "GET":
                try:
                    return self._time_series(parts[2], q)
                except _FilterError as e:
                    return _error(400, f"Invalid filter: {e}", "badRequest")
            if parts[:3] != ["compute", "v1", "projects"] or len(parts) < 5:
                return _error(404, f"unknown path {url.path}", "notFound")
            project, rest = parts[3], parts[4:]
            try:
                return self._route(method, project, rest, q, body)
            except _FilterError as e:
                return _error(400, f"Invalid value for field 'filter': {e}", "invalid")

    def _route(self, method, project, rest, q, body) -> tuple[int, dict]:
        if method == "GET" and rest == ["aggregated", "instances"]:
            return 200, self._aggregated(project, q)
        if len(rest) >= 3 and rest[0] == "zones" and rest[2] == "instances" and len(rest) >= 4:
            zone, name = rest[1], rest[3]
            inst = self.state.instances.get((project, zone, name))
            if inst is None:
                return _error(404, f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found", "notFound")
            action = rest[4] if len(rest) > 4 else None
            if method == "GET" and action is None:
                return 200, _public(inst)
            if method == "DELETE" and action is None:
                inst["status"] = "STOPPING"
                return 200, _public(self._new_op(project, zone, "delete", inst))
            if method == "POST" and action == "setLabels":
                req = json.loads(body or b"{}")
                if req.get("labelFingerprint") != inst["labelFingerprint"]:
                    return _error(412, "Labels fingerprint either invalid or resource labels have changed", "conditionNotMet")
                inst["labels"] = dict(req.get("labels", {}))
                inst["labelFingerprint"] = _fingerprint(inst["labels"])
                return 200, _public(self._new_op(project, zone, "setLabels", inst, done=True))
            if method == "POST" and action == "stop":
                inst["status"] = "STOPPING"
                return 200, _public(self._new_op(project, zone, "stop", inst))
        if len(rest) >= 3 and rest[0] == "zones" and rest[2] == "operations":
            zone = rest[1]
            if len(rest) == 3 and method == "GET":
                pred = _parse_filter(q.get("filter", ""))
                items = [_public(o) for (p, z, _), o in self.state.operations.items() if p == project and z == zone]
                return 200, {"kind": "compute#operationList", "items": [o for o in items if pred(o)]}
            key = (project, zone, rest[3])
            if key not in self.state.operations:
                return _error(404, f"The resource 'operation {rest[3]}' was not found", "notFound")
            if method == "GET" and len(rest) == 4:
                return 200, _public(self._advance(key))
            if method == "POST" and rest[4:] == ["wait"]:
                op = self._advance(key)
                while op["status"] != "DONE":  # wait blocks until done (bounded by polls_until_done)
                    op = self._advance(key)
                return 200, _public(op)
        return _error(404, f"unsupported {method} {'/'.join(rest)}", "notFound")

    def _aggregated(self, project: str, q: dict) -> dict:
        pred = _parse_filter(q.get("filter", ""))
        matching = sorted(
            ((z, n, inst) for (p, z, n), inst in self.state.instances.items() if p == project and pred(inst)),
            key=lambda t: (t[0], t[1]),
        )
        size = min(int(q.get("maxResults", 500)), 500)
        start = int(q.get("pageToken", "0") or 0)
        page = matching[start : start + size]
        # Like GCE: zones with nothing to show still appear, carrying a NO_RESULTS_ON_PAGE warning.
        items: dict[str, dict] = {
            "zones/us-east1-b": {
                "warning": {
                    "code": "NO_RESULTS_ON_PAGE",
                    "message": "There are no results for scope 'zones/us-east1-b' on this page.",
                    "data": [{"key": "scope", "value": "zones/us-east1-b"}],
                }
            }
        }
        for zone, _name, inst in page:
            items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(_public(inst))
        out = {"kind": "compute#instanceAggregatedList", "id": f"projects/{project}/aggregated/instances", "items": items}
        if start + size < len(matching):
            out["nextPageToken"] = str(start + size)
        return out


def _align(points: list[dict], end, period_s: int, aligner: str) -> list[dict]:
    """Cloud Monitoring's per-series alignment: periods of `period_s` ending at the interval's end
    time, one point per period that has data, stamped with the period's end (newest first, as
    the API returns them)."""
    from datetime import datetime, timedelta

    buckets: dict[int, list[float]] = {}
    for p in points:
        at = datetime.fromisoformat(p["interval"]["endTime"].replace("Z", "+00:00"))
        k = int((end - at).total_seconds() // period_s)  # 0 = the newest period (end - P, end]
        buckets.setdefault(k, []).append(float(p["value"].get("doubleValue", p["value"].get("int64Value", 0))))
    fold = {"ALIGN_MEAN": lambda vs: sum(vs) / len(vs), "ALIGN_MAX": max, "ALIGN_MIN": min}[aligner]
    out = []
    for k in sorted(buckets):
        stamp = (end - timedelta(seconds=k * period_s)).isoformat().replace("+00:00", "Z")
        out.append({"interval": {"startTime": stamp, "endTime": stamp}, "value": {"doubleValue": fold(buckets[k])}})
    return out


def _public(d: dict) -> dict:
    return {k: v for k, v in d.items() if not k.startswith("_")}


def _error(code: int, message: str, reason: str) -> tuple[int, dict]:
    return code, {"error": {"code": code, "message": message, "errors": [{"message": message, "domain": "global", "reason": reason}]}}


# ---- a small parser for the Compute list filter syntax -------------------------------------------
class _FilterError(ValueError):
    pass


_TOKEN = re.compile(r'\s*(\(|\)|AND\b|OR\b|[A-Za-z_][\w.-]*\s*(?:=|!=)\s*(?:"[^"]*"|[^\s()]+))')
_CMP = re.compile(r'([A-Za-z_][\w.-]*)\s*(=|!=)\s*(?:"([^"]*)"|([^\s()]+))')


def _parse_filter(text: str):
    """`(a = "x") (b = y)`, `a = x AND (b = y OR c = z)`: adjacency means AND, OR binds tighter."""
    tokens, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise _FilterError(f"cannot parse {text[pos:]!r}")
        tokens.append(m.group(1).strip())
        pos = m.end()
    if not tokens:
        return lambda obj: True
    it = iter(tokens + [None])
    cur = [next(it)]

    def take():
        tok = cur[0]
        cur[0] = next(it)
        return tok

    def expr():
        terms = [or_term()]
        while cur[0] not in (None, ")"):
            if cur[0] == "AND":
                take()
            terms.append(or_term())
        return lambda o: all(t(o) for t in terms)

    def or_term():
        facs = [factor()]
        while cur[0] == "OR":
            take()
            facs.append(factor())
        return lambda o: any(f(o) for f in facs)

    def factor():
        tok = take()
        if tok == "(":
            e = expr()
            if take() != ")":
                raise _FilterError("unbalanced parentheses")
            return e
        m = _CMP.fullmatch(tok or "")
        if not m:
            raise _FilterError(f"expected a comparison, got {tok!r}")
        fieldname, op, quoted, bare = m.groups()
        want = quoted if quoted is not None else bare

        def cmp(o):
            val = o
            for part in fieldname.split("."):
                val = val.get(part) if isinstance(val, dict) else None
            got = "" if val is None else str(val).lower() if isinstance(val, bool) else str(val)
            return (got == want) if op == "=" else (got != want)

        return cmp

    pred = expr()
    if cur[0] is not None:
        raise _FilterError(f"unexpected {cur[0]!r}")
    return pred


def _make_handler(server: GceServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, payload = server.handle(self.command, self.path, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, *args) -> None:  # keep test output clean
            pass

    return Handler
