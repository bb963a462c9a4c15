"""Builders for infra tests: a full tag set and cluster specs (no cloud, no CLI)."""

from __future__ import annotations

from datetime import UTC, datetime

from infra.spec import ClusterInfraSpec
from infra.tags import TagInput, build_tags

NOW = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)
PUBKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly test@example"
CIDR = "203.0.113.7/32"


def make_tags(cluster: str = "c1", project: str = "vision", **over) -> dict[str, str]:
    fields = dict(
        project=project, experiment="ft-3", owner="Alice@Example.com", cost_center="CC-1234",
        run_id="r-01", cluster=cluster, ttl_hours=6,
    )
    fields.update(over)
    return build_tags(TagInput(**fields), now=NOW)


def make_spec(cloud: str = "aws", **over) -> ClusterInfraSpec:
    base = dict(
        cloud=cloud, project="vision", cluster="c1",
        region="us-east-1" if cloud == "aws" else "us-central1",
        zone="us-east-1a" if cloud == "aws" else "us-central1-a",
        instance_type="p3.2xlarge" if cloud == "aws" else "n1-standard-8",
        accelerator="V100", accelerator_count=1, num_nodes=1, spot=True,
        ssh_public_key=PUBKEY, ssh_allowed_cidr=CIDR,
    )
    base.update(over)
    base.setdefault("tags", make_tags(cluster=base["cluster"], project=base["project"]))
    return ClusterInfraSpec.build(**base)

