"""The HTML report: one self-contained file (inline CSS and SVG, a few lines of inline script
that only measures the drawn bars), no external resources."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

import pandas as pd

from launcher.report import svg
from launcher.report.build import HTML_KEYS, ReportQuery, ReportResult, report_from_data
from launcher.report.display import display_frame

MAX_SERIES = 8
MAX_BARS = 20
MAX_TABLE_ROWS = 1000

# Marks each chart with how many bars the browser laid out with a non-zero size.
_MEASURE_JS = """
(function () {
  var out = {};
  document.querySelectorAll('svg.chart').forEach(function (svgEl) {
    var n = 0;
    svgEl.querySelectorAll('rect.bar').forEach(function (r) {
      var b = r.getBBox();
      if (b.width > 0 && b.height > 0) { n += 1; }
    });
    out[svgEl.getAttribute('data-chart')] = n;
  });
  document.body.setAttribute('data-rendered-bars', JSON.stringify(out));
})();
"""

_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; margin-bottom: 4px; }
.meta { color: #666; font-size: 12px; margin-bottom: 16px; }
.totals { display: flex; gap: 24px; flex-wrap: wrap; margin: 12px 0 20px; }
.totals div { background: #f5f7fa; padding: 8px 12px; border-radius: 6px; }
.totals b { display: block; font-size: 18px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(760px, 1fr)); gap: 16px; }
table { border-collapse: collapse; font-size: 12px; margin-top: 16px; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 4px 8px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
details { font-size: 12px; color: #444; margin-top: 16px; max-width: 900px; }
"""


def _top(frame: pd.DataFrame, key: str, value: str, n: int) -> list[str]:
    order = frame.groupby(key)[value].sum().sort_values(ascending=False)
    return [str(k) for k in order.index[:n]]


def cost_over_time(result: ReportResult) -> str:
    assert result.data is not None
    w = result.window
    span_days = (w.until - w.since).total_seconds() / 86400 if w.since and w.until else 0
    bucket = "day" if span_days <= 62 else "month"
    q = ReportQuery(by=("project", bucket), window=w, assumptions=result.query.assumptions)
    f = report_from_data(result.data, q).frame
    title = f"Cost over time per project (per {bucket})"
    if f.empty or f["BilledCost"].sum() <= 0:
        return svg.empty_chart("cost-over-time", title)
    top = _top(f, "x_ProjectId", "BilledCost", MAX_SERIES)
    f = f.assign(series=f["x_ProjectId"].where(f["x_ProjectId"].isin(top), "other"))
    fmt = "%Y-%m-%d" if bucket == "day" else "%Y-%m"
    f["period"] = f["ChargePeriodStart"].dt.strftime(fmt)
    pivot = f.pivot_table(index="period", columns="series", values="BilledCost", aggfunc="sum", fill_value=0.0)
    order = [c for c in [*top, "other"] if c in pivot.columns]
    return svg.stacked_columns(
        "cost-over-time", title, list(pivot.index), {c: pivot[c].tolist() for c in order}
    )


def _by(result: ReportResult, key: str) -> pd.DataFrame:
    assert result.data is not None
    q = ReportQuery(by=(key,), window=result.window, assumptions=result.query.assumptions)
    return report_from_data(result.data, q).frame


def cost_per_experiment(result: ReportResult) -> str:
    f = _by(result, "experiment").head(MAX_BARS)
    title = "Cost per experiment"
    if f.empty or f["BilledCost"].sum() <= 0:
        return svg.empty_chart("cost-per-experiment", title)
    return svg.horizontal_bars(
        "cost-per-experiment",
        title,
        f["x_ExperimentId"].tolist(),
        {"compute": f["x_ComputeCost"].tolist(), "checkpoint storage": f["x_CheckpointStorageCost"].tolist()},
    )


