"""`launcher infra ...` through the real entry point (subprocess): the dry-run plan, the
CLI-missing refusal (exit 5, nothing written), tag refusal (exit 2), list without the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli

AWS_FLAGS = ["--cloud", "aws", "--region", "us-east-1", "--zone", "us-east-1a", "--instance-type", "p3.2xlarge",
             "--gpus", "V100:1", "--num-nodes", "2"]
TAG_FLAGS = ["--project", "vision", "--experiment", "ft-3", "--owner", "alice", "--cost-center", "cc-1",
             "--cluster", "c1", "--run-id", "r-01", "--ttl-hours", "6"]


@pytest.fixture
def no_pulumi_env(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "HOME": str(home)}


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_dry_run_json_plan_has_every_resource_with_tags(launcher_home, no_pulumi_env):
    r = run_cli("infra", "preview", "--dry-run", "--json", *AWS_FLAGS, *TAG_FLAGS, "--bucket-name", "team-ckpts-01",
                env=no_pulumi_env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["stack"] == "vision.c1" and doc["cloud"] == "aws"
    assert doc["tags"]["run-id"] == "r-01" and doc["tags"]["managed-by"] == "gpu-launcher"
    instances = [x for x in doc["resources"] if x["type"] == "aws:ec2/instance:Instance"]
    assert len(instances) == 2
    for x in doc["resources"]:
        if x["billable"]:
            assert doc["tags"].items() <= x["tags"].items(), x["name"]
    assert instances[0]["inputs"]["instanceMarketOptions"]["marketType"] == "spot"
    (bucket,) = [x for x in doc["resources"] if x["type"] == "aws:s3/bucket:Bucket"]
    assert bucket["inputs"]["bucket"] == "team-ckpts-01"
    assert _tree(launcher_home) == []  # a dry run writes nothing


def test_dry_run_table_for_gcp_shows_the_label_mapping(capsys):
    # in-process (pulumi_gcp is already imported by the program tests; a subprocess pays ~2 s again)
    from tests.cli_child import run

    rc = run(["infra", "preview", "--dry-run", "--cloud", "gcp", "--region", "us-central1", "--zone",
              "us-central1-a", "--instance-type", "n1-standard-8", "--gpus", "T4:1", "--on-demand",
              *TAG_FLAGS[:-4], "--run-id", "R.01"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "gcp:compute/instance:Instance" in out.out
    assert "provisioning=STANDARD" in out.out
    assert "run-id=r-01" in out.out  # R.01 sanitized for GCP
    assert "MISSING" not in out.out
    assert "nothing deployed" in out.err


def test_up_without_pulumi_cli_exits_5_with_one_install_hint(launcher_home, no_pulumi_env):
    r = run_cli("infra", "up", *AWS_FLAGS, *TAG_FLAGS, "--ssh-cidr", "203.0.113.7/32", env=no_pulumi_env)
    assert r.returncode == 5
    assert r.stderr.count("error:") == 1
    assert "Pulumi CLI" in r.stderr and "get.pulumi.com" in r.stderr
    assert "Traceback" not in r.stderr
    assert _tree(launcher_home) == []


def test_destroy_without_pulumi_cli_exits_5(launcher_home, no_pulumi_env):
    r = run_cli("infra", "destroy", "--project", "vision", "--cluster", "c1", env=no_pulumi_env)
    assert r.returncode == 5 and "get.pulumi.com" in r.stderr
    assert _tree(launcher_home) == []


def test_missing_tags_refuse_with_exit_2(no_pulumi_env):
    r = run_cli("infra", "preview", "--dry-run", *AWS_FLAGS, "--project", "vision", "--cluster", "c1",
                env=no_pulumi_env)
    assert r.returncode == 2
    assert "missing mandatory tags: experiment, owner, cost-center" in r.stderr
    assert "--owner" in r.stderr


def test_unknown_cloud_gets_did_you_mean(no_pulumi_env):
    args = ["infra", "preview", "--dry-run", "--cloud", "gpc", *AWS_FLAGS[2:], *TAG_FLAGS]
    r = run_cli(*args, env=no_pulumi_env)
    assert r.returncode == 2 and "did you mean 'gcp'" in r.stderr


def test_list_reads_the_file_backend_without_cli(launcher_home, no_pulumi_env):
    d = launcher_home / "pulumi" / ".pulumi" / "stacks" / "gpu-launcher"
    d.mkdir(parents=True)
    (d / "vision.c1.json").write_text(json.dumps({"checkpoint": {"latest": {"resources": [{}, {}]}}}))
    r = run_cli("infra", "list", "--json", env=no_pulumi_env)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(x["name"], x["project"], x["cluster"], x["resource_count"]) for x in rows] == [("vision.c1", "vision", "c1", 2)]
