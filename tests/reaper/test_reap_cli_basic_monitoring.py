"""The issue's user, through the real CLI on a real moto_server: a two-day-old managed g5.xlarge
idle at 0.5% with everything reported every 5 minutes (EC2 basic monitoring, the agent's GPU
metrics at 300 s). `launcher reap --dry-run --json` marks it and changes nothing; night 1 marks
it, night 2 (its grace over) terminates it; busy, protected, unmanaged and fresh machines are
never touched."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from launcher.reaper.decide import MARK_TAG
from tests.conftest import run_cli
from tests.reaper.monitoring_shapes import put_agent_gpu, put_ec2_cpu

MANAGED = {"managed-by": "gpu-launcher", "project": "vision", "owner": "ana", "experiment": "e1", "cost-center": "cc1"}
AMI = "ami-12c6146b"


def _launch(ec2, tags: dict[str, str] | None) -> str:
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []
    resp = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="g5.xlarge", TagSpecifications=spec)
    return resp["Instances"][0]["InstanceId"]  # basic monitoring: EC2's default


def _described(ec2, iid: str) -> dict:
    return ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]


def _reap(*args: str, env: dict) -> dict[str, dict]:
    r = run_cli("reap", *args, "--json", env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return {o["instance_id"]: o for o in json.loads(r.stdout)}


def test_basic_monitoring_idle_instance_is_marked_then_terminated_through_the_cli(aws_clean, moto_clock, tmp_path: Path, launcher_home: Path):
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1")
    cw = boto3.client("cloudwatch", region_name="us-east-1")
    idle = _launch(ec2, {**MANAGED, "cluster": "c-idle"})
    busy = _launch(ec2, {**MANAGED, "cluster": "c-busy"})
    protected = _launch(ec2, {**MANAGED, "cluster": "c-kept", "keep-alive": "true"})
    unmanaged = _launch(ec2, {"project": "vision"})
    with moto_clock.launched_now():
        fresh = _launch(ec2, {**MANAGED, "cluster": "c-fresh"})
    now = datetime.now(UTC)
    for iid in (idle, protected, unmanaged):
        put_ec2_cpu(cw, iid, now, 0.5)
        put_agent_gpu(cw, iid, now, 0.5, interval_s=300)
    put_ec2_cpu(cw, busy, now, 0.5)
    put_agent_gpu(cw, busy, now, 97.0, interval_s=300)
    # fresh: launched seconds ago, its first 5-minute point not published yet
    env = {"LAUNCHER_AWS_REGIONS": "us-east-1", "HOME": str(tmp_path)}

    # No policy file: the defaults (grace 120 min), every provider with credentials.
    dry = _reap("--dry-run", env=env)
    assert unmanaged not in dry
    assert dry[idle]["decision"] == "mark", dry[idle]["reasons"]
    gpu = next(r for r in dry[idle]["reasons"] if r.startswith("gpu-utilization: "))
    assert gpu.startswith("gpu-utilization: GPU 0.5% over the last 60 min (idle below 5%)"), gpu
    assert {dry[busy]["decision"], dry[protected]["decision"], dry[fresh]["decision"]} <= {"keep", "skip"}
    for iid in (idle, busy, protected, fresh, unmanaged):
        d = _described(ec2, iid)
        assert d["State"]["Name"] == "running" and MARK_TAG not in {t["Key"] for t in d.get("Tags", [])}

    policy = tmp_path / "reap.yaml"
    policy.write_text("providers: [aws]\ndefaults: {grace_minutes: 0}\n")  # grace 0: act on the next night
    night1 = _reap("--policy", str(policy), env=env)
    assert night1[idle]["decision"] == "mark" and night1[idle]["action"] == "tag-mark", night1[idle]
    assert MARK_TAG in {t["Key"] for t in _described(ec2, idle).get("Tags", [])}
    assert _described(ec2, idle)["State"]["Name"] == "running"

    night2 = _reap("--policy", str(policy), env=env)
    assert night2[idle]["decision"] == "act" and night2[idle]["action"] == "destroy" and night2[idle]["ok"], night2[idle]
    assert _described(ec2, idle)["State"]["Name"] in ("shutting-down", "terminated")

    expected = {busy: "keep", protected: "skip", fresh: "keep"}
    for night in (night1, night2):
        assert {k: night[k]["decision"] for k in expected} == expected, {k: night[k]["reasons"] for k in expected}
        assert unmanaged not in night
    assert "busy" in night2[busy]["reasons"]
    assert "cpu-utilization: CPU utilization not published" in night2[fresh]["reasons"]
    age = next(r for r in night2[fresh]["reasons"] if r.startswith("age: "))
    assert float(re.search(r"\((\d+\.\d) h ago, from the cloud\)", age).group(1)) < 1.0, age  # launched this test
    for iid in (busy, protected, unmanaged, fresh):
        d = _described(ec2, iid)
        assert d["State"]["Name"] == "running", iid
        assert MARK_TAG not in {t["Key"] for t in d.get("Tags", [])}, iid

