"""The run state machine. Every transition is written to the ledger (compare-and-set) before
the controller acts on it, so a crash leaves a state that says what was about to happen.

    PENDING -> PROVISIONING -> RUNNING -> SUCCEEDED | FAILED (end_reason failed|setup_failed)
                   ^              |
                   |              v  preemption / node loss / retryable failure
                   +------- RECOVERING
    any live state -> STOPPING -> CANCELLED | BUDGET_STOPPED      (`launcher down`, budget)

A resumed run (controller crashed) re-enters RECOVERING from wherever it stopped.
"""

from __future__ import annotations

from launcher.ledger.records import TERMINAL_RUN_STATES, RunState

S = RunState

TRANSITIONS: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({S.PROVISIONING, S.RECOVERING, S.STOPPING, S.FAILED, S.CANCELLED}),
    S.PROVISIONING: frozenset({S.RUNNING, S.RECOVERING, S.STOPPING, S.FAILED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.RECOVERING, S.STOPPING}),
    S.RECOVERING: frozenset({S.PROVISIONING, S.RECOVERING, S.STOPPING, S.FAILED}),
    S.STOPPING: frozenset({S.CANCELLED, S.BUDGET_STOPPED, S.FAILED}),
}

LIVE_STATES: frozenset[str] = frozenset(TRANSITIONS)


def can_transition(src: str, dst: str) -> bool:
    return dst in TRANSITIONS.get(src, frozenset())


def is_terminal(state: str) -> bool:
    return state in TERMINAL_RUN_STATES


def state_text(state: str, end_reason: str | None) -> str:
    """`failed (setup_failed)`; the reason only when it adds something (`failed`, not `failed (failed)`)."""
    return f"{state} ({end_reason})" if end_reason and end_reason != state else state
