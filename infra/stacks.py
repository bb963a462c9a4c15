"""One Pulumi stack per cluster, driven through the Automation API (inline programs).

- Stack name: `infra.naming.stack_name(project, cluster)`, in the Pulumi project `gpu-launcher`.
- State home: every operation takes `state_home`, the folder this library keeps its state in
  (the launcher passes LAUNCHER_HOME).
- Backend: `LAUNCHER_PULUMI_BACKEND` (`s3://bucket/prefix`, `gs://bucket/prefix`, `file:///dir`),
  default `file://<state_home>/pulumi`.
- Secrets: the passphrase provider. `PULUMI_CONFIG_PASSPHRASE` or `PULUMI_CONFIG_PASSPHRASE_FILE`
  from the environment when set; otherwise a generated passphrase in
  `<state_home>/pulumi-passphrase` (mode 0600, created once, never overwritten when non-empty).
  Losing it makes the stack's secrets unreadable; back it up with the state for team backends.
- Every function that needs the Pulumi CLI checks for it FIRST (`infra.cli_check.require_pulumi`)
  and raises ToolMissingError before creating a directory, a passphrase or touching a cloud.
- `list_stacks()` reads a file backend's directory directly (no CLI needed); other backends need
  the CLI.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from infra import naming
from infra.cli_check import require_pulumi
from infra.spec import ClusterInfraSpec
from infra.errors import InfraInputError, InfraProviderError, StackBusyError, StackNotFoundError

BACKEND_ENV = "LAUNCHER_PULUMI_BACKEND"
PASSPHRASE_FILE_NAME = "pulumi-passphrase"
_SCHEMES = ("file", "s3", "gs")

OnOutput = Callable[[str], None]


@dataclass(frozen=True)
class StackOutputs:
    """What `up` returns: enough to reach the nodes and the checkpoint bucket."""

    stack: str
    cloud: str
    region: str
    zone: str | None
    instance_ids: tuple[str, ...]
    public_ips: tuple[str | None, ...]
    private_ips: tuple[str | None, ...]
    bucket: str | None
    ssh_user: str

    @classmethod
    def from_outputs(cls, stack: str, outputs: dict[str, Any]) -> StackOutputs:
        def seq(key: str) -> tuple:
            return tuple(outputs.get(key) or ())

        return cls(
            stack=stack,
            cloud=str(outputs["cloud"]),
            region=str(outputs["region"]),
            zone=outputs.get("zone"),
            instance_ids=seq("instance_ids"),
            public_ips=seq("public_ips"),
            private_ips=seq("private_ips"),
            bucket=outputs.get("bucket"),
            ssh_user=str(outputs.get("ssh_user") or "ubuntu"),
        )



@dataclass(frozen=True)
class PreviewSummary:
    stack: str
    changes: dict[str, int]  # operation (create, update, delete, same) -> count
    stdout: str


@dataclass(frozen=True)
class StackSummary:
    name: str
    project: str  # the project part of the stack name
    cluster: str  # the cluster part
    backend: str
    last_update: datetime | None
    resource_count: int | None


# ---- backend and secrets -----------------------------------------------------------------------


def backend_url(state_home: Path) -> str:
    """The state backend URL: LAUNCHER_PULUMI_BACKEND, or the file backend under `state_home`."""
    url = os.environ.get(BACKEND_ENV, "").strip()
    if not url:
        return f"file://{(Path(state_home) / 'pulumi').resolve()}"
    scheme = urlparse(url).scheme
    if scheme not in _SCHEMES:
        raise InfraInputError(
            f"{BACKEND_ENV}={url!r}: unsupported backend", hint="use file:///dir, s3://bucket/prefix or gs://bucket/prefix"
        )
    return url


def _file_backend_dir(url: str) -> Path | None:
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    return Path(parsed.netloc + parsed.path).expanduser() if parsed.netloc not in ("", "localhost") else Path(parsed.path)


def passphrase_env(state_home: Path) -> dict[str, str]:
    """Env for the passphrase secrets provider; creates the passphrase file when none is configured."""
    if os.environ.get("PULUMI_CONFIG_PASSPHRASE") is not None:
        return {"PULUMI_CONFIG_PASSPHRASE": os.environ["PULUMI_CONFIG_PASSPHRASE"]}
    if os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        return {"PULUMI_CONFIG_PASSPHRASE_FILE": os.environ["PULUMI_CONFIG_PASSPHRASE_FILE"]}
    return {"PULUMI_CONFIG_PASSPHRASE_FILE": str(ensure_passphrase_file(state_home))}


def ensure_passphrase_file(state_home: Path) -> Path:
    """`<state_home>/pulumi-passphrase`, created 0600 with O_EXCL (two racing processes agree)."""
    home = Path(state_home)
    home.mkdir(parents=True, exist_ok=True)
    path = home / PASSPHRASE_FILE_NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_size > 0:
            os.chmod(path, 0o600)
            return path
        # Empty: a crash between create and write; nothing can have used it yet.
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32))
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, 0o600)
    _fsync_dir(home)
    return path


def _fsync_dir(directory: Path) -> None:
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# ---- workspace ---------------------------------------------------------------------------------


def _workspace_options(pulumi_bin: Path, program: Callable[[], None] | None, state_home: Path):
    from pulumi import automation as auto

    url = backend_url(state_home)
    state_dir = _file_backend_dir(url)
    if state_dir is not None:
        state_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **passphrase_env(state_home),
        "PULUMI_BACKEND_URL": url,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
    }
    root = pulumi_bin.parent.parent if pulumi_bin.parent.name == "bin" else None
    command = auto.PulumiCommand(root=str(root)) if root and (root / "bin" / "pulumi") == pulumi_bin else None
    return auto.LocalWorkspaceOptions(
        project_settings=auto.ProjectSettings(
            name=naming.PULUMI_PROJECT, runtime="python", backend=auto.ProjectBackend(url)
        ),
        env_vars=env,
        secrets_provider="passphrase",
        pulumi_command=command,
        program=program,
    )


@contextmanager
def automation_errors(stack: str, state_home: Path) -> Iterator[None]:
    """Pulumi's CommandErrors -> this library's errors, with the useful tail of the CLI's output."""
    from pulumi.automation import errors as perr

    try:
        yield
    except perr.StackNotFoundError as e:
        raise StackNotFoundError(f"no Pulumi stack {stack!r} in {backend_url(state_home)}") from e
    except perr.ConcurrentUpdateError as e:
        raise StackBusyError(f"stack {stack!r} is being updated by another process", hint="retry when it finishes") from e
    except perr.CommandError as e:
        tail = "\n".join(str(e).strip().splitlines()[-15:])
        raise InfraProviderError(f"pulumi failed on stack {stack!r}:\n{tail}") from e


