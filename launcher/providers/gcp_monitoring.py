"""GCP idle signals from Cloud Monitoring (REST `projects.timeSeries.list`), one paged query per
metric and aligner for the whole project: Cloud Monitoring aligns each series itself (60 s
periods, `ALIGN_MEAN` for the level, `ALIGN_MAX` for the peak); an aligned point is stamped with
the end of its period.

CPU: `compute.googleapis.com/instance/cpu/utilization` (hypervisor, a fraction 0..1 -> percent).
GPU: `agent.googleapis.com/gpu/utilization` (Ops Agent, percent, one series per GPU); None where
the agent is not installed. Series are matched to instances by the numeric instance id.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

CPU_METRIC = "compute.googleapis.com/instance/cpu/utilization"
GPU_METRIC = "agent.googleapis.com/gpu/utilization"
DEFAULT_ENDPOINT = "https://monitoring.googleapis.com"
READ_SCOPE = "https://www.googleapis.com/auth/monitoring.read"

GetJson = Callable[[str, dict], dict]


def _rfc3339(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")


def aligned_series(
    get_json: GetJson,
    endpoint: str,
    project: str,
    metric: str,
    start: datetime,
    end: datetime,
    period_s: int,
    aligner: str,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], dict[datetime, float]]:
    """(instance id, metric labels) -> {aligned point's end time: value} for every series,
    aligned by Cloud Monitoring itself (`ALIGN_MEAN` for the level, `ALIGN_MAX` for the peak)."""
    url = f"{endpoint.rstrip('/')}/v3/projects/{project}/timeSeries"
    params = {
        "filter": f'metric.type = "{metric}" AND resource.type = "gce_instance"',
        "interval.startTime": _rfc3339(start),
        "interval.endTime": _rfc3339(end),
        "aggregation.alignmentPeriod": f"{period_s}s",
        "aggregation.perSeriesAligner": aligner,
        "pageSize": "1000",
    }
    out: dict[tuple[str, tuple[tuple[str, str], ...]], dict[datetime, float]] = {}
    while True:
        page = get_json(url, params)
        for ts in page.get("timeSeries", []):
            iid = ts.get("resource", {}).get("labels", {}).get("instance_id")
            if not iid:
                continue
            key = (iid, tuple(sorted(ts.get("metric", {}).get("labels", {}).items())))
            got = out.setdefault(key, {})
            for p in ts.get("points", []):
                v = _value(p.get("value", {}))
                at = p.get("interval", {}).get("endTime")
                if v is not None and at:
                    got[_parse_time(at)] = v
        token = page.get("nextPageToken")
        if not token:
            return out
        params = {**params, "pageToken": token}


def _parse_time(text: str) -> datetime:
    # RFC 3339 with up to nanoseconds: Python takes microseconds at most.
    head, _, frac = text.rstrip("Z").partition(".")
    frac = (frac[:6] if frac else "0").ljust(6, "0")
    return datetime.fromisoformat(f"{head}.{frac}+00:00")


def _value(v: dict) -> float | None:
    for key in ("doubleValue", "int64Value"):
        if key in v:
            return float(v[key])
    return None
