"""Reaper policy file (YAML), validated with pydantic before anything is touched.

Example::

    providers: [aws, gcp, local]
    defaults:
      idle: {gpu_util_below_pct: 5, cpu_util_below_pct: 10, window_minutes: 60, heartbeat_stale_minutes: 30}
      grace_minutes: 120
      protected_tags: {keep-alive: "true"}
      enforce_expiry: true
      action: destroy
    projects:
      research:
        grace_minutes: 30
        action: stop
    notify: {webhook_url: "https://hooks.example.com/reap", command: "mail -s reap ops@example.com"}
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from launcher.config_file import load_yaml_model
from launcher.errors import did_you_mean

ACTIONS = ("stop", "destroy")
KNOWN_PROVIDERS = ("aws", "gcp", "local", "fake", "slurm", "kubernetes", "ssh")


class IdleRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_util_below_pct: float = Field(5.0, ge=0, le=100)
    cpu_util_below_pct: float = Field(10.0, ge=0, le=100)
    window_minutes: int = Field(60, ge=5, le=7 * 24 * 60)
    heartbeat_stale_minutes: int = Field(30, ge=1, le=7 * 24 * 60)


class ProjectPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    idle: IdleRule = IdleRule()
    grace_minutes: int = Field(120, ge=0, le=30 * 24 * 60)
    protected_tags: dict[str, str] = Field(default_factory=lambda: {"keep-alive": "true"})
    enforce_expiry: bool = True
    action: Literal["stop", "destroy"] = "destroy"

    @field_validator("action", mode="before")
    @classmethod
    def _known_action(cls, v: object) -> object:
        if isinstance(v, str) and v not in ACTIONS:
            hint = did_you_mean(v, ACTIONS)
            raise ValueError(f"unknown action {v!r}; use one of {', '.join(ACTIONS)}" + (f" ({hint})" if hint else ""))
        return v


class PartialProjectPolicy(BaseModel):
    """A per-project override: every field optional, merged over `defaults`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    idle: IdleRule | None = None
    grace_minutes: int | None = Field(None, ge=0, le=30 * 24 * 60)
    protected_tags: dict[str, str] | None = None
    enforce_expiry: bool | None = None
    action: Literal["stop", "destroy"] | None = None

    _known_action = field_validator("action", mode="before")(ProjectPolicy._known_action.__func__)


class NotifyConfig(BaseModel):
    """Where a pass reports what it marked and removed (either or both)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    webhook_url: str | None = Field(None, pattern=r"^https?://")
    command: str | None = None  # run with the JSON message on stdin
    timeout_s: float = Field(10.0, gt=0, le=300)


class ReapPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    providers: list[str] = Field(default_factory=lambda: ["local"])
    notify: NotifyConfig | None = None
    defaults: ProjectPolicy = ProjectPolicy()
    projects: dict[str, PartialProjectPolicy] = Field(default_factory=dict)

    @field_validator("providers")
    @classmethod
    def _known_providers(cls, v: list[str]) -> list[str]:
        for p in v:
            if p not in KNOWN_PROVIDERS:
                hint = did_you_mean(p, KNOWN_PROVIDERS)
                raise ValueError(f"unknown provider {p!r}" + (f" ({hint})" if hint else ""))
        return v

    def for_project(self, project: str | None) -> ProjectPolicy:
        override = self.projects.get(project or "")
        if override is None:
            return self.defaults
        merged = self.defaults.model_dump()
        merged.update({k: v for k, v in override.model_dump().items() if v is not None})
        return ProjectPolicy.model_validate(merged)


def load_policy(path: Path | None) -> ReapPolicy:
    """Load and validate the policy file; None -> the defaults (local provider only)."""
    if path is None:
        return ReapPolicy()
    return load_yaml_model(path, ReapPolicy, what="reaper policy file")
