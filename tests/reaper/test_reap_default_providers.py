"""`launcher reap --dry-run` with no policy file covers every provider whose credentials are
found: a user with AWS credentials sees their idle tagged instances (real moto_server, the real
CLI in a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli

MANAGED = {"managed-by": "gpu-launcher", "project": "vision", "owner": "ana", "experiment": "e1", "cost-center": "cc1",
           "cluster": "c-gone", "run-id": "r-gone", "expires-at": "2026-01-01T00:00:00Z"}  # fmt: skip


def test_no_policy_file_reaps_aws_when_credentials_are_found(aws_clean, tmp_path: Path, launcher_home: Path) -> None:
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1")
    tags = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in MANAGED.items()]}]
    [idle] = [i["InstanceId"] for i in ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="g5.xlarge", TagSpecifications=tags)["Instances"]]
    [mine_not] = [i["InstanceId"] for i in ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="g5.xlarge")["Instances"]]
    assert not (launcher_home / "reap.yaml").exists()
    env = {"LAUNCHER_AWS_REGIONS": "us-east-1", "HOME": str(tmp_path)}
    r = run_cli("reap", "--dry-run", "--json", env=env, timeout=300)
    assert r.returncode in (0, 5), r.stderr
    rows = {o["instance_id"]: o for o in json.loads(r.stdout)}
    assert idle in rows, rows
    assert rows[idle]["provider"] == "aws"
    assert rows[idle]["decision"] in ("mark", "act"), rows[idle]
    assert mine_not not in rows  # not tagged as ours: never considered
    # nothing changed: still running, no mark tag
    desc = ec2.describe_instances(InstanceIds=[idle])["Reservations"][0]["Instances"][0]
    assert desc["State"]["Name"] == "running"
    from launcher.reaper.decide import MARK_TAG

    assert MARK_TAG not in {t["Key"] for t in desc.get("Tags", [])}


def test_without_cloud_credentials_only_local_is_covered(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "GOOGLE_APPLICATION_CREDENTIALS": ""}
    r = run_cli("reap", "--dry-run", "--json", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert all(o["provider"] == "local" for o in json.loads(r.stdout))
