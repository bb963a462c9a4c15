"""Cost reports from the ledger (FOCUS columns), HTML charts, and reconciliation with cloud bills.

    from launcher.report import build_report, ReportQuery
    result = build_report(ledger, ReportQuery(by=("experiment",), since=..., until=...))
    result.frame        # pandas DataFrame, FOCUS + x_ columns, one row per group

How costs are counted is documented in `launcher/ledger/attempt_cost.py` (the one definition of what an attempt cost, shared with budgets and `runs`/`status`). This package imports pandas:
command modules import it inside their functions.
"""

from launcher.report.build import ReportQuery, ReportResult, build_report
from launcher.report.periods import Window, parse_window

__all__ = ["ReportQuery", "ReportResult", "Window", "build_report", "parse_window"]
