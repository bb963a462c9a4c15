"""Which recovery policy the controller asks after a preemption, node loss or failed provision.

The policies live in `launcher.policies.recovery` (one object per run, by name); this module only
applies the spec's choice and the default (`deadline-aware` with a deadline, else `next-offer`).
"""

from __future__ import annotations

from launcher.policies.base import RecoveryPolicy
from launcher.policies.recovery import default_recovery_policy, get_recovery_policy


def recovery_policy(name: str | None, *, has_deadline: bool = False) -> RecoveryPolicy:
    """The named policy (None = the default for the spec). UnknownNameError lists the known names."""
    return get_recovery_policy(name if name is not None else default_recovery_policy(has_deadline))
