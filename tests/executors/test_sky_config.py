"""The SkyPilot executor's pure parts (no `import sky`): the task config, the SSH node pool entry
and file, and how job statuses / node states become our outcomes (with a scripted SDK)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from launcher.errors import ProviderError
from launcher.executors.base import ExecRequest, Outcome
from launcher.executors.sky import (
    CHECKPOINT_MOUNT,
    SkyExecutor,
    node_pool_entry,
    pool_name,
    task_config,
    write_node_pool,
)
from launcher.providers.base import MANAGED_BY_TAG, MANAGED_BY_VALUE, ClusterHandle, Node
from launcher.providers.fake import FakeProvider


def handle(provider="aws", bucket="ckpt-bucket", ips=("3.1.1.1", "3.1.1.2"), ids=None, cluster="Exp_1.Cluster"):
    ids = ids or [f"i-{n}" for n in range(len(ips))]
    nodes = tuple(Node(iid, ip, r) for r, (iid, ip) in enumerate(zip(ids, ips, strict=True)))
    extra = {"ssh_user": "ubuntu", **({"bucket": bucket} if bucket else {})}
    return ClusterHandle(cluster, provider, "us-east-1", "us-east-1a", nodes, stack="p--c", extra=extra)


def request(tmp_path, **kw):
    base = dict(
        run_id="run-7",
        attempt=2,
        run_dir=tmp_path,
        workdir=tmp_path,
        setup="pip list",
        run="python train.py",
        num_nodes=2,
        gpus_per_node=1,
        envs={"EPOCHS": "3"},
        image_id="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
    )
    base.update(kw)
    return ExecRequest(**base)


def test_task_config_carries_every_field(tmp_path):
    cfg = task_config(request(tmp_path), handle(), accelerator="L4", labels={"project": "p"})
    assert cfg["resources"] == {
        "infra": "ssh/gl-exp-1-cluster",
        "accelerators": {"L4": 1},
        "image_id": "docker:pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        "labels": {"project": "p"},
    }
    assert cfg["num_nodes"] == 2
    assert cfg["setup"] == "pip list" and cfg["run"] == "python train.py"
    assert cfg["workdir"] == str(tmp_path)
    assert cfg["file_mounts"] == {CHECKPOINT_MOUNT: {"source": "s3://ckpt-bucket", "mode": "MOUNT_CACHED"}}
    assert cfg["envs"] == {
        "EPOCHS": "3",
        "LAUNCHER_RUN_ID": "run-7",
        "LAUNCHER_ATTEMPT": "2",
        "LAUNCHER_CLOUD": "aws",
        "LAUNCHER_CHECKPOINT_DIR": CHECKPOINT_MOUNT,
    }


def test_gcp_bucket_is_gs_and_no_bucket_means_no_mount(tmp_path):
    gcp = task_config(request(tmp_path), handle(provider="gcp"))
    assert gcp["file_mounts"][CHECKPOINT_MOUNT]["source"] == "gs://ckpt-bucket"
    none = task_config(request(tmp_path, image_id=None, gpus_per_node=0), handle(bucket=None))
    assert "file_mounts" not in none and "LAUNCHER_CHECKPOINT_DIR" not in none["envs"]
    assert "image_id" not in none["resources"] and "accelerators" not in none["resources"]


def test_node_pool_entry_lists_ips_by_rank_and_refuses_missing_ips():
    h = handle(ips=("10.0.0.9", "10.0.0.8"))
    h = ClusterHandle(h.cluster, h.provider, h.region, h.zone, tuple(reversed(h.nodes)), h.stack, h.extra)
    assert node_pool_entry(h, identity_file="/k") == {"user": "ubuntu", "identity_file": "/k", "hosts": ["10.0.0.9", "10.0.0.8"]}
    with pytest.raises(ProviderError, match="without an IP"):
        node_pool_entry(handle(ips=("10.0.0.1", None)), identity_file=None)


def test_node_pool_file_keeps_the_users_pools(tmp_path):
    path = tmp_path / ".sky" / "ssh_node_pools.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({"my-lab": {"user": "me", "hosts": ["192.168.1.5"]}}))
    write_node_pool(path, "gl-a", {"user": "ubuntu", "hosts": ["1.1.1.1"]})
    write_node_pool(path, "gl-b", {"user": "ubuntu", "hosts": ["2.2.2.2"]})
    write_node_pool(path, "gl-a", None)
    assert yaml.safe_load(path.read_text()) == {
        "my-lab": {"user": "me", "hosts": ["192.168.1.5"]},
        "gl-b": {"user": "ubuntu", "hosts": ["2.2.2.2"]},
    }


def test_pool_name_is_a_valid_context_name():
    assert pool_name(handle(cluster="Vision FT/run#3")) == "gl-vision-ft-run-3"


def test_importing_the_executor_does_not_import_sky():
    import subprocess

    code = "import sys, launcher.executors.sky as m; m.task_config; print('sky' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- outcomes, with a scripted SDK (the real SDK is exercised in test_sky_sdk.py) -------------
class ScriptedSdk:
    """Stands in for SkyPilot's client SDK: records calls; job_status answers from a script."""

    def __init__(self, statuses, launch_error=None):
        self.statuses = list(statuses)
        self.launch_error = launch_error
        self.calls = []
        self.Task = SimpleNamespace(from_yaml_config=lambda cfg: ("task", cfg))

    def _rid(self, name, *a, **kw):
        self.calls.append((name, a, kw))
        return (name, a, kw)

    def ssh_up(self, **kw):
        return self._rid("ssh_up", **kw)

    def launch(self, task, **kw):
        return self._rid("launch", task, **kw)

    def job_status(self, cluster, job_ids):
        return self._rid("job_status", cluster, job_ids=job_ids)

    def tail_logs(self, cluster, job_id, follow, output_stream):
        self.calls.append(("tail_logs", (cluster, job_id), {"follow": follow}))
        output_stream.write("(head, rank=0) epoch 1 loss 0.5\n")
        return 0

    def down(self, cluster):
        return self._rid("down", cluster)

    def ssh_down(self, pool):
        return self._rid("ssh_down", pool)

    def cancel(self, cluster, job_ids):
        return self._rid("cancel", cluster, job_ids=job_ids)

    def get(self, rid):
        name = rid[0]
        if name == "launch":
            if self.launch_error:
                raise self.launch_error
            return (42, None)
        if name == "job_status":
            nxt = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
            if isinstance(nxt, Exception):
                raise nxt
            return {42: nxt}
        return None


