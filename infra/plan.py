"""The resource plan of a cluster stack, computed without the Pulumi CLI or credentials.

The real program runs in-process under `pulumi.runtime.set_mocks` with a recorder that answers
every resource registration and invoke; what the program asked for (type, name, inputs, tags or
labels, provider) becomes a list of `PlannedResource`. This is what `launch --dry-run` and
`launcher infra preview --dry-run` print. It shows what the program would ask the cloud for, not
what the cloud would answer (computed ids/IPs appear as `<name.id>` placeholders).
"""

from __future__ import annotations

import json
import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infra.spec import ClusterInfraSpec

# Pulumi's runtime settings are process-global; one mock run at a time.
_LOCK = threading.Lock()

BILLABLE_TYPES = frozenset(
    {
        "aws:ec2/instance:Instance",
        "aws:s3/bucket:Bucket",
        "aws:ebs/volume:Volume",
        "gcp:compute/instance:Instance",
        "gcp:compute/disk:Disk",
        "gcp:storage/bucket:Bucket",
    }
)


@dataclass(frozen=True)
class PlannedResource:
    urn: str
    type: str
    name: str
    inputs: dict[str, Any]
    tags: dict[str, str] | None  # AWS tags / GCP labels the program set explicitly
    provider: str | None  # URN-ish reference of the explicit provider, when set
    billable: bool

    def summary(self) -> str:
        """The few inputs a person wants to see in a table row."""
        i = self.inputs
        bits: list[str] = []
        for key in ("instanceType", "machineType", "zone", "availabilityZone", "region", "location",
                    "strategy", "cidrBlock", "bucket", "name"):
            if i.get(key) not in (None, ""):
                bits.append(f"{key}={i[key]}")
        mo = i.get("instanceMarketOptions")
        if mo:
            so = mo.get("spotOptions") or {}
            bits.append(f"market={mo.get('marketType')}/{so.get('spotInstanceType')}/{so.get('instanceInterruptionBehavior')}")
        sched = i.get("scheduling")
        if sched:
            bits.append(f"provisioning={sched.get('provisioningModel')}/{sched.get('instanceTerminationAction', '-')}")
        rbd = i.get("rootBlockDevice")
        if rbd:
            bits.append(f"root={rbd.get('volumeSize')}GiB/{rbd.get('volumeType')}")
        for rule in i.get("ingress") or []:
            src = rule.get("cidrBlocks") or (["self"] if rule.get("self") else [])
            bits.append(f"ingress {rule.get('protocol')}:{rule.get('fromPort')}<-{','.join(src)}")
        if i.get("sourceRanges"):
            bits.append(f"source={','.join(i['sourceRanges'])}")
        return " ".join(bits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn, "type": self.type, "name": self.name, "billable": self.billable,
            "tags": self.tags, "provider": self.provider, "inputs": self.inputs,
        }


@dataclass
class _Recorder:
    """pulumi Mocks: remember every registration; answer with inputs plus placeholder ids."""

    resources: list[tuple[str, str, dict, str | None]] = field(default_factory=list)
    calls: list[tuple[str, dict]] = field(default_factory=list)

    def new_resource(self, args) -> tuple[str, dict]:
        self.resources.append((args.typ, args.name, dict(args.inputs), args.provider))
        state = dict(args.inputs)
        if args.typ == "aws:ec2/instance:Instance":
            state.setdefault("publicIp", f"<{args.name}.public_ip>")
            state.setdefault("privateIp", f"<{args.name}.private_ip>")
        if args.typ.startswith("gcp:") and "name" in args.inputs:
            state.setdefault("selfLink", f"<{args.name}.self_link>")
        return f"<{args.name}.id>", state

    def call(self, args) -> dict:
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:ec2/getAmi:getAmi":
            return {"id": "<latest AMI matching the default name filter>", "imageId": "<latest AMI>"}
        return {}


def _mocks_class():
    import pulumi

    class RecorderMocks(pulumi.runtime.Mocks):
        def __init__(self, recorder: _Recorder) -> None:
            self.recorder = recorder

        def new_resource(self, args):
            return self.recorder.new_resource(args)

        def call(self, args):
            return self.recorder.call(args)

    return RecorderMocks


