"""Deterministic names: one Pulumi stack per (project, cluster), and cloud resource names.

Stack name: `<project>.<cluster>`, each part lowercased with characters outside `[a-z0-9_-]`
turned into `-`. When that changed a part (or the name would pass 100 characters), the part gets
a 6-hex suffix from the SHA-1 of the original, so `ML Team` and `ml-team` never share a stack.
The `.` separator cannot occur inside a part, so `(a-b, c)` and `(a, b-c)` stay distinct.

Cloud resource names (GCP instance/network/bucket names, AWS Name tags) use `resource_prefix`:
the stack name with `.` as `-`, shortened to fit with a hash when too long. Bucket names add a
hash of the stack name so they stay globally unique yet stable across `up` runs.
"""

from __future__ import annotations

import hashlib
import re

from infra.errors import InfraInputError

PULUMI_PROJECT = "gpu-launcher"  # the Pulumi project every stack lives in
STACK_NAME_MAX_CHARS = 100
_BAD = re.compile(r"[^a-z0-9_-]")
_GCP_NAME_BAD = re.compile(r"[^a-z0-9-]")


def _digest(text: str, n: int) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:n]


def _part(text: str, max_chars: int) -> str:
    if not text or not text.strip():
        raise InfraInputError("project and cluster names must not be empty")
    clean = _BAD.sub("-", text.strip().lower())
    if clean != text or len(clean) > max_chars:
        clean = clean[: max_chars - 7].rstrip("-") + "-" + _digest(text, 6)
    return clean


def stack_name(project: str, cluster: str) -> str:
    return f"{_part(project, 49)}.{_part(cluster, 50)}"


def parse_stack_name(name: str) -> tuple[str, str]:
    """(project part, cluster part) of a stack name made by `stack_name`."""
    project, _, cluster = name.partition(".")
    return project, cluster


def resource_prefix(project: str, cluster: str, max_chars: int = 40) -> str:
    """A name start valid for GCP (`[a-z]([-a-z0-9]*)`) and AWS, e.g. `vision-ft-c1`."""
    base = _GCP_NAME_BAD.sub("-", stack_name(project, cluster).replace(".", "-"))
    base = re.sub(r"-+", "-", base).strip("-")
    if not base[:1].isalpha():
        base = "g" + base
    if len(base) > max_chars:
        base = base[: max_chars - 7].rstrip("-") + "-" + _digest(base, 6)
    return base


def bucket_name(project: str, cluster: str) -> str:
    """Checkpoint bucket: lowercase, 3-63 chars, globally unique per stack yet deterministic."""
    return f"{resource_prefix(project, cluster, 45)}-ckpt-{_digest(stack_name(project, cluster), 8)}"
