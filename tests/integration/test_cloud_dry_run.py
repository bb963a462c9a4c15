"""`launch SPEC --cloud aws|gcp --dry-run` through the real CLI entry point (subprocesses):
the ranked plan plus the chosen offer's Pulumi resource plan (computed from the real program
under Pulumi mocks), without credentials or the Pulumi CLI; the same with moto credentials
(provider enabled, nothing created in moto, nothing written); refusal of a spec that lacks
mandatory tags; a real launch of a cloud without credentials (exit 4, nothing written)."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from launcher.providers.base import REQUIRED_TAGS
from tests.cli.launch_helpers import clean_env, state_files  # noqa: F401  (clean_env is a fixture)
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.usefixtures("clean_env")

TRAIN = str(REPO / "task_specs" / "train.yaml")
# What task_specs/train.yaml says; the tags must carry exactly these values.
SPEC_TAGS = {"project": "examples", "experiment": "digits", "owner": "ml-team", "cost-center": "research"}
DEADLINE = timedelta(hours=6)  # train.yaml `deadline: 6h` -> expires-at = created-at + 6 h
TS = "%Y-%m-%dT%H:%M:%SZ"


def _dry_run_json(cloud: str) -> dict:
    r = run_cli("launch", TRAIN, "--cloud", cloud, "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _check_tag_values(tags: dict) -> None:
    """The run's tag set: the spec's values, our generated ones, consistent with each other."""
    assert set(REQUIRED_TAGS) <= set(tags)
    assert {k: tags[k] for k in SPEC_TAGS} == SPEC_TAGS
    assert tags["managed-by"] == "gpu-launcher"
    assert re.fullmatch(r"r-\d{8}-\d{6}-[0-9a-f]{6}", tags["run-id"]), tags["run-id"]
    assert tags["cluster"] == tags["run-id"] + "-c1"  # the controller's first cluster of the run
    created, expires = (datetime.strptime(tags[k], TS) for k in ("created-at", "expires-at"))
    assert expires - created == DEADLINE


def _check_ranked(doc: dict, cloud: str) -> list[dict]:
    cands = doc["plan"]["candidates"]
    assert cands and {c["scored"]["offer"]["cloud"] for c in cands} == {cloud}
    costs = [c["scored"]["expected_cost_usd"] for c in cands]
    assert costs == sorted(costs)  # best expected cost first
    assert [c["scored"]["rank"] for c in cands] == list(range(1, len(cands) + 1))
    chosen = cands[0]["scored"]["offer"]
    assert chosen["accelerator"] in ("T4", "L4") and chosen["accelerator_count"] == 1
    return cands


def _billable(doc: dict) -> list[dict]:
    res = doc["resource_plan"]["resources"]
    billable = [r for r in res if r["billable"]]
    kinds = {r["type"].split(":")[-1] for r in billable}
    assert {"Instance", "Bucket"} <= kinds, kinds
    return billable


def test_aws_dry_run_without_credentials_prints_ranked_and_resource_plan(launcher_home, tmp_path):
    # train.yaml expects a realistic 0.01 h (its CPU run); 0.5 h shows the checkpoint arithmetic.
    text = Path(TRAIN).read_text()
    assert "  expected_hours: 0.01" in text and "workdir: .\n" in text
    spec = tmp_path / "train.yaml"
    spec.write_text(re.sub(r"  expected_hours: 0\.01.*", "  expected_hours: 0.5", text)
                    .replace("workdir: .\n", f"workdir: {Path(TRAIN).parent}\n"))
    r = run_cli("launch", str(spec), "--cloud", "aws", "--dry-run")
    assert r.returncode == 0, r.stderr
    err = r.stderr
    assert r.stdout == ""  # launch keeps stdout for the job's output
    assert "Plan for 'train-digits' (1 node):" in err
    chosen = next(line for line in err.splitlines() if line.startswith("  chosen:"))
    assert chosen.split()[1].startswith("aws/") and chosen.endswith("[no credentials]")
    # 0.5 h of work with a 2 s checkpoint every minute: 30 saves = 0.017 h of overhead.
    assert "over 0.52 h (work 0.5 h + checkpoints 0.02 h (every 1 min);" in err
    assert "aws: no credentials found — a real launch would refuse: looked in env AWS_ACCESS_KEY_ID" in err
    assert "computed from the program under Pulumi mocks (nothing deployed)" in err
    assert "aws:ec2/instance:Instance" in err and "market=spot/one-time/terminate" in err
    for value in SPEC_TAGS.values():
        assert f"│ {value} " in err  # the tag table
    assert "a real launch also needs --ssh-cidr" in err
    assert "dry run: nothing was launched or recorded" in err
    assert state_files(launcher_home) == []

    doc = _dry_run_json("aws")
    cands = _check_ranked(doc, "aws")
    assert doc["chosen"]["credentials_found"] is False
    (access,) = doc["plan"]["credentials"]
    assert access["cloud"] == "aws" and not access["enabled"] and "AWS_ACCESS_KEY_ID" in access["source"]
    rp = doc["resource_plan"]
    offer = cands[0]["scored"]["offer"]
    assert (rp["cloud"], rp["region"], rp["zone"], rp["spot"]) == ("aws", offer["region"], offer["zone"], offer["spot"])
    _check_tag_values(rp["tags"])
    for res in _billable(doc):
        assert rp["tags"].items() <= res["tags"].items(), res["type"]
        if res["type"] == "aws:ec2/instance:Instance":
            assert res["inputs"]["instanceType"] == offer["instance_type"]
            assert rp["tags"].items() <= res["inputs"]["rootBlockDevice"]["tags"].items()  # the root volume too
    assert state_files(launcher_home) == []


def test_gcp_dry_run_without_credentials_shows_sanitized_labels(launcher_home):
    from infra.tags import is_valid_gcp_label

    doc = _dry_run_json("gcp")
    cands = _check_ranked(doc, "gcp")
    rp = doc["resource_plan"]
    assert rp["cloud"] == "gcp" and rp["zone"] == cands[0]["scored"]["offer"]["zone"]
    _check_tag_values(rp["tags"])
    labels = rp["labels"]
    tags = rp["tags"]
    # By hand: train.yaml's values are valid labels already; run-id and cluster are lowercase
    # `r-<date>-<time>-<hex>`; the timestamps' `T`, `:` and `Z` become `t`, `-` and `z`.
    assert labels == {
        "project": "examples", "experiment": "digits", "owner": "ml-team", "cost-center": "research",
        "managed-by": "gpu-launcher", "run-id": tags["run-id"], "cluster": tags["run-id"] + "-c1",
        "created-at": tags["created-at"][:10] + "t" + tags["created-at"][11:19].replace(":", "-") + "z",
        "expires-at": tags["expires-at"][:10] + "t" + tags["expires-at"][11:19].replace(":", "-") + "z",
    }  # fmt: skip
    assert all(is_valid_gcp_label(k, v) for k, v in labels.items())
    assert labels["created-at"] == rp["tags"]["created-at"].lower().replace(":", "-")
    for res in _billable(doc):
        assert labels.items() <= res["tags"].items(), res["type"]
        assert all(is_valid_gcp_label(k, v) for k, v in res["tags"].items())
    inst = next(r for r in doc["resource_plan"]["resources"] if r["type"] == "gcp:compute/instance:Instance")
    assert inst["inputs"]["scheduling"]["provisioningModel"] == "SPOT"
    assert state_files(launcher_home) == []


def test_moto_credentials_enable_aws_and_the_dry_run_touches_nothing(aws_env, launcher_home):
    import boto3

    doc = _dry_run_json("aws")
    (access,) = doc["plan"]["credentials"]
    assert access["enabled"] and doc["chosen"]["credentials_found"] is True
    assert "AWS_ACCESS_KEY_ID" in access["source"] and aws_env in access["source"]  # where they were found
    _check_tag_values(doc["resource_plan"]["tags"])
    # Nothing was created in moto (the regions of the chosen offer and the first fallbacks), and
    # nothing was recorded.
    regions = {c["scored"]["offer"]["region"] for c in doc["plan"]["candidates"][:6]} | {"us-east-1"}
    for region in sorted(regions):
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=aws_env)
        assert ec2.describe_instances()["Reservations"] == [], region
        assert [v for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")] == [], region
    assert boto3.client("s3", endpoint_url=aws_env).list_buckets()["Buckets"] == []
    assert state_files(launcher_home) == []


def test_spec_without_mandatory_tags_is_refused(tmp_path, aws_env, launcher_home):
    text = (REPO / "task_specs" / "train.yaml").read_text()
    text = re.sub(r"^  (owner|cost_center): .*\n", "", text, flags=re.M)
    spec = tmp_path / "train.yaml"
    spec.write_text(text)
    shutil.copy(REPO / "task_specs" / "train.py", tmp_path / "train.py")
    for extra in (["--dry-run"], ["--dry-run", "--json"], ["--yes"]):
        r = run_cli("launch", str(spec), "--cloud", "aws", *extra)
        assert r.returncode == 2, (extra, r.stderr)
        assert "mandatory tags: owner, cost-center" in r.stderr
        assert "add `owner:` and `cost_center:` under `launcher:`" in r.stderr
        assert "resource plan" not in r.stderr and r.stdout == ""
    assert state_files(launcher_home) == []
    # The local backend creates no tagged resources: the same spec may run there.
    r = run_cli("launch", str(spec), "--cloud", "local", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "resources: the local backend runs on this machine: no cloud resources, no Pulumi stack" in r.stderr


@pytest.mark.parametrize("cloud, looked", [("aws", "env AWS_ACCESS_KEY_ID"), ("gcp", "GOOGLE_APPLICATION_CREDENTIALS")])
def test_real_launch_without_credentials_exits_4_and_writes_nothing(cloud, looked, launcher_home):
    r = run_cli("launch", TRAIN, "--cloud", cloud, "--yes")
    assert r.returncode == 4, r.stderr
    assert f"--cloud {cloud} has no credentials" in r.stderr and looked in r.stderr
    assert "Plan for" not in r.stderr  # refused before planning, let alone provisioning
    assert state_files(launcher_home) == []


# ---- the planning pieces in-process (no subprocess, no Pulumi) ---------------------------------


def _statuses(aws_enabled: bool):
    from launcher.providers.base import CredentialStatus

    src = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY" if aws_enabled else "no credentials (env AWS_ACCESS_KEY_ID, /h/.aws/credentials)"
    return {"aws": CredentialStatus("aws", aws_enabled, src), "gcp": CredentialStatus("gcp", False, "no credentials (x)")}


def test_dry_run_plan_ranks_a_forced_cloud_without_credentials_and_a_launch_refuses():
    from launcher.errors import CredentialsError, ExitCode
    from launcher.planning import CloudAccess, Overrides, make_plan, plan_from_dict, plan_to_dict
    from launcher.spec import load_spec

    loaded = load_spec(TRAIN)
    plan = make_plan(loaded, overrides=Overrides(clouds=("aws",)), statuses=_statuses(False), dry_run=True)
    assert plan.chosen.scored.offer.cloud == "aws"
    assert plan.clouds_without_credentials == ("aws",) and plan.launchable == ()
    assert plan.credentials == (CloudAccess("aws", False, "looked in env AWS_ACCESS_KEY_ID, /h/.aws/credentials"),)
    assert plan_from_dict(json.loads(json.dumps(plan_to_dict(plan)))).credentials == plan.credentials
    with pytest.raises(CredentialsError, match="looked in env AWS_ACCESS_KEY_ID") as e:
        make_plan(loaded, overrides=Overrides(clouds=("aws",)), statuses=_statuses(False))
    assert e.value.exit_code == ExitCode.CREDENTIALS
    # With credentials, the dry run and the launch rank the same offers, and say where they were found.
    on = make_plan(loaded, overrides=Overrides(clouds=("aws",)), statuses=_statuses(True))
    assert on.launchable == on.candidates and on.credentials[0].source == "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
    assert [c.scored for c in on.candidates] == [c.scored for c in plan.candidates]


def test_missing_spec_tags_names_what_the_spec_leaves_to_defaults():
    from launcher.planning.cloud_resources import missing_spec_tags
    from launcher.spec import load_spec_text

    assert missing_spec_tags(load_spec_text("run: x\n")) == ["project", "experiment", "owner", "cost-center"]
    named = load_spec_text("name: n\nrun: x\nlauncher: {project: p, owner: o}\n")
    assert missing_spec_tags(named) == ["cost-center"]  # the experiment tag falls back to the name


def test_forced_cloud_without_credentials_is_a_credentials_error_in_build_plan_too():
    from launcher.errors import CredentialsError
    from launcher.planning import Overrides, build_plan
    from launcher.providers.local import LocalProvider
    from launcher.spec import load_spec

    def never(query):
        raise AssertionError("no cloud is usable: nothing to rank")

    with pytest.raises(CredentialsError, match="aws has no credentials"):
        build_plan(load_spec(TRAIN), enabled={"aws": False, "gcp": True}, local_offer=LocalProvider().offer(),
                   rank_cloud=never, overrides=Overrides(clouds=("aws",)))  # fmt: skip


def test_json_needs_dry_run(launcher_home, capsys):
    from tests.cli.launch_helpers import cli_inproc

    code, out, err = cli_inproc(capsys, "launch", TRAIN, "--json", "--yes")
    assert code == 2 and "--json goes with --dry-run" in err and out == ""
    assert state_files(launcher_home) == []


def test_tags_are_checked_before_the_plan_is_printed_and_name_the_characters(tmp_path, launcher_home):
    text = (REPO / "task_specs" / "train.yaml").read_text()
    bad = re.sub(r"^  owner: .*\n", "  owner: \"Zoë O'Brien\"\n", text, flags=re.M)
    assert bad != text
    spec = tmp_path / "train.yaml"
    spec.write_text(bad)
    shutil.copy(REPO / "task_specs" / "train.py", tmp_path / "train.py")
    r = run_cli("launch", str(spec), "--cloud", "aws", "--dry-run")
    assert r.returncode == 2, r.stderr
    assert "owner=\"Zoë O'Brien\" has \"'\" (not allowed)" in r.stderr, r.stderr
    assert "letters of any language" in r.stderr and "lowercased" in r.stderr
    assert "expected $" not in r.stderr and "rank" not in r.stderr.lower() and r.stdout == ""  # nothing of the plan
    assert state_files(launcher_home) == []
    # A letter of any language is a valid AWS tag value: the same owner without the apostrophe passes.
    spec.write_text(re.sub(r"^  owner: .*\n", "  owner: \"Zoë OBrien\"\n", text, flags=re.M))
    r = run_cli("launch", str(spec), "--cloud", "aws", "--dry-run")
    assert r.returncode == 0, r.stderr
