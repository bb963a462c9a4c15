"""Deadline arithmetic shared by every placement policy, and the safety net that keeps them on time.

All policies reason in *units*: simulator ticks when `gap_hours > 0` (the simulator passes hours
that are whole multiples of the tick, so rounding is exact), hours when the controller asks
event-driven (`gap_hours == 0`), with `poll_hours` as the waiting step.

Slack is the time that is not needed for the remaining work: `slack = left - remaining`. Every
start of a cluster spends `overhead` of it; every step spent idle spends one step of it; time on
a productive cluster spends none. The safety net below keeps these invariants, so a policy that
routes its decisions through `enforce` cannot miss a deadline that on-demand from the start meets:

- a spot cluster may be started only with `slack >= 2 * overhead` (after its own overhead there is
  still one overhead left to move to on-demand if it is preempted at any later moment);
- idling is allowed only if, one step later, a spot start would still be allowed;
- otherwise: on-demand (stay if already there), which needs `slack >= overhead` (or the overhead
  left on the held on-demand cluster).
"""

from __future__ import annotations

from dataclasses import replace

from launcher.policies.base import Choice, Decision, DecisionState

DEFAULT_POLL_HOURS = 0.1


class Budget:
    """Remaining time, work and overhead in policy units (ticks or hours). Built once per decision,
    so a plain slotted class (this sits on the simulator's hot path)."""

    __slots__ = ("left", "remaining", "done", "total", "deadline", "elapsed", "overhead", "overhead_left", "step")

    def __init__(self, *, left, remaining, done, total, deadline, elapsed, overhead, overhead_left, step):
        self.left = left  # time to the deadline
        self.remaining = remaining  # work still to do
        self.done = done
        self.total = total
        self.deadline = deadline
        self.elapsed = elapsed
        self.overhead = overhead  # one restart
        self.overhead_left = overhead_left  # still to pay on the cluster held now
        self.step = step  # one decision step (1 tick, or the poll interval)

    @property
    def slack(self) -> float:
        return self.left - self.remaining

    def can_start_spot(self) -> bool:
        return self.left - self.remaining >= 2 * self.overhead

    def can_wait(self) -> bool:
        return self.left - self.remaining - self.step >= 2 * self.overhead


def budget(state: DecisionState, poll_hours: float = DEFAULT_POLL_HOURS) -> Budget:
    """The state's hours in policy units. Requires a deadline."""
    assert state.deadline_hours is not None
    g = state.gap_hours
    if g > 0:
        # The simulator passes exact multiples of the tick; round() absorbs float noise.
        inv = 1.0 / g
        total, done = round(state.work_total_hours * inv), round(state.work_done_hours * inv)
        deadline, elapsed = round(state.deadline_hours * inv), round(state.elapsed_hours * inv)
        overhead, overhead_left = round(state.restart_overhead_hours * inv), round(state.overhead_remaining_hours * inv)
        step = 1
    else:
        total, done = state.work_total_hours, state.work_done_hours
        deadline, elapsed = state.deadline_hours, state.elapsed_hours
        overhead, overhead_left = state.restart_overhead_hours, state.overhead_remaining_hours
        step = poll_hours
    return Budget(
        left=deadline - elapsed,
        remaining=max(0, total - done),
        done=done,
        total=total,
        deadline=deadline,
        elapsed=elapsed,
        overhead=overhead,
        overhead_left=overhead_left,
        step=step,
    )


def holding_spot(state: DecisionState, zone: int | None = None) -> bool:
    """True when a spot cluster is held in `zone` (default: the current zone) and not preempted."""
    z = state.current_zone if zone is None else zone
    return state.current is Choice.SPOT and z == state.current_zone and state.spot_available[z]


def enforce(state: DecisionState, proposed: Decision, b: Budget | None = None) -> Decision:
    """Apply the safety net to a proposed decision (see the module docstring)."""
    if state.deadline_hours is None:
        if proposed.choice is Choice.SPOT and not state.spot_available[proposed.zone]:
            return Decision(Choice.NONE, state.current_zone, "spot unavailable")
        return proposed
    b = b or budget(state)
    if b.remaining <= 0:
        return Decision(Choice.NONE, state.current_zone, "done")
    choice, zone = proposed.choice, proposed.zone
    if choice is Choice.SPOT:
        if not state.spot_available[zone]:
            choice, proposed = Choice.NONE, Decision(Choice.NONE, state.current_zone, "spot unavailable")
        elif holding_spot(state, zone):
            return proposed  # keeping a live spot cluster is always safe (invariant above)
        elif b.can_start_spot():
            return proposed
        else:
            return Decision(Choice.ON_DEMAND, state.current_zone, "safety net: no slack for a spot start")
    if choice is Choice.NONE and not b.can_wait():
        return Decision(Choice.ON_DEMAND, state.current_zone, "safety net: no slack left to wait")
    return proposed


def snap_to_tick(state: DecisionState) -> DecisionState:
    """Times on the decision tick (the simulator's are; the controller's clock is within float noise
    of them), so that a policy that plans and explains in numbers gets the same numbers in both."""
    g = state.gap_hours
    if g <= 0:
        return state
    snap = lambda h: round(h / g) * g  # noqa: E731
    deadline = None if state.deadline_hours is None else snap(state.deadline_hours)
    return replace(state, elapsed_hours=snap(state.elapsed_hours), work_done_hours=snap(state.work_done_hours),
                   deadline_hours=deadline, work_total_hours=snap(state.work_total_hours),
                   overhead_remaining_hours=snap(state.overhead_remaining_hours))  # fmt: skip
