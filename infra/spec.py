"""What a cluster stack is made from: a typed, validated `ClusterInfraSpec` (no globals).

Programs (aws_program, gcp_program) read only this object. `from_offer` builds it from a ranked
pricing Offer; the CLI builds it from flags. Validation (tags, CIDR, counts) happens here, before
any program runs, so bad input never reaches a cloud.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from infra import naming
from infra.tags import validate_tags
from infra.errors import InfraInputError

Cloud = Literal["aws", "gcp"]

# Shown in plans where `up` needs a value the caller has not given yet.
MISSING_CIDR = "<required for up: --ssh-cidr>"
MISSING_PUBLIC_KEY = "<required for up: --ssh-public-key>"


class AwsProviderSettings(BaseModel):
    """Extra AWS provider configuration, e.g. for moto: endpoints={'ec2': URL, 's3': URL, ...}."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoints: dict[str, str] = Field(default_factory=dict)
    skip_credentials_validation: bool = False
    skip_requesting_account_id: bool = False
    s3_use_path_style: bool = False

    @classmethod
    def for_endpoint(cls, url: str, services: tuple[str, ...] = ("ec2", "s3", "sts", "iam")) -> AwsProviderSettings:
        """One endpoint for every service (moto_server), with the account/credential checks off."""
        return cls(
            endpoints={s: url for s in services},
            skip_credentials_validation=True,
            skip_requesting_account_id=True,
            s3_use_path_style=True,
        )


class ClusterInfraSpec(BaseModel):
    """One cluster: where, what, how many, spot or not, who pays (tags), who may SSH in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cloud: Cloud
    project: str = Field(description="the project tag; with `cluster` it names the stack")
    cluster: str
    region: str
    zone: str | None = None
    instance_type: str
    accelerator: str | None = None
    accelerator_count: int = Field(0, ge=0)
    num_nodes: int = Field(1, ge=1, le=64)
    spot: bool = True
    disk_size_gib: int = Field(200, ge=10, le=16384)
    disk_type: str | None = None  # default gp3 (AWS) / pd-balanced (GCP)
    image_id: str | None = None  # default: a deep-learning image looked up at deploy time
    ssh_user: str = "ubuntu"
    ssh_public_key: str | None = None
    ssh_allowed_cidr: str | None = None
    tags: dict[str, str]
    checkpoint_bucket: bool = True
    checkpoint_bucket_name: str | None = None  # default: naming.bucket_name(project, cluster)
    bucket_force_destroy: bool = False  # delete the bucket even when it holds checkpoints
    retain_bucket_on_destroy: bool = True  # keep checkpoints when the cluster stack is destroyed
    spot_termination_action: Literal["DELETE", "STOP"] = "DELETE"  # GCP only
    gcp_project: str | None = None  # default: the provider's own configuration
    aws: AwsProviderSettings = Field(default_factory=AwsProviderSettings)

    @field_validator("checkpoint_bucket_name")
    @classmethod
    def _bucket(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", v):
            raise ValueError(f"bucket name {v!r}: 3-63 lowercase letters, digits and '-', not starting/ending with '-'")
        return v

    @field_validator("ssh_allowed_cidr")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            net = ipaddress.ip_network(v, strict=False)
        except ValueError as e:
            raise ValueError(f"not a CIDR: {v!r} (expected e.g. 203.0.113.7/32)") from e
        return str(net)

    @model_validator(mode="after")
    def _check(self) -> ClusterInfraSpec:
        validate_tags(self.tags)
        if self.tags["project"] != self.project or self.tags["cluster"] != self.cluster:
            raise ValueError("tags project/cluster must equal the spec's project/cluster")
        if self.cloud == "gcp" and not self.zone:
            raise ValueError("GCP instances need a zone")
        if (self.accelerator is None) != (self.accelerator_count == 0):
            raise ValueError("give both accelerator and accelerator_count, or neither")
        return self

    @classmethod
    def build(cls, **fields) -> ClusterInfraSpec:
        """Construct, turning pydantic's errors into one InfraInputError."""
        try:
            return cls(**fields)
        except ValidationError as e:
            parts = []
            for err in e.errors():
                loc = ".".join(str(x) for x in err["loc"])
                msg = err["msg"].removeprefix("Value error, ")
                parts.append(f"{loc}: {msg}" if loc else msg)
            raise InfraInputError("bad cluster spec: " + "; ".join(parts)) from None

    @classmethod
    def from_offer(
        cls,
        offer,
        *,
        num_nodes: int,
        tags: dict[str, str],
        ssh_public_key: str | None = None,
        ssh_allowed_cidr: str | None = None,
        **overrides,
    ) -> ClusterInfraSpec:
        """From a `pricing.models.Offer` (cloud aws|gcp) and a tag set from `infra.tags.build_tags`."""
        if offer.cloud not in ("aws", "gcp"):
            raise InfraInputError(f"no Pulumi program for cloud {offer.cloud!r} (have: aws, gcp)")
        fields = dict(
            cloud=offer.cloud,
            project=tags.get("project", ""),
            cluster=tags.get("cluster", ""),
            region=offer.region,
            zone=offer.zone,
            instance_type=offer.instance_type,
            accelerator=offer.accelerator if offer.accelerator_count else None,
            accelerator_count=offer.accelerator_count if offer.accelerator else 0,
            num_nodes=num_nodes,
            spot=offer.spot,
            tags=dict(tags),
            ssh_public_key=ssh_public_key,
            ssh_allowed_cidr=ssh_allowed_cidr,
        )
        fields.update(overrides)  # e.g. zone= for a region-level offer, disk_size_gib=, image_id=
        return cls.build(**fields)

    # ---- derived names ---------------------------------------------------------------------
    @property
    def stack_name(self) -> str:
        return naming.stack_name(self.project, self.cluster)

    @property
    def prefix(self) -> str:
        return naming.resource_prefix(self.project, self.cluster)

    @property
    def bucket_name(self) -> str:
        # Bucket names are global across all accounts; a collision fails `up` with the cloud's
        # "already exists" error, and `checkpoint_bucket_name` (--bucket-name) picks another.
        return self.checkpoint_bucket_name or naming.bucket_name(self.project, self.cluster)

    def require_deployable(self) -> None:
        """What `up`/`preview` need beyond a plan: an SSH key and the CIDR allowed to use it."""
        missing = []
        if not self.ssh_allowed_cidr:
            missing.append("--ssh-cidr (the network allowed to SSH in, e.g. your IP/32)")
        if not self.ssh_public_key:
            missing.append("--ssh-public-key (a public key file)")
        if missing:
            raise InfraInputError("cannot deploy without " + " and ".join(missing))


def read_public_key(path: Path | None) -> str | None:
    """The public key at `path`, or the first of ~/.ssh/id_ed25519.pub, id_rsa.pub; None if none."""
    candidates = [path] if path else [Path.home() / ".ssh" / "id_ed25519.pub", Path.home() / ".ssh" / "id_rsa.pub"]
    for p in candidates:
        p = Path(p).expanduser()
        if p.is_file():
            text = p.read_text().strip()
            if not text.startswith(("ssh-", "ecdsa-")):
                raise InfraInputError(f"{p} does not look like an SSH public key")
            return text
        if path is not None:
            raise InfraInputError(f"no such public key file: {p}")
    return None
