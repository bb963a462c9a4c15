"""A real Prometheus (Debian's `prometheus`) scrapes a real `launcher server`'s /metrics with a
bearer token; after a priced run with preemptions, PromQL through Prometheus's HTTP API returns
the spend and preemption count the ledger holds. Also `launcher metrics serve` (no token)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from datetime import timedelta

import httpx
import pytest

from tests.conftest import REPO, free_port, wait_for_port
from tests.server.helpers import cli_env, make_token, run_cli_env, start_server

pytestmark = pytest.mark.slow
PRICE = 0.6


@pytest.fixture
def prometheus_bin() -> str:
    path = shutil.which("prometheus")
    if path is None:
        pytest.skip("Debian's prometheus is not installed (.ci/run installs it)")
    return path


def start_prometheus(tmp, binary: str, target: str, token: str | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    auth = f"\n    authorization: {{credentials: '{token}'}}" if token else ""
    cfg = tmp / "prometheus.yml"
    cfg.write_text(textwrap.dedent(f"""
        global: {{scrape_interval: 1s, evaluation_interval: 1s}}
        scrape_configs:
          - job_name: launcher
            static_configs: [{{targets: ['{target}']}}]""") + auth + "\n")
    log = open(tmp / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [binary, f"--config.file={cfg}", f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    wait_for_port(port, proc, timeout_s=60)
    return proc, f"http://127.0.0.1:{port}"


def promql(url: str, query: str, *, timeout_s: float = 90.0) -> list[dict]:
    """Poll until the query has a result (Prometheus scrapes every second)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=10)
        r.raise_for_status()
        result = r.json()["data"]["result"]
        if result:
            return result
        time.sleep(0.5)
    raise TimeoutError(f"Prometheus had no result for {query!r} within {timeout_s}s")


def test_promql_through_prometheus_equals_the_ledger(tmp_path, launcher_home, prometheus_bin) -> None:
    env = cli_env(LAUNCHER_HOME=str(launcher_home))
    env.pop("LAUNCHER_DB_URL", None)
    token = make_token("ops", "*", "viewer", env)
    # a project admin: the server runs admins' --cloud local jobs in its own user (members' need --local-jobs-user)
    member = make_token("ada", "ml", "admin", env)
    server = start_server(tmp_path, "--lease-seconds", "6", env=env)
    prom = None
    try:
        spec = tmp_path / "sleep.yaml"
        spec.write_text("name: sleeper\nrun: sleep 2\nlauncher: {project: ml, experiment: sleepy, expected_hours: 0.01}\n")
        client_env = {**env, "LAUNCHER_SERVER": server.url, "LAUNCHER_TOKEN": member}
        r = run_cli_env("launch", str(spec), "--submit", "--yes", "--cheapest", "--simulate-preemptions", "0.5,0.5",
                        "--simulate-price", str(PRICE), env=client_env)  # fmt: skip
        assert r.returncode == 0, r.stderr
        run_id = r.stdout.strip()
        r = run_cli_env("logs", run_id, "--follow", env=client_env, timeout=180)
        assert r.returncode == 0, r.stderr

        from launcher.ledger import Ledger

        with Ledger() as led:
            attempts = led.attempts(run_id)
            teardowns = led.events(run_id, kind="teardown")
            assert led.get_run(run_id).state == "succeeded"
        # The cost definition (report/costs.py): machines bill from the attempt's start until the
        # later of its billed end and its teardown event, at its price per node.
        ledger_spend = 0.0
        for a in attempts:
            end = max([a.started_at + timedelta(seconds=a.billed_seconds), *(e.at for e in teardowns if e.attempt_id == a.attempt_id)])
            ledger_spend += (end - a.started_at).total_seconds() / 3600 * a.price_usd_per_hour * a.num_nodes
        ledger_preemptions = sum(a.end_reason == "preempted" for a in attempts)
        assert ledger_preemptions == 2 and ledger_spend > 0

        prom, prom_url = start_prometheus(tmp_path, prometheus_bin, f"127.0.0.1:{server.port}", token)
        (spend,) = promql(prom_url, 'sum(launcher_spend_dollars_total{project="ml"})')
        assert float(spend["value"][1]) == pytest.approx(ledger_spend, rel=1e-6)
        (pre,) = promql(prom_url, 'sum(launcher_preemptions_total{cloud="local"})')
        assert float(pre["value"][1]) == ledger_preemptions
        (up,) = promql(prom_url, 'up{job="launcher"}')
        assert up["value"][1] == "1"  # scraped with the token (a 401 would make it 0)
        # the same figure as `launcher report`
        r = run_cli_env("report", "--by", "project", "--json", "--no-cache", env=env)
        import json

        assert json.loads(r.stdout)["totals"]["BilledCost"] == pytest.approx(ledger_spend, abs=1e-6)
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=20)
        server.stop()


def test_metrics_serve_for_a_single_user(tmp_path, launcher_home, prometheus_bin) -> None:
    from datetime import UTC, datetime, timedelta

    from launcher.ledger import Ledger, NewAttempt, RunRecord

    t0 = datetime.now(UTC) - timedelta(hours=2)
    with Ledger() as led:
        led.create_run(RunRecord(run_id="r-solo", name="solo", spec_hash="h", spec_yaml="run: x", project="p", experiment="e"))
        for hours, reason in ((1.0, "preempted"), (0.5, "completed")):
            a = led.add_attempt("r-solo", NewAttempt(cloud="aws", region="eu-west-1", instance_type="g4dn.xlarge",
                                                     price_usd_per_hour=0.4, spot=True), started_at=t0)  # fmt: skip
            led.end_attempt(a.attempt_id, reason, ended_at=t0 + timedelta(hours=hours))
            t0 += timedelta(hours=hours)
    port = free_port()
    env = cli_env(LAUNCHER_HOME=str(launcher_home))
    env.pop("LAUNCHER_DB_URL", None)
    serve = subprocess.Popen([sys.executable, "-m", "launcher.cli.main", "metrics", "serve", "--port", str(port)],
                             cwd=str(REPO), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    prom = None
    try:
        wait_for_port(port, serve, timeout_s=60)
        prom, prom_url = start_prometheus(tmp_path, prometheus_bin, f"127.0.0.1:{port}", None)
        (spend,) = promql(prom_url, "sum(launcher_spend_dollars_total)")
        assert float(spend["value"][1]) == pytest.approx(0.4 * 1.5)
        (pre,) = promql(prom_url, 'launcher_preemptions_total{region="eu-west-1"}')
        assert float(pre["value"][1]) == 1
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=20)
        serve.terminate()
        serve.wait(timeout=20)
