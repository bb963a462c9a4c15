"""`launcher infra server preview|up|destroy`: the server's Pulumi stack (infra/server_program.py)
through the Automation API, with the cluster stacks' backend and passphrase settings. Without the
Pulumi CLI, `preview --dry-run` still lists what would be created (the program under mocks).
Here, with the providers, because infra/ is reached only through them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infra.server_program import PULUMI_PROJECT, ServerInfraSpec, server_program


def server_spec(**fields: Any) -> ServerInfraSpec:
    """infra's ServerInfraSpec (it validates: ValueError on bad input)."""
    return ServerInfraSpec(**fields)


def resource_rows(spec: ServerInfraSpec) -> list[dict[str, Any]]:
    """What `up` would create, computed under mocks (no CLI, no credentials)."""
    from infra.plan import run_under_mocks

    rec = run_under_mocks(lambda: server_program(spec), project=PULUMI_PROJECT, stack=spec.stack_name)
    rows = []
    for typ, name, inputs, _provider in rec.resources:
        if typ.startswith("pulumi:providers:"):
            continue
        tags = inputs.get("tags") or {}
        rows.append({"type": typ, "name": name, "managed_by": tags.get("managed-by"), "project": tags.get("project")})
    return sorted(rows, key=lambda r: (r["type"], r["name"]))


def _stack(spec: ServerInfraSpec, action: str):
    from infra.stacks import open_stack
    from launcher import paths

    def program() -> None:
        server_program(spec)

    return open_stack(spec.stack_name, program, action=action, state_home=paths.home())


def preview(spec: ServerInfraSpec, on_output: Callable[[str], None] | None) -> dict[str, int]:
    from infra.stacks import automation_errors
    from launcher import paths

    stack = _stack(spec, "launcher infra server preview")
    with automation_errors(spec.stack_name, paths.home()):
        result = stack.preview(on_output=on_output, color="never")
    return {str(k): int(v) for k, v in (result.change_summary or {}).items()}


def up(spec: ServerInfraSpec, on_output: Callable[[str], None] | None) -> dict[str, Any]:
    from infra.stacks import automation_errors
    from launcher import paths

    stack = _stack(spec, "launcher infra server up")
    with automation_errors(spec.stack_name, paths.home()):
        result = stack.up(on_output=on_output, color="never")
    return {k: v.value for k, v in result.outputs.items()}


def destroy(spec: ServerInfraSpec, on_output: Callable[[str], None] | None) -> None:
    from infra.stacks import automation_errors
    from launcher import paths

    stack = _stack(spec, "launcher infra server destroy")
    with automation_errors(spec.stack_name, paths.home()):
        stack.destroy(on_output=on_output, color="never", remove=True)
