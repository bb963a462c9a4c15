"""Pulumi stacks as the rest of the launcher reaches them: infra/ is imported only by providers
(tags aside: launcher uses infra.tags directly). `launcher infra` (a cluster's stack), the plan's
preflight and resource plan, and the reaper's stack teardown call these; infra's errors pass
through unchanged (the CLI maps them once, launcher.errors.as_launcher_error).

infra and the Pulumi SDK are imported inside each function: they are heavy and optional.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher import paths

OnOutput = Callable[[str], None] | None


# ---- checks (no Pulumi SDK needed) -------------------------------------------------------------


def require_pulumi(action: str) -> None:
    """ToolMissing (infra's error) with an install hint when the Pulumi CLI is not on PATH."""
    from infra.cli_check import require_pulumi as require

    require(action)


def pulumi_found() -> bool:
    from infra.cli_check import find_pulumi

    return find_pulumi() is not None


def ssh_public_key(path: Path | str | None = None) -> str | None:
    """The SSH public key a cluster gets (the given file, else ~/.ssh/id_ed25519.pub or id_rsa.pub)."""
    from infra.spec import read_public_key

    return read_public_key(path)


# ---- a cluster's stack ----------------------------------------------------------------------------


def cluster_spec(*, aws_endpoint: str | None = None, **fields: Any):
    """infra's ClusterInfraSpec.build from its fields (validated there); `aws_endpoint`: point
    the Pulumi AWS provider at that endpoint (e.g. moto_server)."""
    from infra.spec import AwsProviderSettings, ClusterInfraSpec

    if aws_endpoint:
        fields["aws"] = AwsProviderSettings.for_endpoint(aws_endpoint)
    return ClusterInfraSpec.build(**fields)


def resource_plan(spec) -> list:
    """What `up` would create, from the program under Pulumi's mocks (no CLI, no cloud)."""
    from infra.plan import resource_plan as plan

    return plan(spec)


def plan_document(spec, resources: list) -> dict[str, Any]:
    from infra.plan import plan_document as document

    return document(spec, resources)


def preview(spec, on_output: OnOutput = None):
    from infra import stacks

    return stacks.preview(spec, state_home=paths.home(), on_output=on_output)


def up(spec, on_output: OnOutput = None):
    from infra import stacks

    return stacks.up(spec, state_home=paths.home(), on_output=on_output)


def destroy(project: str, cluster: str, on_output: OnOutput = None) -> bool:
    """`pulumi destroy` and remove the stack; False when there was none (already gone = success)."""
    from infra import stacks

    return stacks.destroy(project, cluster, state_home=paths.home(), on_output=on_output)


def stack_name(project: str, cluster: str) -> str:
    from infra import naming

    return naming.stack_name(project, cluster)


def list_stacks() -> list:
    from infra import stacks

    return stacks.list_stacks(paths.home())


def backend_url() -> str:
    from infra import stacks

    return stacks.backend_url(paths.home())