def open_stack(stack_name: str, program: Callable[[], None], *, action: str, state_home: Path):
    """Create or select `stack_name` running `program` on the configured backend. Needs the Pulumi
    CLI: without it, ToolMissingError naming `action` before anything is written."""
    from pulumi import automation as auto

    pulumi_bin = require_pulumi(action)  # before anything is created or written
    with automation_errors(stack_name, state_home):
        return auto.create_or_select_stack(
            stack_name, project_name=naming.PULUMI_PROJECT, program=program,
            opts=_workspace_options(pulumi_bin, program, state_home),
        )  # fmt: skip


def _stack_for(spec: ClusterInfraSpec, action: str, state_home: Path):
    from infra.plan import program_for

    require_pulumi(action)  # before the spec is checked: the missing CLI is the first thing to fix
    spec.require_deployable()
    return open_stack(spec.stack_name, program_for(spec), action=action, state_home=state_home)


# ---- operations --------------------------------------------------------------------------------


def preview(spec: ClusterInfraSpec, *, state_home: Path, on_output: OnOutput | None = None) -> PreviewSummary:
    """`pulumi preview` of the cluster's stack against the real cloud (needs CLI + credentials)."""
    stack = _stack_for(spec, "launcher infra preview", state_home)
    with automation_errors(spec.stack_name, state_home):
        result = stack.preview(on_output=on_output, color="never")
    changes = {str(k): int(v) for k, v in (result.change_summary or {}).items()}
    return PreviewSummary(stack=spec.stack_name, changes=changes, stdout=result.stdout)


