"""Where the GCP project comes from: the first of these environment variables that is set."""

from __future__ import annotations

from collections.abc import Mapping

PROJECT_ENVS = ("LAUNCHER_GCP_PROJECT", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "GCLOUD_PROJECT")


def project_from_env(env: Mapping[str, str]) -> str | None:
    return next((env[v] for v in PROJECT_ENVS if env.get(v)), None)
