"""`--simulate-preemptions N`: when the N preemptions land, and what to tell the user when fewer did.

A preemption is scheduled at a random moment of each spot attempt's `run` phase. Each attempt runs
only until its preemption, so the N delays together must fit inside the job's expected running
time, or the job finishes before the last ones are due. Default window per attempt: half the
expected run split evenly over the N + 1 attempts (half: the estimate is rarely a lower bound),
at least `MIN_WINDOW_S`.
"""

from __future__ import annotations

from launcher.ledger.records import EndReason

MIN_WINDOW_S = 2.0


def default_window_s(expected_hours: float, n: int) -> float:
    """Seconds after each attempt's run start within which its preemption falls."""
    return max(MIN_WINDOW_S, expected_hours * 3600.0 / (2 * (max(n, 0) + 1)))


def requested_count(text: str | None) -> int | None:
    """N for '--simulate-preemptions N' or the number of listed delays; None when not simulating."""
    if not text:
        return None
    text = text.strip()
    if "," not in text and text.isdigit():
        return int(text)
    return len([x for x in text.split(",") if x.strip()])


def shortfall_message(ledger, run_id: str, requested: int | None, window_s: float | None) -> str | None:
    """One line saying how many simulated preemptions happened and why fewer than asked, or None
    when all of them happened (or none was asked for)."""
    if not requested:
        return None
    attempts = ledger.attempts(run_id)
    happened = sum(1 for a in attempts if a.cloud == "local" and a.spot and a.end_reason == EndReason.PREEMPTED)
    if happened >= requested:
        return None
    last = attempts[-1] if attempts else None
    if last is not None and last.end_reason == EndReason.COMPLETED:
        why = "the job finished before the next one was due"
        if window_s is not None:
            why += f" (each falls within {window_s:g} s of an attempt's start; lower --simulate-within or raise expected_hours)"
    elif last is not None and not last.spot:
        why = "the recovery policy moved the job to on-demand capacity, which is never preempted"
    else:
        why = f"the run ended ({last.end_reason if last else 'before any attempt'})"
    return f"simulated preemptions: {happened} of {requested} happened; {why}"