def up(spec: ClusterInfraSpec, *, state_home: Path, on_output: OnOutput | None = None) -> StackOutputs:
    """Create or update the cluster's stack; returns its outputs (instance ids, IPs, bucket)."""
    stack = _stack_for(spec, "launcher infra up", state_home)
    with automation_errors(spec.stack_name, state_home):
        result = stack.up(on_output=on_output, color="never")
    outputs = {k: v.value for k, v in result.outputs.items()}
    return StackOutputs.from_outputs(spec.stack_name, outputs)


def destroy(project: str, cluster: str, *, state_home: Path, on_output: OnOutput | None = None) -> bool:
    """Destroy the cluster's resources and remove its stack. Idempotent: False when no such stack.

    The checkpoint bucket is retained (removed from state, kept in the cloud) when the stack was
    created with `retain_bucket_on_destroy` (the default).
    """
    from pulumi import automation as auto
    from pulumi.automation import errors as perr

    pulumi_bin = require_pulumi("launcher infra destroy")
    name = naming.stack_name(project, cluster)

    def nothing() -> None:  # destroy needs a program; the resources come from the state
        return None

    with automation_errors(name, state_home):
        try:
            stack = auto.select_stack(
                name, project_name=naming.PULUMI_PROJECT, program=nothing,
                opts=_workspace_options(pulumi_bin, nothing, state_home),
            )
        except perr.StackNotFoundError:
            return False
        stack.destroy(on_output=on_output, color="never", remove=True)
    return True


def list_stacks(state_home: Path) -> list[StackSummary]:
    """Stacks of the `gpu-launcher` project in the backend. File backends need no CLI."""
    url = backend_url(state_home)
    state_dir = _file_backend_dir(url)
    if state_dir is not None:
        return _list_file_backend(state_dir, url)
    from pulumi import automation as auto

    pulumi_bin = require_pulumi("launcher infra list")
    ws = auto.LocalWorkspace(opts=_workspace_options(pulumi_bin, None, state_home))
    with automation_errors("*", state_home):
        found = ws.list_stacks(include_all=False)
    out = []
    for s in found:
        proj, clus = naming.parse_stack_name(s.name.rsplit("/", 1)[-1])
        out.append(StackSummary(s.name, proj, clus, url, _parse_time(s.last_update), s.resource_count))
    return out


def _list_file_backend(state_dir: Path, url: str) -> list[StackSummary]:
    """Read `<dir>/.pulumi/stacks/gpu-launcher/*.json[.gz]` (project-scoped layout) directly."""
    stacks_dir = state_dir / ".pulumi" / "stacks" / naming.PULUMI_PROJECT
    if not stacks_dir.is_dir():
        return []
    out = []
    for path in sorted(stacks_dir.iterdir()):
        if path.name.endswith(".json"):
            name, opener = path.name[: -len(".json")], open
        elif path.name.endswith(".json.gz"):
            name, opener = path.name[: -len(".json.gz")], gzip.open
        else:
            continue  # .bak, .attrs, temp files
        last, count = _read_checkpoint(path, opener)
        proj, clus = naming.parse_stack_name(name)
        out.append(StackSummary(name, proj, clus, url, last, count))
    return out


def _read_checkpoint(path: Path, opener) -> tuple[datetime | None, int | None]:
    try:
        with opener(path, "rt") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None, None  # unreadable or being written: still list the stack
    latest = (data.get("checkpoint") or {}).get("latest") or {}
    resources = latest.get("resources")
    manifest_time = (latest.get("manifest") or {}).get("time")
    return _parse_time(manifest_time), (len(resources) if isinstance(resources, list) else 0)


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
