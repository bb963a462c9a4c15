"""The SkyPilot executors store the job output they stream with the spec's secrets replaced, as
lines arrive (a scripted SDK prints the way SkyPilot's `stream_response` does: `print(line,
flush=True, end='', file=output_stream)`)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from launcher.executors.sky import SkyExecutor
from launcher.executors.sky_cluster import SkyClusterExecutor
from tests.executors.test_sky_cluster_config import _handle as slurm_handle
from tests.executors.test_sky_cluster_config import _request as slurm_request
from tests.executors.test_sky_config import handle as cloud_handle
from tests.executors.test_sky_config import request as cloud_request

SECRET = "sk-live-5f3a9c"


class StreamingSdk:
    """Answers what both executors ask; tail_logs prints a script of lines, the secret among them
    (once whole, once cut across two prints with a pause between), then fails with a message that
    quotes it."""

    def __init__(self) -> None:
        self.Task = SimpleNamespace(from_yaml_config=lambda cfg: ("task", cfg))
        self.second_half = threading.Event()
        self.finished = threading.Event()

    def ssh_up(self, **kw):
        return ("ssh_up",)

    def launch(self, task, **kw):
        return ("launch",)

    def job_status(self, cluster, job_ids):
        return ("job_status",)

    def get(self, rid):
        if rid[0] == "launch":
            return (42, None)
        if rid[0] == "job_status":
            return {42: "SUCCEEDED" if self.finished.is_set() else "RUNNING"}
        return None

    def cancel(self, cluster, job_ids):
        return ("cancel",)

    def tail_logs(self, cluster, job_id, follow, output_stream):
        print("(head, rank=0) ready\n", flush=True, end="", file=output_stream)
        print(f"(head, rank=0) token {SECRET}\n", flush=True, end="", file=output_stream)
        print("(head, rank=0) again sk-live", flush=True, end="", file=output_stream)
        self.second_half.wait(10)
        print("-5f3a9c done\n", flush=True, end="", file=output_stream)
        self.finished.set()
        raise ConnectionError(f"stream lost while sending {SECRET}")


@pytest.mark.parametrize("kind", ["cloud", "slurm"])
def test_streamed_job_output_is_stored_redacted_as_it_arrives(tmp_path, kind):
    sdk = StreamingSdk()
    if kind == "cloud":
        ex = SkyExecutor(accelerator="L4", sdk=sdk, pools_file=tmp_path / "pools.yaml", identity_file="/id", poll_interval_s=0.01)
        execution = ex.start(cloud_request(tmp_path, secrets=(SECRET,)), cloud_handle())
    else:
        ex = SkyClusterExecutor(sdk=sdk, poll_interval_s=0.01)
        execution = ex.start(slurm_request(tmp_path, secrets=(SECRET,)), slurm_handle())
    log = tmp_path / "logs" / "rank-0.log"
    deadline = time.monotonic() + 10
    while "again" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.01)
    # live: the finished lines are there while the stream waits; the cut secret's first half is not
    assert log.read_text() == "(head, rank=0) ready\n(head, rank=0) token ***\n(head, rank=0) again "
    sdk.second_half.set()
    result = execution.wait(10)
    assert result is not None and result.ok, result
    deadline = time.monotonic() + 10
    while "stream ended" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log.read_text() == (
        "(head, rank=0) ready\n(head, rank=0) token ***\n(head, rank=0) again *** done\n"
        "[launcher] log stream ended: ConnectionError: stream lost while sending ***\n"
    )
