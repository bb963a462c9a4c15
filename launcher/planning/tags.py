"""A run's tags from its spec, built by the one tag builder (`infra.tags`).

The spec's labels and `launcher.tags` come first; the mandatory cost-allocation tags override
them. Unset owner defaults to the login name, cost-center to the project, experiment to the
task's name; the tags expire at the deadline, or a day after the run was created.
"""

from __future__ import annotations

import getpass
from datetime import datetime, timedelta

from infra.tags import TagInput
from infra.tags import run_tags as build_run_tags
from launcher.spec.loader import LoadedSpec

DEFAULT_EXPIRY = timedelta(hours=24)


def user_name() -> str:
    """The login name, or "unknown" where there is none (containers, cron)."""
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


def run_tags(loaded: LoadedSpec, run_id: str, created: datetime) -> dict[str, str]:
    """The tags every resource of this run carries (REQUIRED_TAGS but `cluster`) plus the spec's own."""
    spec, lb = loaded.spec, loaded.spec.launcher
    expires = created + (timedelta(hours=lb.deadline_hours) if lb.deadline_hours else DEFAULT_EXPIRY)
    return build_run_tags(
        TagInput(
            project=lb.project, experiment=lb.experiment or spec.display_name, owner=lb.owner or user_name(),
            cost_center=lb.cost_center or lb.project, run_id=run_id, created_at=created, expires_at=expires,
            extra={**(spec.resources.labels or {}), **(lb.tags or {})},
        )
    )