def start(tmp_path, sdk, provider=None, h=None):
    ex = SkyExecutor(accelerator="L4", provider=provider, sdk=sdk, pools_file=tmp_path / "pools.yaml",
                     identity_file="/id", poll_interval_s=0, unreachable_polls=2)
    execution = ex.start(request(tmp_path), h or handle())
    execution._thread.join(5)
    return execution


def test_success_path_calls_ssh_up_then_launch_then_polls(tmp_path):
    sdk = ScriptedSdk(["RUNNING", "SUCCEEDED"])
    ex = start(tmp_path, sdk)
    assert ex.poll() is None
    res = ex.poll()
    assert res.outcome is Outcome.SUCCEEDED and res.exit_code == 0
    names = [c[0] for c in sdk.calls]
    # the log follower (a thread) calls tail_logs whenever it gets to run: leave it out of the order
    assert names[:2] == ["ssh_up", "launch"]
    assert [n for n in names[2:] if n != "tail_logs"] == ["job_status", "job_status"]
    assert sdk.calls[0][2] == {"infra": "gl-exp-1-cluster", "file": str(tmp_path / "pools.yaml")}
    launch_kw = sdk.calls[1][2]
    assert launch_kw["cluster_name"] == "gl-exp-1-cluster-job"
    assert launch_kw["retry_until_up"] is False and launch_kw["down"] is False


def test_failed_job_with_healthy_nodes_is_failed(tmp_path):
    fake = FakeProvider(regions=("us-east-1",))
    ids = [fake.add_instance("us-east-1", tags={MANAGED_BY_TAG: MANAGED_BY_VALUE}) for _ in range(2)]
    res = start(tmp_path, ScriptedSdk(["FAILED"]), fake, handle(ids=ids)).poll()
    assert res.outcome is Outcome.FAILED and "FAILED" in res.detail


def test_setup_failure(tmp_path):
    res = start(tmp_path, ScriptedSdk(["FAILED_SETUP"])).poll()
    assert res.outcome is Outcome.SETUP_FAILED and res.phase == "setup"


