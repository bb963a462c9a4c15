"""The bounded SkyPilot calls of the declared-cluster executor: teardown verified by asking
SkyPilot, what a job did after its controller died, and the bounded wait while the allocation is
queued. SkyPilot's client is played by `FakeSdk` (its call shapes: request ids, `get`, status rows
with `init_status_reason`); the real API server on a real Slurm cluster is tests/slurm."""

from __future__ import annotations

import threading
import time

import pytest

from launcher.errors import ProviderError
from launcher.executors.ansi import AnsiStripper, strip_ansi
from launcher.executors.base import ExecRequest, Outcome
from launcher.executors.sky_cluster import SkyClusterExecutor, classify, sky_cluster_name
from launcher.executors.sky_cluster_state import bounded, down_verified, fetch_log, job_status, listed, record_job, recorded_job_id
from launcher.providers.base import ClusterHandle, Node


class FakeSdk:
    """Requests are ids; `get(id)` returns (or raises) what the call produced."""

    def __init__(self) -> None:
        self.clusters: dict[str, dict] = {}
        self.jobs: dict[str, dict] = {}  # cluster -> {job_id: status}
        self.downs: list[str] = []
        self.down_keeps: set[str] = set()  # clusters a `sky down` silently leaves behind
        self.cancelled: list[str] = []
        self.launch_release = threading.Event()
        self._results: dict[str, object] = {}
        self._n = 0

    def _req(self, value) -> str:
        self._n += 1
        rid = f"req-{self._n}"
        self._results[rid] = value
        return rid

    def get(self, rid):
        value = self._results[rid]
        if value == "launch":
            self.launch_release.wait(30)
            if rid in self.cancelled:
                raise RuntimeError("request cancelled")
            return (1, None)
        if isinstance(value, BaseException):
            raise value
        return value

    def status(self, cluster_names=None):
        rows = [dict(name=n, **r) for n, r in self.clusters.items() if cluster_names is None or n in cluster_names]
        return self._req(rows)

    def down(self, name):
        if name not in self.clusters:
            return self._req(RuntimeError(f"ClusterDoesNotExist: Cluster {name!r} does not exist."))
        self.downs.append(name)
        if name not in self.down_keeps:
            self.clusters.pop(name)
        return self._req(None)

    def job_status(self, name, job_ids=None):
        if name not in self.jobs:
            return self._req(RuntimeError(f"ClusterDoesNotExist: {name} does not exist"))
        jobs = self.jobs[name]
        if job_ids is None:
            last = max(jobs)
            return self._req({last: jobs[last]})
        return self._req({j: jobs.get(j) for j in job_ids})

    def tail_logs(self, name, job_id, follow, output_stream):
        output_stream.write("\x1b[36m(task, pid=7)\x1b[0m step 1\n(task, pid=7) token=hunter2hunter2\n")
        output_stream.write("[launcher] rank 0 exit_code=0\n")
        return 0

    def launch(self, task, cluster_name, retry_until_up):
        self.clusters[cluster_name] = {"status": "INIT", "init_status_reason": "Launching (pending: Resources; partition: debug)"}
        return self._req("launch")

    def api_cancel(self, rid):
        self.cancelled.append(rid)
        self.launch_release.set()

    class Task:
        @staticmethod
        def from_yaml_config(cfg):
            return cfg


def handle(cluster="r-20261203-000000-abcdef-c1"):
    return ClusterHandle(cluster, "slurm", "local", None, (Node("local/x/0", None, 0),), extra={"infra": "slurm/local"})


def test_bounded_gives_up_naming_the_call_and_cancels():
    cancelled = []
    started = time.monotonic()
    with pytest.raises(ProviderError, match="did not answer sky status within 0s"):
        bounded(lambda: time.sleep(5), 0.2, "sky status", on_timeout=lambda: cancelled.append(1))
    assert time.monotonic() - started < 2 and cancelled == [1]
    with pytest.raises(ValueError):
        bounded(lambda: (_ for _ in ()).throw(ValueError("x")), 5, "x")


def test_down_is_verified_by_asking_skypilot_afterwards():
    sdk = FakeSdk()
    sdk.clusters = {"gl-a": {"status": "UP"}, "gl-b": {"status": "UP"}}
    assert down_verified(sdk, ["gl-a", "gl-gone"]) == ["gl-a"]  # already gone is fine
    assert listed(sdk) == {"gl-b": "UP"}
    sdk.down_keeps.add("gl-b")
    with pytest.raises(ProviderError, match=r"SkyPilot still lists gl-b \(UP\) after `sky down`"):
        down_verified(sdk, ["gl-b"])
    assert down_verified(sdk, ["gl-zzz"], only_listed=True) == [] and "gl-zzz" not in sdk.downs  # sweeps ask first


