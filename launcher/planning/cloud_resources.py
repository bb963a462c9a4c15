"""What a launch on a cloud would create, before anything is created.

* `cloud_tags(loaded, plan, run_id=, created_at=)`: the tag set the first cluster of the run
  carries (`planning.tags.run_tags` plus `cluster`), or None when the plan holds no cloud
  offer. Refuses (BadInputError, exit 2) when the spec leaves a cost-allocation tag to a
  default: `project`, `owner` and `cost_center` must be written in the `launcher:` block and the
  experiment must come from `launcher.experiment` or the task's `name` (defaults such as the
  login name or "default" would put made-up owners on the bill), and when a tag breaks the
  clouds' tag/label rules.
* `chosen_resource_plan(loaded, plan, tags, ssh_cidr=)`: the Pulumi resource plan of the chosen
  offer's cluster, computed from the real program under Pulumi mocks (`infra.plan`): no
  Pulumi CLI, no credentials, no cloud call, nothing written. It builds the stack spec the way
  `providers.stack_backed.provision_stack` does for a real launch.
* `dry_run_document(plan, resources)`: both plans as one JSON-ready document.

Pulumi and the provider SDKs are imported only inside `chosen_resource_plan` (seconds).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from launcher.errors import BadInputError
from launcher.planning.plan import Plan, plan_to_dict
from launcher.spec.loader import LoadedSpec
from pricing.clouds import STACK_CLOUDS



def first_cluster_name(run_id: str) -> str:
    """The controller names attempt N's cluster `<run-id>-c<N>`; a launch starts with attempt 1."""
    return f"{run_id}-c1"


def missing_spec_tags(loaded: LoadedSpec) -> list[str]:
    """Cost-allocation tags the spec does not set itself (a cloud launch refuses them)."""
    lb = loaded.spec.launcher
    missing = []
    if "project" not in lb.model_fields_set or not lb.project.strip():
        missing.append("project")
    if not (lb.experiment or loaded.spec.name or "").strip():
        missing.append("experiment")
    if not (lb.owner or "").strip():
        missing.append("owner")
    if not (lb.cost_center or "").strip():
        missing.append("cost-center")
    return missing


_SPEC_KEY = {"project": "project", "experiment": "experiment", "owner": "owner", "cost-center": "cost_center"}


def require_spec_tags(loaded: LoadedSpec) -> None:
    """BadInputError naming the mandatory tags a cloud launch needs and the spec lacks."""
    missing = missing_spec_tags(loaded)
    if missing:
        names = [f"`{_SPEC_KEY[m]}:`" for m in missing]
        keys = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        where = f" in {loaded.path}" if loaded.path else ""
        raise BadInputError(
            f"refused: a cloud launch tags every billable resource, and the spec does not set these "
            f"mandatory tags: {', '.join(missing)}",
            hint=f"add {keys} under `launcher:`{where} (experiment may also come from the task's `name:`)",
        )


def cloud_tags(loaded: LoadedSpec, plan: Plan, *, run_id: str, created_at: datetime) -> dict[str, str] | None:
    """The first cluster's tags when the plan holds a cloud offer (see module docstring), else None."""
    # Clusters the user declared bill nothing of ours: no mandatory tags there.
    clouds = {c.scored.offer.cloud for c in plan.candidates if not c.scored.offer.instance_type.startswith("cluster:")} - {"local"}
    if not clouds:
        return None
    require_spec_tags(loaded)
    from infra.tags import cluster_tags, to_gcp_labels, validate_tags
    from launcher.planning.tags import run_tags

    tags = cluster_tags(run_tags(loaded, run_id, created_at), cluster=first_cluster_name(run_id), run_id=run_id)
    validate_tags(tags)
    if "gcp" in clouds:
        to_gcp_labels(tags)  # refuses keys that collide once sanitized
    return tags


@dataclass(frozen=True)
class CloudResourcePlan:
    """The chosen offer's stack (`spec`, `resources`), or why there is none (`note`)."""

    cloud: str
    spec: Any = None  # infra.spec.ClusterInfraSpec
    resources: tuple = ()  # infra.plan.PlannedResource, declaration order
    note: str | None = None
    deploy_needs: tuple[str, ...] = field(default_factory=tuple)  # what a real `up` still needs

    def document(self) -> dict[str, Any] | None:
        if self.spec is None:
            return None
        from launcher.providers.stacks import plan_document

        return plan_document(self.spec, list(self.resources))


def chosen_resource_plan(
    loaded: LoadedSpec,
    plan: Plan,
    tags: Mapping[str, str] | None,
    *,
    ssh_cidr: str | None = None,
    env: Mapping[str, str] | None = None,
) -> CloudResourcePlan:
    offer = plan.chosen.scored.offer
    if offer.cloud == "local":
        return CloudResourcePlan("local", note="the local backend runs on this machine: no cloud resources, no Pulumi stack")
    if offer.instance_type.startswith("cluster:"):
        return CloudResourcePlan(offer.cloud, note=f"{offer.cloud}/{offer.region} is a cluster you declared: SkyPilot launches the job there, no cloud resources, no Pulumi stack")
    if offer.cloud not in STACK_CLOUDS:
        return CloudResourcePlan(offer.cloud, note=f"no Pulumi program for {offer.cloud} (have: {', '.join(STACK_CLOUDS)})")
    assert tags is not None, "cloud_tags() gives the tags of a plan with a cloud offer"
    from launcher.providers.base import ClusterRequest
    from launcher.providers.stack_backed import infra_spec_for
    from launcher.providers.stacks import resource_plan

    request = ClusterRequest(
        cluster=tags["cluster"], offer=offer, num_nodes=plan.num_nodes, tags=dict(tags),
        disk_size_gib=loaded.spec.resources.disk_size, ssh_allowed_cidr=ssh_cidr,
    )  # fmt: skip
    spec = infra_spec_for(request, env=os.environ if env is None else env)
    needs = []
    if not spec.ssh_allowed_cidr:
        needs.append("--ssh-cidr (or LAUNCHER_SSH_CIDR): the network allowed to SSH in")
    if not spec.ssh_public_key:
        needs.append("an SSH public key at ~/.ssh/id_ed25519.pub or ~/.ssh/id_rsa.pub")
    return CloudResourcePlan(offer.cloud, spec=spec, resources=tuple(resource_plan(spec)), deploy_needs=tuple(needs))


def dry_run_document(plan: Plan, resources: CloudResourcePlan) -> dict[str, Any]:
    """`launch --dry-run --json`: the ranked plan and the chosen offer's resource plan."""
    from launcher.planning.plan import offer_label

    chosen = plan.chosen.scored
    return {
        "dry_run": True,
        "chosen": {
            "offer": offer_label(chosen.offer),
            "cloud": chosen.offer.cloud,
            "expected_cost_usd": plan.expected_cost_usd,
            "expected_hours": plan.expected_hours,
            "work_hours": plan.work_hours,
            "credentials_found": chosen.offer.cloud not in plan.clouds_without_credentials,
        },
        "plan": plan_to_dict(plan),
        "resource_plan": resources.document(),
        "resource_plan_note": resources.note,
        "deploy_needs": list(resources.deploy_needs),
    }