def test_unreachable_cluster_with_a_reclaimed_spot_node_is_preempted(tmp_path):
    fake = FakeProvider(regions=("us-east-1",))
    ids = [fake.add_instance("us-east-1", tags={MANAGED_BY_TAG: MANAGED_BY_VALUE}, spot=True) for _ in range(2)]
    ex = start(tmp_path, ScriptedSdk(["RUNNING", RuntimeError("cluster not up"), RuntimeError("cluster not up")]), fake, handle(ids=ids))
    assert ex.poll() is None
    fake.preempt(ids[1])
    assert ex.poll() is None  # one unreachable poll is tolerated
    res = ex.poll()
    assert res.outcome is Outcome.PREEMPTED and ids[1] in res.detail


def test_driver_failure_with_a_vanished_node_is_node_lost(tmp_path):
    fake = FakeProvider(regions=("us-east-1",))
    ids = [fake.add_instance("us-east-1", tags={MANAGED_BY_TAG: MANAGED_BY_VALUE}, spot=False) for _ in range(2)]
    fake.terminate_instance("us-east-1", ids[0])  # gone, but not reclaimed by the cloud
    res = start(tmp_path, ScriptedSdk(["FAILED_DRIVER"]), fake, handle(ids=ids)).poll()
    assert res.outcome is Outcome.NODE_LOST and ids[0] in res.detail


def test_notified_preemption_wins_over_failure_and_cancel(tmp_path):
    ex = start(tmp_path, ScriptedSdk(["RUNNING"]))
    ex.notify_preemption()
    res = ex.stop()
    assert res.outcome is Outcome.PREEMPTED


def test_stop_cancels_the_job(tmp_path):
    sdk = ScriptedSdk(["RUNNING"])
    ex = start(tmp_path, sdk)
    res = ex.stop()
    assert res.outcome is Outcome.CANCELLED
    assert ("cancel", ("gl-exp-1-cluster-job",), {"job_ids": [42]}) in sdk.calls


def test_launch_error_is_a_setup_failure_unless_nodes_are_gone(tmp_path):
    res = start(tmp_path, ScriptedSdk(["RUNNING"], launch_error=RuntimeError("setup exploded"))).poll()
    assert res.outcome is Outcome.SETUP_FAILED and "setup exploded" in res.detail


def test_job_output_is_followed_into_the_run_log(tmp_path):
    ex = start(tmp_path, ScriptedSdk(["RUNNING"]))
    deadline = time.monotonic() + 5
    log = tmp_path / "logs" / "rank-0.log"
    while not (log.exists() and log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log.read_text() == "(head, rank=0) epoch 1 loss 0.5\n"
    assert ("tail_logs", ("gl-exp-1-cluster-job", 42), {"follow": True}) in ex.executor.sdk.calls


def test_pool_file_written_before_deploy(tmp_path):
    start(tmp_path, ScriptedSdk(["RUNNING"]))
    pools = yaml.safe_load(Path(tmp_path / "pools.yaml").read_text())
    assert pools == {"gl-exp-1-cluster": {"user": "ubuntu", "identity_file": "/id", "hosts": ["3.1.1.1", "3.1.1.2"]}}


def test_accelerator_comes_from_the_stack_when_the_controller_does_not_say(tmp_path):
    h = handle()
    h = ClusterHandle(h.cluster, h.provider, h.region, h.zone, h.nodes, h.stack, {**h.extra, "accelerator": "A10G"})
    cfg = SkyExecutor(sdk=ScriptedSdk(["RUNNING"])).task_config(request(tmp_path), h)
    assert cfg["resources"]["accelerators"] == {"A10G": 1}


def test_release_downs_the_sky_cluster_and_pool_and_removes_our_entry(tmp_path):
    sdk = ScriptedSdk(["RUNNING"])
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump({"my-lab": {"hosts": ["192.168.1.5"]}}))
    ex = SkyExecutor(sdk=sdk, pools_file=pools, identity_file="/id")
    execution = ex.start(request(tmp_path), handle())
    execution._thread.join(5)
    ex.release(handle())
    assert ("down", ("gl-exp-1-cluster-job",), {}) in sdk.calls
    assert ("ssh_down", ("gl-exp-1-cluster",), {}) in sdk.calls
    assert yaml.safe_load(pools.read_text()) == {"my-lab": {"hosts": ["192.168.1.5"]}}
