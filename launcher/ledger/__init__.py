"""The ledger: runs, attempts, events, clusters, tags, heartbeats and the reaper's audit log.

    from launcher.ledger import Ledger, RunRecord, NewAttempt
    with Ledger() as led:                       # LAUNCHER_DB_URL or ~/.launcher/ledger.db
        led.create_run(RunRecord.from_provenance(prov, name=..., spec_yaml=..., project=...))
        a = led.add_attempt(run_id, NewAttempt.from_offer(offer, num_nodes=2, cluster="c1"))
        led.set_run_state(run_id, RunState.RUNNING, expected_from=RunState.PROVISIONING)
        led.end_attempt(a.attempt_id, EndReason.PREEMPTED)

Importing the records (`launcher.ledger.records`, or these names) is cheap; `Ledger` pulls in
SQLAlchemy (0.3-1 s) and is loaded on first use.
"""

from launcher.ledger.records import (
    TERMINAL_RUN_STATES,
    AttemptRecord,
    AttemptState,
    ClusterRecord,
    ClusterState,
    EndReason,
    EventKind,
    EventRecord,
    NewAttempt,
    ReapAuditRecord,
    RunRecord,
    RunState,
)


def __getattr__(name: str):
    if name == "Ledger":
        from launcher.ledger.store import Ledger

        return Ledger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TERMINAL_RUN_STATES",
    "AttemptRecord",
    "AttemptState",
    "ClusterRecord",
    "ClusterState",
    "EndReason",
    "EventKind",
    "EventRecord",
    "Ledger",
    "NewAttempt",
    "ReapAuditRecord",
    "RunRecord",
    "RunState",
]
