"""The reaper on the embedded local backend: a job younger than the idle window is kept; a
stalled (idle) detached job, once older than the window, is marked, then stopped through
`launcher down` after the grace period; a busy one is untouched."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from launcher.cli.reap_cmd import down_local_cluster
from launcher.ledger import Ledger
from launcher.providers.local import LocalProvider
from launcher.reaper.decide import MARK_TAG
from launcher.reaper.policy import IdleRule, ProjectPolicy, ReapPolicy
from launcher.reaper.runner import run_pass
from tests.conftest import run_cli

SPEC = """name: {name}
resources: {{cpus: 1+}}
run: |
  {run}
launcher: {{project: reap-local, owner: ana, experiment: e, expected_hours: 0.01, budget_usd: 1}}
"""


def _launch(tmp_path, name: str, run: str) -> str:
    p = tmp_path / f"{name}.yaml"
    p.write_text(SPEC.format(name=name, run=run))
    res = run_cli("launch", str(p), "--detach", "--yes", "--cheapest", timeout=120)
    assert res.returncode == 0, res.stderr
    with Ledger() as led:
        runs = [r for r in led.list_runs() if r.name == name]
    assert len(runs) == 1
    return runs[0].run_id


def _wait_running(run_id: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    with Ledger() as led:
        while time.monotonic() < deadline:
            if led.get_run(run_id).state == "running" and LocalProvider().list_instances({"run-id": run_id}):
                return
            time.sleep(0.3)
    pytest.fail(f"{run_id} never started")


@pytest.mark.slow
def test_stalled_local_job_is_marked_then_stopped_busy_one_kept(tmp_path):
    idle = _launch(tmp_path, "stalled", "sleep 300")
    busy = _launch(tmp_path, "spinning", "end=$((SECONDS + 300)); while [ $SECONDS -lt $end ]; do :; done")
    try:
        _wait_running(idle)
        _wait_running(busy)
        policy = ReapPolicy(providers=["local"], defaults=ProjectPolicy(grace_minutes=60, idle=IdleRule(cpu_util_below_pct=5)))
        now = datetime.now(UTC)
        with Ledger() as led:
            fresh = run_pass(policy, {"local": LocalProvider()}, led, now=now, sleep=lambda s: None).outcomes
            assert {o.decision for o in fresh} == {"keep"}, [o.reasons for o in fresh]
            assert not led.get_cluster(fresh[0].cluster).tags.get(MARK_TAG)
            # An hour later (jobs aged as `now` is): the idle one has idle evidence over the window.
            older = LocalProvider(stop_cluster=down_local_cluster)  # ending a local run is `launcher down`
            older.reaper_extra_age_s = 3660.0
            now += timedelta(minutes=61)
            p1 = {o.instance_id: o for o in run_pass(policy, {"local": older}, led, now=now, sleep=lambda s: None).outcomes}
            by_run = {led.get_cluster(o.cluster).run_id: o for o in p1.values()}
            assert by_run[idle].decision == "mark", by_run[idle].reasons
            assert by_run[busy].decision == "keep", by_run[busy].reasons
            assert led.get_cluster(by_run[idle].cluster).tags.get(MARK_TAG)

            older.reaper_extra_age_s += 3660.0
            p2 = run_pass(policy, {"local": older}, led, now=now + timedelta(minutes=61), sleep=lambda s: None).outcomes
            acted = [o for o in p2 if o.decision == "act"]
            assert [led.get_cluster(o.cluster).run_id for o in acted] == [idle]
            assert acted[0].ok, acted[0].error
            assert led.get_run(idle).state == "cancelled"
            assert led.get_run(busy).state == "running"
            assert led.get_cluster(acted[0].cluster).state == "terminated"
    finally:
        for r in (idle, busy):
            run_cli("down", r, "--wait", "20", timeout=60)