def run_under_mocks(program: Callable[[], None], *, project: str, stack: str) -> _Recorder:
    """Run a Pulumi program in-process under recording mocks; returns the recorder."""
    import pulumi
    from pulumi.runtime.settings import SETTINGS
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    recorder = _Recorder()
    with _LOCK, warnings.catch_warnings():
        # The provider SDKs warn about their own deprecated aliases as their modules load.
        warnings.simplefilter("ignore", DeprecationWarning)
        pulumi.runtime.set_mocks(_mocks_class()(recorder), project=project, stack=stack, preview=False)
        SETTINGS.rpc_manager.clear()
        SETTINGS.outputs.clear()
        _sync_await(run_pulumi_func(program))
    return recorder


def program_for(spec: ClusterInfraSpec) -> Callable[[], None]:
    """The inline program for the spec's cloud, closed over the spec (no globals)."""
    if spec.cloud == "aws":
        from infra.aws_program import aws_program

        return lambda: aws_program(spec)
    from infra.gcp_program import gcp_program

    return lambda: gcp_program(spec)


# Plan rows in a stable, readable order (registration order under mocks is not deterministic).
_TYPE_ORDER = ("pulumi:providers:", "/vpc:", "/network:", "/internetGateway:", "/subnet", "/routeTable:",
               "/routeTableAssociation:", "/securityGroup:", "/firewall:", "/keyPair:", "/placementGroup:",
               "/resourcePolicy:", "/instance:", "/bucket:")


def _declaration_order(rec: tuple) -> tuple[int, str]:
    typ, name = rec[0], rec[1]
    for i, marker in enumerate(_TYPE_ORDER):
        if marker in typ:
            return i, _natural(name)
    return len(_TYPE_ORDER), _natural(name)


def _natural(name: str) -> str:
    # node-2 before node-10
    return re.sub(r"\d+", lambda m: m.group(0).zfill(6), name)


def _normalize(value: Any) -> Any:
    """Wire numbers are doubles: show 22, not 22.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def resource_plan(spec: ClusterInfraSpec) -> list[PlannedResource]:
    """Every resource the cluster's program declares, in declaration order (providers included)."""
    from infra.naming import PULUMI_PROJECT

    rec = run_under_mocks(program_for(spec), project=PULUMI_PROJECT, stack=spec.stack_name)
    out = []
    for typ, name, inputs, provider in sorted(rec.resources, key=_declaration_order):
        inputs = _normalize(inputs)
        tags = inputs.get("tags") if typ.startswith("aws:") else inputs.get("labels")
        if typ.startswith("pulumi:providers:"):
            # Provider inputs arrive JSON-encoded (provider config is strings on the wire).
            inputs = {k: _maybe_json(v) for k, v in inputs.items()}
            tags = (inputs.get("defaultTags") or {}).get("tags") or inputs.get("defaultLabels")
        out.append(
            PlannedResource(
                urn=f"urn:pulumi:{spec.stack_name}::{PULUMI_PROJECT}::{typ}::{name}",
                type=typ,
                name=name,
                inputs=inputs,
                tags=dict(tags) if isinstance(tags, dict) else None,
                provider=provider.split("::")[-2] if provider and "::" in provider else provider,
                billable=typ in BILLABLE_TYPES,
            )
        )
    return out


def plan_document(spec: ClusterInfraSpec, plan: list[PlannedResource]) -> dict[str, Any]:
    """The plan as one JSON-ready document (what `--dry-run --json` prints)."""
    from infra.naming import PULUMI_PROJECT
    from infra.tags import to_gcp_labels

    doc: dict[str, Any] = {
        "stack": spec.stack_name,
        "pulumi_project": PULUMI_PROJECT,
        "cloud": spec.cloud,
        "region": spec.region,
        "zone": spec.zone,
        "num_nodes": spec.num_nodes,
        "spot": spec.spot,
        "tags": dict(spec.tags),
    }
    if spec.cloud == "gcp":
        doc["labels"] = to_gcp_labels(spec.tags)
    doc["resources"] = [r.to_dict() for r in plan]
    return doc
