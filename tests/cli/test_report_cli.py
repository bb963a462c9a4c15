"""`launcher report`, `launcher report reconcile` and `launcher budget status` as a user runs
them: the real entry point in a subprocess for the main paths, in-process (`main.run`) for the
many bad-input cases."""

from __future__ import annotations

import io
import json
import shutil

import pandas as pd
import pytest

from tests.cli_child import run
from tests.conftest import run_cli
from tests.report.conftest import build_hand_ledger

AS_OF = "2026-11-03T06:00:00Z"


@pytest.fixture(scope="module")
def ledger_template(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli-ledger") / "ledger.db"
    led, _ = build_hand_ledger(f"sqlite:///{path}")
    led.close()
    return path


@pytest.fixture
def home_with_ledger(launcher_home, ledger_template):
    shutil.copy(ledger_template, launcher_home / "ledger.db")
    return launcher_home


def test_grouped_csv_end_to_end(home_with_ledger):
    p = run_cli("report", "--by", "experiment", "--format", "csv", "--until", "2026-11-03", "--as-of", AS_OF)
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(io.StringIO(p.stdout)).set_index("x_ExperimentId")
    assert df.loc["exp-a", "x_ComputeCost"] == pytest.approx(10.0)
    assert df.loc["exp-a", "x_SpotSavings"] == pytest.approx(17.0)
    assert df.loc["exp-b", "BilledCost"] == pytest.approx(8.0)
    assert df.loc["exp-c", "BilledCost"] == pytest.approx(2.0)


def test_files_by_suffix_and_table(home_with_ledger, capsys):
    import pyarrow.parquet as pq

    out = home_with_ledger / "nov.parquet"
    assert run(["report", "--by", "project,day", "--month", "2026-11", "--as-of", AS_OF, "-o", str(out)]) == 0
    rows = pq.read_table(out).to_pylist()
    assert {(r["x_ProjectId"], str(r["ChargePeriodStart"].date())) for r in rows} == {
        ("nlp", "2026-11-02"), ("nlp", "2026-11-03"), ("vision", "2026-11-03"),
    }  # fmt: skip
    html = home_with_ledger / "nov.html"
    assert run(["report", "--month", "2026-11", "--as-of", AS_OF, "-o", str(html)]) == 0
    assert html.read_text().count('class="chart"') == 4
    capsys.readouterr()
    assert run(["report", "--by", "owner", "--as-of", AS_OF]) == 0
    table = capsys.readouterr().out
    assert "alice" in table and "TOTAL" in table and "20.00" in table  # 12.00 + 8.00
    assert run(["report", "--by", "cloud", "--json", "--as-of", AS_OF]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["ProviderName"] for r in doc["rows"]} == {"AWS", "Google Cloud"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--by", "expermient"], "did you mean 'experiment'"),
        (["--by", "day,month"], "at most one of day, month"),
        (["--since", "2026-11-31"], "malformed date for --since"),
        (["--until", "yesterday"], "malformed date for --until"),
        (["--month", "2026-13"], "malformed month"),
        (["--month", "2026-11", "--since", "2026-11-01"], "cannot be combined"),
        (["--since", "2026-11-05", "--until", "2026-11-01"], "empty date range"),
        (["--since", "2026-11-05T00:00:00Z", "--until", "2026-11-05T00:00:00Z"], "empty date range"),
        (["--format", "xlsx"], "unknown format 'xlsx'"),
        (["--format", "parquet"], "needs --output"),
        (["reconcile", "--month", "2026-11", "--gcp-export", "/nonexistent/bill.jsonl"], "does not exist"),
        (["reconcile", "--month", "2026-11"], "nothing to reconcile against"),
        (["reconcile", "--month", "11/2026", "--aws"], "malformed month"),
    ],
)
def test_bad_input_exits_2_before_touching_the_ledger(launcher_home, capsys, args, message):
    assert run(["report", *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("error:") == 1
    assert not (launcher_home / "ledger.db").exists()


def test_reconcile_cli_against_moto_and_gcp_file(home_with_ledger, aws_env, tmp_path, capsys):
    from tests.report.test_reconcile import GCP_ROWS, _group, _period, seed_cost_explorer

    seed_cost_explorer(aws_env, [{"ResultsByTime": [_period([_group("experiment$exp-a", "10.00")])]}])
    bill = tmp_path / "bill.jsonl"
    bill.write_text("".join(json.dumps(r) + "\n" for r in GCP_ROWS))
    code = run(["report", "reconcile", "--month", "2026-11", "--aws", "--gcp-export", str(bill), "--json", "--as-of", AS_OF])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["provider"], r["experiment"]): r for r in doc["rows"]}
    assert rows[("aws", "exp-a")]["status"] == "ok"
    assert rows[("aws", "exp-c")]["status"] == "not in bill"
    assert rows[("gcp", "exp-b")]["diff_usd"] == pytest.approx(0.0)


def test_budget_status_cli(home_with_ledger, capsys):
    (home_with_ledger / "budgets.yaml").write_text(
        "budgets:\n  - project: nlp\n    monthly_limit_usd: 10\n  - project: vision\n    owner: alice\n    monthly_limit_usd: 100\n"
    )
    assert run(["budget", "status", "--json", "--as-of", AS_OF]) == 0
    st = {s["budget"]: s for s in json.loads(capsys.readouterr().out)}
    assert st["nlp"]["spent_usd"] == pytest.approx(8.0)
    assert st["nlp"]["state"] == "warning"  # 80% used
    assert st["vision/alice"]["spent_usd"] == pytest.approx(12.0)  # to teardown, as `launcher report` counts it
    (home_with_ledger / "budgets.yaml").write_text("budgets:\n  - project: nlp\n    montly_limit_usd: 10\n")
    assert run(["budget", "status"]) == 2
    assert "did you mean 'monthly_limit_usd'" in capsys.readouterr().err
