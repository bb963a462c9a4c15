"""No non-zero amount reads as zero: budget status, report tables and HTML chart axes."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from launcher.cli.main import run

from .conftest import NOW, Clock


@pytest.mark.parametrize(
    "value, text",
    [(0.003, "< $0.01"), (-0.003, "> -$0.01"), (0.0, "$0.00"), (0.005, "$0.01"), (12.345, "$12.35"),
     (-2.5, "-$2.50"), (1234.5, "$1,234.50"), (None, "")],
)  # fmt: skip
def test_usd(value, text):
    from launcher.money import usd

    assert usd(value, sign="$") == text


@pytest.mark.parametrize("top", [0.004, 0.01, 0.03, 1.0, 7.0, 2500.0])
def test_axis_tick_labels_all_differ(top):
    from launcher.report.svg import nice_max, tick_labels

    ymax = nice_max(top)
    labels = tick_labels([ymax * t / 4 for t in range(5)])
    assert len(set(labels)) == 5, labels
    assert float(labels[0][1:]) == 0 and all(lab.startswith("$") for lab in labels)
    assert [float(lab[1:].replace(",", "")) for lab in labels] == pytest.approx([ymax * t / 4 for t in range(5)])


def test_html_chart_axis_for_a_tiny_report(launcher_home):
    """A report of $0.004 in total: every axis label differs, no bar value shows as $0.00."""
    from launcher.ledger import Ledger, NewAttempt, RunRecord

    with Ledger(f"sqlite:///{launcher_home / 'ledger.db'}", now=Clock(NOW)) as led:
        led.create_run(RunRecord(run_id="r-tiny", name="t", spec_hash="0" * 64, spec_yaml="run: x", project="p",
                                 experiment="e", created_at=NOW))  # fmt: skip
        a = led.add_attempt("r-tiny", NewAttempt(cloud="aws", region="us-east-1", instance_type="t", price_usd_per_hour=0.36), started_at=NOW)
        led.end_attempt(a.attempt_id, "completed", ended_at=NOW + timedelta(seconds=40))  # $0.004
    out = launcher_home / "r.html"
    assert run(["report", "-o", str(out), "--as-of", "2026-11-03T07:00:00Z"]) == 0
    html = out.read_text()
    for chart in re.findall(r"<svg class=\"chart\".*?</svg>", html, flags=re.S):
        ticks = re.findall(r'<text class="tick"[^>]*>([^<]+)</text>', chart)
        assert len(ticks) == 5 and len(set(ticks)) == 5, ticks
    assert "<td>< 0.01</td>" not in html or "<td>&lt; 0.01</td>" in html
    assert "&lt; 0.01" in html  # the table's BilledCost cell
    assert "<b>&lt; $0.01</b>" in html  # the Billed card


def test_budget_status_shows_sub_cent_spend(launcher_home, capsys):
    from launcher.ledger import Ledger, NewAttempt, RunRecord

    (launcher_home / "budgets.yaml").write_text("budgets:\n  - project: p\n    monthly_limit_usd: 10\n")
    with Ledger(f"sqlite:///{launcher_home / 'ledger.db'}", now=Clock(NOW)) as led:
        led.create_run(RunRecord(run_id="r-tiny", name="t", spec_hash="0" * 64, spec_yaml="run: x", project="p",
                                 created_at=NOW))  # fmt: skip
        a = led.add_attempt("r-tiny", NewAttempt(cloud="aws", region="us-east-1", instance_type="t", price_usd_per_hour=0.36), started_at=NOW)
        led.end_attempt(a.attempt_id, "completed", ended_at=NOW + timedelta(seconds=30))  # $0.003
    assert run(["budget", "status", "--as-of", "2026-11-03T07:00:00Z"]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if "2026-11" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[2] == "< 0.01"  # spent
    assert cells[5] == "< 1%"  # used
