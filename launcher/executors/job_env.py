"""The environment a job (user code) runs with: built from an allow-list, never inherited whole.

A job gets exactly:
  * from the launching process, only `HOST_NAMES` (PATH, HOME, user and shell names, locale,
    time zone, terminal, temp dir, the Python search path, the GPUs this machine may use) and
    `LC_*`: nothing that can hold a secret. The launcher's own settings (`LAUNCHER_DB_URL`,
    `LAUNCHER_HOME`, `LAUNCHER_TOKEN`, `LAUNCHER_SERVER`), cloud credentials (`AWS_*`,
    `GOOGLE_*`, ...) and anything else in the launcher's or the server's environment stay out;
  * the spec's `envs` and `secrets` (a job that needs a credential names it under `secrets:`,
    whose values are kept out of stored logs);
  * the job variables the executor sets (`SKYPILOT_*`, `LAUNCHER_RUN_ID`, `LAUNCHER_ATTEMPT`,
    `LAUNCHER_CLOUD`, `LAUNCHER_PHASE`, `LAUNCHER_PYTHON`, `LAUNCHER_CHECKPOINT_DIR`,
    `MASTER_ADDR`/`MASTER_PORT`): these win, so a spec cannot fake its rank.

Every executor builds a job's environment here (local ranks, podman containers, SkyPilot task
envs). The launcher's own helper processes (the detached controller, the log relay) are not
jobs and keep the launcher's environment.

This is not a sandbox on its own: a job running as the same user as the launcher can still read
that user's files and `/proc/<pid>/environ` of its processes. That is why `launcher server`
does not run `--cloud local` jobs of non-admins in its own user (launcher.server.local_jobs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

# Names taken from the launching process (when set there). None of them holds a credential.
HOST_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
        "PYTHONPATH",  # `python` in a job is the launcher's interpreter: same module search path
        "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
        # the job-side checkpoint helpers' settings (launcher.checkpoint.notice): URLs and a pace, no secret
        "LAUNCHER_PREEMPTION_POLL_S", "LAUNCHER_AWS_METADATA_URL", "LAUNCHER_GCP_METADATA_URL",
    }
)  # fmt: skip
HOST_PREFIXES = ("LC_",)  # locale categories

# The job variables an executor may set (documented in the README for job authors).
JOB_VAR_PREFIXES = ("SKYPILOT_", "LAUNCHER_")
JOB_VAR_NAMES = frozenset({"MASTER_ADDR", "MASTER_PORT"})

# Launcher settings that are never job variables, even though they start with LAUNCHER_.
LAUNCHER_SETTINGS = frozenset(
    {"LAUNCHER_DB_URL", "LAUNCHER_HOME", "LAUNCHER_TOKEN", "LAUNCHER_SERVER", "LAUNCHER_DEBUG"}
)


def host_part(host_env: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed names of `host_env`."""
    return {k: v for k, v in host_env.items() if k in HOST_NAMES or k.startswith(HOST_PREFIXES)}


def job_environment(
    spec_env: Mapping[str, str],
    job_vars: Mapping[str, str],
    *,
    host_env: Mapping[str, str] | None = None,
    path_first: Sequence[str] = (),
) -> dict[str, str]:
    """The complete environment of one job process.

    spec_env   the spec's `envs` and `secrets` as the job sees them (`ExecRequest.envs`).
    job_vars   SKYPILOT_*/LAUNCHER_* job variables and MASTER_ADDR/MASTER_PORT set by the
               executor; they override the spec. Any other name (or a launcher setting such as
               LAUNCHER_DB_URL) is a programming error: ValueError.
    host_env   where PATH, HOME, locale... come from (default os.environ; pass {} for a job on
               a remote node, whose own login environment provides them). Only `HOST_NAMES`
               and LC_* are read from it.
    path_first directories put in front of the host's PATH (e.g. the launcher's interpreter).

    Order: allow-listed host names < the spec's envs/secrets < job variables.
    """
    bad = sorted(k for k in job_vars if k in LAUNCHER_SETTINGS or not (k.startswith(JOB_VAR_PREFIXES) or k in JOB_VAR_NAMES))
    if bad:
        raise ValueError(f"not job variables: {bad}")
    env = host_part(os.environ if host_env is None else host_env)
    if path_first:
        env["PATH"] = os.pathsep.join([*path_first, *([env["PATH"]] if env.get("PATH") else [])])
    env.update({k: str(v) for k, v in spec_env.items()})
    env.update({k: str(v) for k, v in job_vars.items()})
    return env


def split_secrets(env: Mapping[str, str], spec_env: Mapping[str, str], secret_values: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """A SkyPilot task's `envs` and `secrets`: the names of `spec_env` that hold one of the spec's
    `secrets:` values go to `secrets`, which SkyPilot keeps out of the task YAML it stores and shows
    (`<redacted>`); the job sees both as environment variables."""
    hidden = set(secret_values)
    names = {k for k, v in spec_env.items() if v in hidden and env.get(k) == v}
    return {k: v for k, v in env.items() if k not in names}, {k: env[k] for k in sorted(names)}
