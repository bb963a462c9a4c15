"""The controller: a small state machine that drives a run through attempts and recovery.

    from launcher.controller import Controller, ControllerDeps, RunJob
    result = Controller(job, ControllerDeps(ledger, provider_for, executor_for, policy)).run()

Crash story: a `launch` killed with kill -9 leaves a live run whose controller pid is gone;
`launcher status` shows it as orphaned, `launcher down RUN` cleans it up, and
`launch --resume RUN` continues it (the open attempt is closed as `abandoned`, the next one
resumes from the last checkpoint).
"""

from launcher.controller.controller import Controller, ControllerDeps, RunJob, RunResult
from launcher.controller.recovery import NextOfferPolicy, recovery_policy
from launcher.controller.states import TRANSITIONS, can_transition

__all__ = [
    "TRANSITIONS",
    "Controller",
    "ControllerDeps",
    "NextOfferPolicy",
    "RunJob",
    "RunResult",
    "can_transition",
    "recovery_policy",
]