def test_job_status_of_the_recorded_job_and_of_a_cluster_gone(tmp_path):
    sdk = FakeSdk()
    sdk.jobs = {"gl-a": {1: "SUCCEEDED", 2: "RUNNING"}}
    record_job(tmp_path, 1, "gl-a", 1)
    assert recorded_job_id(tmp_path, 1) == 1 and recorded_job_id(tmp_path, 2) is None
    assert job_status(sdk, "gl-a", 1) == (1, "SUCCEEDED")
    assert job_status(sdk, "gl-a", None) == (2, "RUNNING")  # no record: the latest job
    assert job_status(sdk, "gl-none", 1) == (None, None)


def test_fetch_log_replaces_the_log_redacted_and_without_escapes(tmp_path):
    log = tmp_path / "rank-0.log"
    log.write_text("step 1 (the stream the dead controller left)\n")
    assert fetch_log(FakeSdk(), "gl-a", 1, log, ["hunter2hunter2"])
    assert log.read_text() == "(task, pid=7) step 1\n(task, pid=7) token=***\n[launcher] rank 0 exit_code=0\n"


def test_ended_job_adopts_a_finished_job_and_leaves_a_running_one(tmp_path):
    sdk = FakeSdk()
    h = handle()
    name = sky_cluster_name(h)
    ex = SkyClusterExecutor(sdk=sdk)
    sdk.jobs = {name: {3: "SUCCEEDED"}}
    record_job(tmp_path, 1, name, 3)
    status, job = ex.ended_job(h, tmp_path, 1, 1)
    assert status == "SUCCEEDED" and job.outcome is Outcome.SUCCEEDED and job.exit_code == 0
    assert "exit_code=0" in (tmp_path / "logs" / "rank-0.log").read_text()
    sdk.jobs[name][3] = "RUNNING"
    assert ex.ended_job(h, tmp_path, 1, 1) == ("RUNNING", None)
    assert ex.ended_job(handle("other-c9"), tmp_path, 1, 1) == ("gone", None)


def test_classify_maps_skypilot_status_and_our_exit_lines():
    assert classify("SUCCEEDED", {}, 1, preemptible=False)[0] is Outcome.SUCCEEDED
    assert classify("FAILED", {0: 75}, 1, preemptible=False)[:2] == (Outcome.PREEMPTED, 75)
    assert classify("FAILED", {0: 3}, 1, preemptible=False)[:2] == (Outcome.FAILED, 3)
    assert classify("FAILED_DRIVER", {}, 1, preemptible=True)[0] is Outcome.PREEMPTED
    assert classify("FAILED_DRIVER", {0: 0}, 1, preemptible=False)[0] is Outcome.SUCCEEDED


def test_a_launch_queued_past_max_queue_says_so_then_ends_no_capacity(tmp_path):
    sdk = FakeSdk()
    ex = SkyClusterExecutor(sdk=sdk, pending_check_s=0.05)
    req = ExecRequest(run_id="r-1", attempt=1, run_dir=tmp_path, workdir=None, setup=None, run="true", num_nodes=1,
                      gpus_per_node=0, max_queue_s=0.3)  # fmt: skip
    execution = ex.start(req, handle())
    seen = set()
    deadline = time.monotonic() + 10
    while (res := execution.poll()) is None and time.monotonic() < deadline:
        seen.add(execution.waiting_for)
        time.sleep(0.02)
    assert res is not None and res.outcome is Outcome.NO_CAPACITY
    words = "the Slurm job of SkyPilot cluster gl-r-20261203-000000-abcdef-c1 is queued behind other jobs on slurm/local"
    assert f"{words} (SkyPilot: Launching (pending: Resources; partition: debug))" in seen
    assert "gave up after" in res.detail and "(launcher: max_wait)" in res.detail
    assert sdk.cancelled, "the launch request is cancelled on the API server"


def test_ansi_stripping_across_chunk_boundaries():
    assert strip_ansi("\x1b[1;32m✓ Job finished\x1b[0m\x1b]8;;http://x\x07link\x1b]8;;\x07") == "✓ Job finishedlink"
    s = AnsiStripper()
    out = "".join(s.feed(c) for c in ["a\x1b", "[3", "6mb\x1b[0", "mc\n\x1b(", "Bd"]) + s.close()
    assert out == "abc\nd"
    assert strip_ansi("tabs\tand\rreturns stay") == "tabs\tand\rreturns stay"


def test_default_sdk_exposes_status(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    from launcher.executors.sky import default_sdk

    assert callable(default_sdk().status)
