"""Metrics posted the way the clouds deliver them, for the reaper's tests.

CloudWatch: EC2 basic monitoring is one statistic set per 5 minutes (SampleCount, Sum, Minimum,
Maximum), stamped with the period's start on the 5-minute grid; detailed monitoring one per
minute; the CloudWatch agent's nvidia_smi plugin a plain value per GPU at its own interval,
stamped when collected (off the grid). Newest periods arrive late (`delay_min`); `gap` drops the
points inside it; `spike` raises one period's Maximum (its Average stays low).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

HISTORY_MIN = 120  # more than the window plus the late allowance


def floor(ts: datetime, step_s: int) -> datetime:
    epoch = int(ts.timestamp())
    return datetime.fromtimestamp(epoch - epoch % step_s, tz=UTC)


def starts(now: datetime, period_s: int, *, delay_min: float = 0, gap: tuple[int, int] | None = None,
           offset_s: int = 0, history_min: int = HISTORY_MIN) -> list[datetime]:
    """Period starts whose period ended (plus the delivery delay) before `now`; `gap` = minutes
    ago (from, to) with nothing delivered."""
    out = []
    t = floor(now, period_s) + timedelta(seconds=offset_s)
    while t > now - timedelta(minutes=history_min):
        done = t + timedelta(seconds=period_s) + timedelta(minutes=delay_min) <= now
        in_gap = gap is not None and now - timedelta(minutes=gap[0]) <= t < now - timedelta(minutes=gap[1])
        if done and not in_gap:
            out.append(t)
        t -= timedelta(seconds=period_s)
    return sorted(out)


def put_ec2_cpu(cw, iid: str, now: datetime, pct: float, *, basic: bool = True, spike: tuple[int, float] | None = None, **kw) -> list[datetime]:
    """CPUUtilization as EC2 publishes it; `spike` = (minutes ago, Maximum) inside one period."""
    period = 300 if basic else 60
    ts = starts(now, period, **kw)
    data = []
    for t in ts:
        peak = pct
        if spike is not None and t <= now - timedelta(minutes=spike[0]) < t + timedelta(seconds=period):
            peak = spike[1]
        stat = {"SampleCount": 5.0 if basic else 1.0, "Sum": pct * (5 if basic else 1), "Minimum": pct, "Maximum": peak}
        if not basic and peak == pct:
            data.append({"MetricName": "CPUUtilization", "Dimensions": [{"Name": "InstanceId", "Value": iid}],
                         "Timestamp": t, "Value": pct, "Unit": "Percent"})
        else:
            data.append({"MetricName": "CPUUtilization", "Dimensions": [{"Name": "InstanceId", "Value": iid}],
                         "Timestamp": t, "StatisticValues": stat, "Unit": "Percent"})
    for i in range(0, len(data), 500):
        cw.put_metric_data(Namespace="AWS/EC2", MetricData=data[i : i + 500])
    return ts


def put_agent_gpu(cw, iid: str, now: datetime, pct: float, *, interval_s: int = 60, gpus: int = 2, **kw) -> list[datetime]:
    """nvidia_smi_utilization_gpu from the CloudWatch agent: one series per GPU, stamped 17 s
    past the grid (when the agent collected it); GPU 0 at `pct`, the others idle."""
    ts = starts(now, interval_s, offset_s=17, **kw)
    data = [
        {"MetricName": "nvidia_smi_utilization_gpu",
         "Dimensions": [{"Name": "InstanceId", "Value": iid}, {"Name": "index", "Value": str(g)}, {"Name": "name", "Value": "NVIDIA A10G"}],
         "Timestamp": t, "Value": pct if g == 0 else 0.0}
        for g in range(gpus) for t in ts
    ]
    for i in range(0, len(data), 500):
        cw.put_metric_data(Namespace="CWAgent", MetricData=data[i : i + 500])
    return ts