def spot_savings(result: ReportResult) -> str:
    f = _by(result, "project").head(MAX_BARS)
    title = "Spot savings per project (billed vs on-demand list)"
    if f.empty or f["ListCost"].sum() <= 0:
        return svg.empty_chart("spot-savings", title)
    billed = f["x_ComputeCost"]
    return svg.horizontal_bars(
        "spot-savings",
        title,
        f["x_ProjectId"].tolist(),
        {"billed": billed.tolist(), "saved vs on-demand": f["x_SpotSavings"].tolist()},
    )


def waste(result: ReportResult) -> str:
    f = _by(result, "project")
    f = f.sort_values("x_WastedCost", ascending=False).head(MAX_BARS)
    title = "Waste per project (idle before teardown, preemption loss, restart overhead)"
    if f.empty or f["x_WastedCost"].sum() <= 0:
        return svg.empty_chart("waste", title, "no waste recorded in this period")
    return svg.horizontal_bars(
        "waste",
        title,
        f["x_ProjectId"].tolist(),
        {
            "idle before teardown": f["x_IdleCost"].tolist(),
            "preemption loss": f["x_PreemptionLossCost"].tolist(),
            "restart overhead": f["x_RestartOverheadCost"].tolist(),
        },
    )


def _table(frame: pd.DataFrame) -> str:
    shown = display_frame(frame).head(MAX_TABLE_ROWS)
    head = "".join(f"<th>{escape(str(c))}</th>" for c in shown.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in r) + "</tr>" for r in shown.itertuples(index=False)
    )
    more = f"<p class='meta'>first {MAX_TABLE_ROWS} of {len(frame)} rows</p>" if len(frame) > MAX_TABLE_ROWS else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def render_html(result: ReportResult, *, generated_at: datetime | None = None) -> str:
    if result.data is None or any(k not in result.data.attempts for k in HTML_KEYS):
        raise ValueError("render_html needs a ReportResult built with extra_keys=HTML_KEYS")
    t = result.totals()
    gen = (generated_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    by = ", ".join(result.query.by)
    cards = [
        ("Billed", t.get("BilledCost", 0.0)),
        ("On-demand list", t.get("ListCost", 0.0)),
        ("Spot savings", t.get("x_SpotSavings", 0.0)),
        ("Waste", t.get("x_WastedCost", 0.0)),
        ("Checkpoint storage (est.)", t.get("x_CheckpointStorageCost", 0.0)),
    ]
    totals = "".join(f"<div>{escape(k)}<b>{escape(svg.money(v))}</b></div>" for k, v in cards)
    gpu_h = t.get("x_GpuHours", 0.0)
    charts = [cost_over_time(result), cost_per_experiment(result), spot_savings(result), waste(result)]
    window = f"{result.window.since:%Y-%m-%d %H:%M} to {result.window.until:%Y-%m-%d %H:%M} UTC"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>GPU cost report by {escape(by)}</title>
<style>{_CSS}</style></head>
<body>
<h1>GPU cost report by {escape(by)}</h1>
<div class="meta">{escape(window)} &middot; generated {escape(gen)} &middot; USD &middot; {gpu_h:,.1f} GPU-hours &middot; {int(t.get("x_Preemptions", 0))} preemptions</div>
<div class="totals">{totals}</div>
<div class="charts">
{"".join(f'<div class="chart-box">{c}</div>' for c in charts)}
</div>
<h2 style="font-size:16px">By {escape(by)}</h2>
{_table(result.frame)}
<details><summary>How costs are counted</summary>
<p>Billed cost = billed time x hourly price x nodes (spot price changes applied where the ledger recorded them),
from the attempt's start until its machines were torn down. Spot savings = the same hours at the on-demand
list price minus the billed cost. Waste = restart overhead after a preemption (until the job ran again),
work lost since the last checkpoint when preempted, and idle time between the job's end and teardown.
Checkpoint storage is an estimate: checkpoint sizes x time kept (latest {result.query.assumptions.checkpoint_keep_last}
per run) x a per-GB-month price. Columns follow FinOps FOCUS; ours are prefixed x_.</p></details>
<script>{_MEASURE_JS}</script>
</body></html>
"""

