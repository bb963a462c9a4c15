"""Which recovery policy the controller asks after a preemption, node loss or failed provision,
and which failures are not retried at all.

The policies live in `launcher.policies.recovery` (one object per run, by name); this module only
applies the spec's choice and the default (`deadline-aware` with a deadline, else `next-offer`).
"""

from __future__ import annotations

from launcher.executors.base import ExecResult, Outcome
from launcher.executors.container import RUNTIME_EXIT_CODES
from launcher.policies.base import RecoveryPolicy
from launcher.policies.recovery import default_recovery_policy, get_recovery_policy


def recovery_policy(name: str | None, *, has_deadline: bool = False) -> RecoveryPolicy:
    """The named policy (None = the default for the spec). UnknownNameError lists the known names."""
    return get_recovery_policy(name if name is not None else default_recovery_policy(has_deadline))


def unretryable(result: ExecResult) -> str | None:
    """Why retrying this failed attempt cannot help (None: the job's own failure, which
    `max_restarts` counts). The container runtime's own exit codes (125: the runtime failed, e.g.
    a missing or unstartable image; 126: the command cannot be executed; 127: the command was not
    found) and an attempt the executor could not start at all are not the job's failures."""
    if result.outcome not in (Outcome.FAILED, Outcome.SETUP_FAILED):
        return None
    if not result.retryable:
        return result.detail or "the job could not be started"
    why = unretryable_exit(result.exit_code, result.image_runtime)
    return (result.detail or why) if why else None


def unretryable_exit(code: int | None, image_runtime: str) -> str | None:
    """The runtime's own exit codes, by the rule of `unretryable` (125 counts only where a container
    runtime ran the job: on the host it is the job's own code)."""
    if code in (126, 127) or (code == 125 and image_runtime != "host"):
        return f"exit {code}: {RUNTIME_EXIT_CODES[code]}"
    return None
