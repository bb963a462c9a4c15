"""The team server's Pulumi program under pulumi.runtime.set_mocks: replicas on VMs, a managed
PostgreSQL that keeps its password to itself, the nightly reaper on one VM, tags everywhere."""

from __future__ import annotations

import ast

import pytest

from infra.plan import run_under_mocks
from infra.server_program import PULUMI_PROJECT, ServerInfraSpec, server_program
from tests.conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def plan(spec: ServerInfraSpec) -> list[tuple[str, str, dict]]:
    rec = run_under_mocks(lambda: server_program(spec), project=PULUMI_PROJECT, stack=spec.stack_name)
    return [(typ, name, inputs) for typ, name, inputs, _provider in rec.resources]


@pytest.fixture(scope="module")
def two_replicas():
    return plan(ServerInfraSpec(project="ml-platform", replicas=2, api_cidr="10.20.0.0/16", tags={"owner": "platform-team"}))


def of_type(resources, typ):
    return [r for r in resources if r[0] == typ]


def test_replicas_database_and_reaper(two_replicas) -> None:
    vms = sorted(of_type(two_replicas, "aws:ec2/instance:Instance"), key=lambda r: r[1])
    assert [v[1] for v in vms] == ["launcher-server-0", "launcher-server-1"]
    for i, (_, _, inputs) in enumerate(vms):
        ud = inputs["userData"]
        assert "launcher server --host 0.0.0.0 --port 8470 --lease-seconds 30" in ud
        assert ("/etc/cron.d/launcher-reap" in ud) == (i == 0)  # one reaper, on the first VM
        assert "17 3 * * * root /opt/launcher/bin/launcher reap --yes" in ud or i != 0
        assert inputs["instanceType"] == "t3.small" and inputs["metadataOptions"]["httpTokens"] == "required"
    (db,) = of_type(two_replicas, "aws:rds/instance:Instance")
    d = db[2]
    assert d["engine"] == "postgres" and d["manageMasterUserPassword"] is True and "password" not in d
    assert d["publiclyAccessible"] is False and d["storageEncrypted"] is True and d["instanceClass"] == "db.t4g.micro"


def test_every_taggable_resource_is_tagged(two_replicas) -> None:
    taggable = [r for r in two_replicas if "tags" in r[2]]
    types = {r[0] for r in taggable}
    assert {"aws:ec2/instance:Instance", "aws:rds/instance:Instance", "aws:ec2/securityGroup:SecurityGroup", "aws:iam/role:Role"} <= types
    for typ, name, inputs in taggable:
        t = inputs["tags"]
        assert t["managed-by"] == "gpu-launcher" and t["project"] == "ml-platform" and t["owner"] == "platform-team", (typ, name)


def test_network_exposure(two_replicas) -> None:
    sgs = {name: inputs for typ, name, inputs in two_replicas if typ == "aws:ec2/securityGroup:SecurityGroup"}
    (api_in,) = sgs["launcher-server"]["ingress"]
    assert (api_in["fromPort"], api_in["toPort"], api_in["cidrBlocks"]) == (8470, 8470, ["10.20.0.0/16"])
    (db_in,) = sgs["launcher-ledger"]["ingress"]
    assert db_in["fromPort"] == 5432 and "cidrBlocks" not in db_in and db_in["securityGroups"]  # from the server SG only


def test_bad_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="whole internet"):
        ServerInfraSpec(api_cidr="0.0.0.0/0")
    with pytest.raises(ValueError, match="replicas"):
        ServerInfraSpec(replicas=0)
    with pytest.raises(ValueError, match="cron"):
        ServerInfraSpec(reaper_schedule="nightly")


def test_the_program_imports_nothing_from_launcher() -> None:
    tree = ast.parse((REPO / "infra" / "server_program.py").read_text())
    names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + [
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    ]
    assert names and not [n for n in names if n and n.split(".")[0] == "launcher"]


def test_cli_preview_dry_run_and_up_without_pulumi(tmp_path) -> None:
    from tests.conftest import run_cli

    r = run_cli("infra", "server", "preview", "--api-cidr", "10.1.0.0/16", "--replicas", "3", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("aws:ec2/instance:Instance") == 3 and "aws:rds/instance:Instance" in r.stdout
    r = run_cli("infra", "server", "up", "--api-cidr", "10.1.0.0/16", env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 5 and "needs the Pulumi CLI" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("infra", "server", "preview", "--api-cidr", "0.0.0.0/0", "--dry-run")
    assert r.returncode == 2 and r.stderr.startswith("error: api_cidr must not open the API to the whole internet")
