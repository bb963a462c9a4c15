"""A pass tells people what it marked and removed: one JSON message to a webhook (a real HTTP
server on 127.0.0.1) and/or a command; nothing on a dry run or a quiet pass; a failing channel is
reported without stopping the pass."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from launcher.ledger import Ledger
from launcher.providers.fake import FakeProvider
from launcher.reaper.decide import MARK_TAG
from launcher.reaper.policy import NotifyConfig, ProjectPolicy, ReapPolicy
from launcher.reaper.runner import run_pass
from tests.conftest import free_port

T0 = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
MANAGED = {"managed-by": "gpu-launcher", "project": "vision"}


@pytest.fixture
def webhook():
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            n = int(self.headers["Content-Length"])
            received.append(json.loads(self.rfile.read(n)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)  # the kernel picks: no race for the port
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()


def _world():
    fake = FakeProvider(clock=lambda: T0)
    idle = fake.add_instance("us-east-1", tags=MANAGED)
    old = fake.add_instance("us-east-1", tags={**MANAGED, MARK_TAG: "20261129t000000z"})
    busy = fake.add_instance("us-west-2", tags=MANAGED)
    for i in (idle, old):
        fake.set_utilization(i, gpu_pct=0.0, cpu_pct=0.5)
    fake.set_utilization(busy, gpu_pct=90.0, cpu_pct=50.0)
    return fake, idle, old


def test_webhook_and_command_get_one_message_per_pass(webhook, tmp_path):
    url, received = webhook
    out = tmp_path / "mail.json"
    policy = ReapPolicy(providers=["fake"], defaults=ProjectPolicy(grace_minutes=60), notify=NotifyConfig(webhook_url=url, command=f"cat > {out}"))
    fake, idle, old = _world()
    with Ledger() as led:
        rep = run_pass(policy, {"fake": fake}, led, now=T0, sleep=lambda s: None)
    assert rep.errors == []
    (msg,) = received
    assert [m["instance_id"] for m in msg["marked"]] == [idle]
    assert [a["instance_id"] for a in msg["acted"]] == [old]
    assert "1 marked idle" in msg["text"] and "1 removed" in msg["text"]
    assert json.loads(out.read_text()) == msg


def test_dry_run_and_quiet_passes_send_nothing(webhook):
    url, received = webhook
    policy = ReapPolicy(providers=["fake"], notify=NotifyConfig(webhook_url=url))
    fake, _, _ = _world()
    with Ledger() as led:
        run_pass(policy, {"fake": fake}, led, now=T0, dry_run=True, sleep=lambda s: None)
        assert received == []
        quiet = FakeProvider(clock=lambda: T0)
        busy = quiet.add_instance("us-east-1", tags=MANAGED)
        quiet.set_utilization(busy, gpu_pct=99.0, cpu_pct=99.0)
        run_pass(policy, {"fake": quiet}, led, now=T0 + timedelta(minutes=1), sleep=lambda s: None)
    assert received == []


def test_a_failing_channel_is_reported_and_the_pass_still_acts(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    policy = ReapPolicy(providers=["fake"], notify=NotifyConfig(webhook_url=dead, command="exit 3", timeout_s=2))
    fake, _, old = _world()
    with Ledger() as led:
        rep = run_pass(policy, {"fake": fake}, led, now=T0, sleep=lambda s: None)
    assert fake.instance_state("us-east-1", old) == "terminated"
    assert any("notify webhook" in e for e in rep.errors)
    assert any("notify command exited 3" in e for e in rep.errors)


def test_bad_notify_config_is_rejected(tmp_path):
    from launcher.errors import SpecError
    from launcher.reaper.policy import load_policy

    p = tmp_path / "reap.yaml"
    p.write_text("notify: {webhook_url: 'ftp://x', timeout_s: 5}")
    with pytest.raises(SpecError, match="notify.webhook_url"):
        load_policy(p)
    p.write_text("notify: {webhok_url: 'https://x'}")
    with pytest.raises(SpecError, match="did you mean 'webhook_url'"):
        load_policy(p)
