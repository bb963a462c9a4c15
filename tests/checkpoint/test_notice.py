"""Preemption notices: SIGTERM and the AWS/GCP metadata endpoints (a local HTTP server)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.checkpoint import PREEMPTED_EXIT_CODE, CheckpointStore, notice
from launcher.checkpoint.notice import MetadataPoller, check_aws, check_gcp, detect_cloud

from tests.checkpoint.metadata_server import TOKEN, MetadataServer, closed_port_url

JOB = Path(__file__).parent / "notice_job.py"
CLOUD_VARS = ("LAUNCHER_CLOUD", "LAUNCHER_AWS_METADATA_URL", "LAUNCHER_GCP_METADATA_URL", "SKYPILOT_CLUSTER_INFO")


@pytest.fixture(autouse=True)
def clean_notice():
    notice.reset()
    yield
    notice.reset()


def job_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLOUD_VARS}
    return {**env, **extra}


def start_job(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [sys.executable, str(JOB), str(root)], stdout=subprocess.PIPE, text=True, env=env
    )
    return proc, json.loads(proc.stdout.readline())


def finish(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def test_preempted_exit_code_is_distinct():
    reserved = {0, 1, 2, 126, 127, 130} | set(range(128, 160))
    assert PREEMPTED_EXIT_CODE not in reserved
    assert 0 < PREEMPTED_EXIT_CODE < 126


def test_sigterm_saves_at_next_step_and_exits_with_the_preempted_code(tmp_path):
    root = tmp_path / "ck"
    steps = []
    for _ in range(2):  # preempted twice; the second run resumes where the first stopped
        proc, ready = start_job(root, job_env())
        assert ready["polling"] is None  # not on a cloud: no poller, no network
        assert json.loads(proc.stdout.readline()) == {"stepped": ready["ready"] + 1}  # it made progress
        proc.send_signal(signal.SIGTERM)
        result = finish(proc)
        assert proc.returncode == PREEMPTED_EXIT_CODE
        assert result["source"] == "signal"
        assert result["preempted_at"] > ready["ready"]
        assert CheckpointStore(root).latest().step == result["preempted_at"]
        steps.append((ready["ready"], result["preempted_at"]))
    assert steps[1][0] == steps[0][1]


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_metadata_notice_in_a_job_saves_and_exits(tmp_path, cloud):
    with MetadataServer() as server:
        env = job_env(**{f"LAUNCHER_{cloud.upper()}_METADATA_URL": server.url, "LAUNCHER_PREEMPTION_POLL_S": "0.05"})
        proc, ready = start_job(tmp_path / "ck", env)
        assert ready["polling"] == cloud
        # three "no notice" answers served, and the job still running: they do not stop it
        deadline = time.monotonic() + 30
        while len([r for r in server.requests if r[0] == "GET"]) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len([r for r in server.requests if r[0] == "GET"]) >= 3, "the job never polled the metadata server"
        assert proc.poll() is None
        server.preempted = True
        result = finish(proc)
    assert proc.returncode == PREEMPTED_EXIT_CODE
    assert result["source"] == cloud
    assert CheckpointStore(tmp_path / "ck").latest().step == result["preempted_at"]


def test_aws_check_uses_imdsv2_token_and_reads_the_action():
    with MetadataServer() as server:
        assert check_aws(server.url) is None
        server.preempted = True
        assert json.loads(check_aws(server.url))["action"] == "terminate"
        gets = [h for m, p, h in server.requests if m == "GET"]
        assert gets and all(h.get("x-aws-ec2-metadata-token") == TOKEN for h in gets)


def test_aws_check_falls_back_to_imdsv1():
    with MetadataServer(imdsv2=False) as server:
        assert check_aws(server.url) is None
        server.preempted = True
        assert check_aws(server.url) is not None


def test_gcp_check_sends_metadata_flavor():
    with MetadataServer() as server:
        assert check_gcp(server.url) is None
        server.preempted = True
        assert check_gcp(server.url) == "TRUE"


def test_poller_in_process_reports_once_and_survives_errors():
    with MetadataServer() as server:
        seen = []
        poller = MetadataPoller("gcp", base_url=server.url, interval_s=0.02, on_notice=lambda c, d: seen.append(c))
        poller.start()
        deadline = time.monotonic() + 5
        while poller.polls < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == [] and poller.polls >= 3  # "FALSE" answers are not notices
        server.preempted = True
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        poller.stop()
    assert seen == ["gcp"]


def test_unreachable_endpoint_never_hangs_or_raises(tmp_path):
    poller = MetadataPoller("aws", base_url=closed_port_url(), interval_s=0.01, timeout_s=0.2)
    for _ in range(3):
        assert poller.poll_once() is None
    assert poller.errors == 3


def test_silent_endpoint_times_out_instead_of_hanging():
    # Accepts connections and never answers: only the poller's own timeout can end a poll. The
    # bound is 100x that timeout: a poll without one would wait forever, not a little longer.
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        poller = MetadataPoller("aws", base_url=f"http://127.0.0.1:{silent.getsockname()[1]}", interval_s=0.01, timeout_s=0.2)
        started = time.monotonic()
        assert poller.poll_once() is None
        assert time.monotonic() - started < 20
    assert poller.errors == 1


def test_detect_cloud_from_configuration_only():
    assert detect_cloud({}) is None
    assert detect_cloud({"LAUNCHER_CLOUD": "aws"}) == "aws"
    assert detect_cloud({"LAUNCHER_CLOUD": "local", "LAUNCHER_AWS_METADATA_URL": "http://x"}) is None
    assert detect_cloud({"LAUNCHER_GCP_METADATA_URL": "http://127.0.0.1:1"}) == "gcp"
    assert detect_cloud({"SKYPILOT_CLUSTER_INFO": json.dumps({"cloud": "GCP", "region": "us-central1"})}) == "gcp"
    assert detect_cloud({"SKYPILOT_CLUSTER_INFO": json.dumps({"cloud": "Lambda"})}) is None
    assert detect_cloud({"SKYPILOT_CLUSTER_INFO": "not json"}) is None


def test_install_off_cloud_starts_no_poller_and_sigterm_sets_the_flag():
    previous = signal.getsignal(signal.SIGTERM)
    try:
        assert notice.install(env={}) is None
        assert not notice.requested()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 2
        while not notice.requested() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert notice.requested()
        assert notice.notice().source == "signal" and notice.notice().detail == "SIGTERM"
    finally:
        signal.signal(signal.SIGTERM, previous)
