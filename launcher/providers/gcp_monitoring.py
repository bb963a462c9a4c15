"""GCP idle signals from Cloud Monitoring (REST `projects.timeSeries.list`), one paged query per
metric for the whole project, averaged per instance over the window.

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


def series_means(
    get_json: GetJson,
    endpoint: str,
    project: str,
    metric: str,
    start: datetime,
    end: datetime,
    period_s: int,
) -> dict[str, list[tuple[float, int]]]:
    """instance id -> [(mean of the series' points, number of points)] for every series."""
    url = f"{endpoint.rstrip('/')}/v3/projects/{project}/timeSeries"
    params = {
        "filter": f'metric.type = "{metric}" AND resource.type = "gce_instance"',
        "interval.startTime": _rfc3339(start),
        "interval.endTime": _rfc3339(end),
        "aggregation.alignmentPeriod": f"{period_s}s",
        "aggregation.perSeriesAligner": "ALIGN_MEAN",
        "pageSize": "1000",
    }
    out: dict[str, list[tuple[float, int]]] = {}
    while True:
        page = get_json(url, params)
        for ts in page.get("timeSeries", []):
            iid = ts.get("resource", {}).get("labels", {}).get("instance_id")
            values = [_value(p["value"]) for p in ts.get("points", [])]
            values = [v for v in values if v is not None]
            if iid and values:
                out.setdefault(iid, []).append((sum(values) / len(values), len(values)))
        token = page.get("nextPageToken")
        if not token:
            return out
        params = {**params, "pageToken": token}


def _value(v: dict) -> float | None:
    for key in ("doubleValue", "int64Value"):
        if key in v:
            return float(v[key])
    return None
