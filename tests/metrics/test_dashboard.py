"""The Grafana dashboard queries only metrics we export (and the exporter exports them all)."""

from __future__ import annotations

import json
import re

from launcher.metrics.exporter import EXPORTED
from tests.conftest import REPO

DASHBOARD = REPO / "dashboards" / "grafana-launcher.json"
PROMQL_WORDS = {
    "sum", "min", "max", "avg", "count", "by", "without", "rate", "increase", "irate", "delta",
    "histogram_quantile", "topk", "bottomk", "on", "ignoring", "group_left", "group_right", "and", "or",
    "unless", "offset", "clamp_min", "clamp_max", "abs", "time", "vector", "scalar", "le",
}  # fmt: skip
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set[str]:
    """Identifiers in a PromQL expression that are metric names: label matchers, grouping
    labels, durations, strings and numbers removed; PromQL's own words removed."""
    s = re.sub(r'"[^"]*"', "", expr)
    s = re.sub(r"\{[^}]*\}", "", s)
    s = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", s)
    s = re.sub(r"\[[^\]]*\]", "", s)
    words = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", s))
    return words - PROMQL_WORDS


def exported_series() -> set[str]:
    names = set()
    for name, kind in EXPORTED.items():
        names.add(name)
        if kind == "histogram":
            names.update(name + suf for suf in HISTOGRAM_SUFFIXES)
    return names


def test_every_dashboard_query_names_only_exported_metrics() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    known = exported_series()
    for e in exprs:
        names = metric_names(e)
        assert names, e
        assert names <= known, (e, names - known)
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("burn rate", "budget", "preemptions by zone", "gpu hours", "reaper savings"):
        assert topic in titles


def test_the_checker_catches_an_unknown_metric() -> None:
    assert metric_names('sum by (project) (rate(launcher_spend_dollars_totl{project="a"}[1h]))') == {"launcher_spend_dollars_totl"}
    assert not metric_names("sum by (project) (launcher_runs)") - exported_series()
