"""The team server's Pulumi program (AWS): `launcher server` replicas on small VMs, a managed
PostgreSQL (RDS) for the shared ledger, and the nightly reaper as a cron job on the first VM.

Everything billable carries the project tags plus `managed-by=gpu-launcher`. RDS manages the
database password in Secrets Manager (`manage_master_user_password`): it never appears in this
program, the stack state or the VMs' user data; the VMs read it at boot through their IAM role.
Imports nothing from `launcher`: the CLI builds a ServerInfraSpec and runs this program.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

MANAGED_BY = {"managed-by": "gpu-launcher"}
SERVER_PORT = 8470
PULUMI_PROJECT = "gpu-launcher"


@dataclass(frozen=True)
class ServerInfraSpec:
    """What `launcher infra server up` deploys."""

    region: str = "us-east-1"
    project: str = "platform"
    replicas: int = 2
    instance_type: str = "t3.small"
    db_instance_class: str = "db.t4g.micro"
    db_storage_gib: int = 20
    api_cidr: str = "10.0.0.0/8"  # who may reach the API (a VPN / office range, never 0.0.0.0/0 by default)
    reaper_schedule: str = "17 3 * * *"  # cron, UTC
    lease_seconds: int = 30
    launcher_package: str = "gpu-launcher[all]"
    image_id: str | None = None  # default: the newest Amazon Linux 2023 AMI
    tags: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 1 <= self.replicas <= 10:
            raise ValueError("replicas must be between 1 and 10")
        if self.api_cidr.strip() in ("0.0.0.0/0", "::/0"):
            raise ValueError("api_cidr must not open the API to the whole internet")
        if len(self.reaper_schedule.split()) != 5:
            raise ValueError(f"reaper_schedule {self.reaper_schedule!r} is not a 5-field cron expression")

    @property
    def stack_name(self) -> str:
        return f"{self.project}.server"

    def all_tags(self) -> dict[str, str]:
        return {"project": self.project, "component": "launcher-server", **self.tags, **MANAGED_BY}


def user_data(spec: ServerInfraSpec, *, secret_arn: str, db_host: str, rank: int) -> str:
    """Boot script: install the launcher, build LAUNCHER_DB_URL from the RDS-managed secret, run
    `launcher server` as a service; the first VM also runs the nightly reaper."""
    reaper = (
        f'echo "{spec.reaper_schedule} root /opt/launcher/bin/launcher reap --yes >> /var/log/launcher-reap.log 2>&1" '
        "> /etc/cron.d/launcher-reap\n"
        if rank == 0
        else ""
    )
    return (
        "#!/bin/bash\nset -euo pipefail\n"
        "dnf install -y python3.11 python3.11-pip jq cronie && systemctl enable --now crond\n"
        f"python3.11 -m venv /opt/launcher && /opt/launcher/bin/pip install {shlex.quote(spec.launcher_package)}\n"
        f"SECRET=$(aws secretsmanager get-secret-value --region {spec.region} --secret-id {shlex.quote(secret_arn)} --query SecretString --output text)\n"
        'USER=$(echo "$SECRET" | jq -r .username); PASS=$(echo "$SECRET" | jq -rj .password | jq -sRr @uri)\n'
        "install -d -m 0700 /etc/launcher\n"
        f'umask 077; echo "LAUNCHER_DB_URL=postgresql+psycopg://$USER:$PASS@{db_host}:5432/postgres?sslmode=require" > /etc/launcher/env\n'
        "cat > /etc/systemd/system/launcher-server.service <<'EOF'\n"
        "[Unit]\nDescription=launcher server\nAfter=network-online.target\n"
        "[Service]\nEnvironmentFile=/etc/launcher/env\nEnvironment=LAUNCHER_HOME=/var/lib/launcher\n"
        f"ExecStart=/opt/launcher/bin/launcher server --host 0.0.0.0 --port {SERVER_PORT} --lease-seconds {spec.lease_seconds}\n"
        "Restart=always\n[Install]\nWantedBy=multi-user.target\nEOF\n"
        "systemctl daemon-reload && systemctl enable --now launcher-server\n" + reaper
    )


def server_program(spec: ServerInfraSpec) -> None:
    """The inline Pulumi program (run by the Automation API, or under mocks in tests)."""
    import pulumi
    import pulumi_aws as aws

    tags = spec.all_tags()
    provider = aws.Provider("aws", region=spec.region)
    opts = pulumi.ResourceOptions(provider=provider)
    api_sg = aws.ec2.SecurityGroup(
        "launcher-server",
        description="launcher server API",
        ingress=[aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=SERVER_PORT, to_port=SERVER_PORT, cidr_blocks=[spec.api_cidr])],
        egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0, cidr_blocks=["0.0.0.0/0"])],
        tags=tags,
        opts=opts,
    )
    db_sg = aws.ec2.SecurityGroup(
        "launcher-ledger",
        description="ledger PostgreSQL, reachable from the server only",
        ingress=[aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=5432, to_port=5432, security_groups=[api_sg.id])],
        tags=tags,
        opts=opts,
    )
    db = aws.rds.Instance(
        "launcher-ledger",
        engine="postgres",
        engine_version="16",
        instance_class=spec.db_instance_class,
        allocated_storage=spec.db_storage_gib,
        storage_encrypted=True,
        username="launcher",
        manage_master_user_password=True,
        publicly_accessible=False,
        vpc_security_group_ids=[db_sg.id],
        backup_retention_period=7,
        skip_final_snapshot=False,
        final_snapshot_identifier=f"{spec.project}-launcher-ledger-final",
        tags=tags,
        opts=opts,
    )
    secret_arn = db.master_user_secrets.apply(lambda s: s[0]["secret_arn"] if s else "")
    role = aws.iam.Role(
        "launcher-server",
        assume_role_policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
        }),  # fmt: skip
        tags=tags,
        opts=opts,
    )
    aws.iam.RolePolicy(
        "launcher-server-read-db-secret",
        role=role.id,
        policy=secret_arn.apply(lambda arn: json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": arn or "*"}],
        })),  # fmt: skip
        opts=opts,
    )
    profile = aws.iam.InstanceProfile("launcher-server", role=role.name, tags=tags, opts=opts)
    ami = spec.image_id or aws.ec2.get_ami(
        most_recent=True, owners=["amazon"], filters=[aws.ec2.GetAmiFilterArgs(name="name", values=["al2023-ami-2023.*-x86_64"])],
        opts=pulumi.InvokeOptions(provider=provider),
    ).id  # fmt: skip
    urls = []
    for rank in range(spec.replicas):
        vm = aws.ec2.Instance(
            f"launcher-server-{rank}",
            ami=ami,
            instance_type=spec.instance_type,
            vpc_security_group_ids=[api_sg.id],
            iam_instance_profile=profile.name,
            user_data=pulumi.Output.all(secret_arn, db.address).apply(
                lambda a, r=rank: user_data(spec, secret_arn=a[0], db_host=a[1], rank=r)
            ),
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
            tags={**tags, "Name": f"launcher-server-{rank}", "role": "reaper" if rank == 0 else "server"},
            opts=opts,
        )
        urls.append(vm.private_ip.apply(lambda ip: f"http://{ip}:{SERVER_PORT}"))
    pulumi.export("server_urls", pulumi.Output.all(*urls))
    pulumi.export("ledger_endpoint", db.address)
