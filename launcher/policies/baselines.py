"""Published baselines: on-demand, greedy and Uniform Progress (Wu et al., "Can't Be Late", NSDI'24).

All three route their proposals through `safety.enforce`, whose rules are the paper's Safety Net
Rule written in ticks (start spot only with R(t) >= C(t) + 2d; when idle and that would stop
holding, go on-demand).
"""

from __future__ import annotations

from launcher.policies.base import Choice, Decision, DecisionState, PlacementPolicy
from launcher.policies.safety import DEFAULT_POLL_HOURS, Budget, budget, enforce, holding_spot


class OnDemandPolicy(PlacementPolicy):
    """Always on-demand: the cost reference."""

    name = "on-demand"

    def decide(self, state: DecisionState) -> Decision:
        if state.work_done_hours >= state.work_total_hours - 1e-12:
            return Decision(Choice.NONE, state.current_zone, "done")
        return Decision(Choice.ON_DEMAND, state.current_zone, "on-demand policy")


class _CommittingPolicy(PlacementPolicy):
    """Shared by the baselines that may commit to on-demand until the end of a run."""

    def __init__(self, poll_hours: float = DEFAULT_POLL_HOURS) -> None:
        self.poll_hours = poll_hours
        self._committed = False

    def reset(self) -> None:
        self._committed = False

    def _start(self, state: DecisionState) -> tuple[Decision | None, Budget | None]:
        """An immediate decision (no deadline: spot when available; work done: nothing), or the
        slack budget to decide with."""
        z = state.current_zone
        if state.deadline_hours is None:
            return enforce(state, Decision(Choice.SPOT if state.spot_available[z] else Choice.NONE, z)), None
        b = budget(state, self.poll_hours)
        if b.remaining <= 0:
            return Decision(Choice.NONE, z, "done"), b
        return None, b


class GreedyPolicy(_CommittingPolicy):
    """Spot whenever available, wait otherwise; on-demand for good once only just enough time is left.

    "Only just enough" = one more idle step would leave less than two restart overheads of slack
    (one for a spot start, one to fall back to on-demand), the paper's R(t) < C(t) + 2d.
    """

    name = "greedy"

    def decide(self, state: DecisionState) -> Decision:
        z = state.current_zone
        early, b = self._start(state)
        if early is not None:
            return early
        if holding_spot(state):
            return Decision(Choice.SPOT, z, "exploit the live spot cluster")
        if self._committed or state.current is Choice.ON_DEMAND:
            self._committed = True
            return Decision(Choice.ON_DEMAND, z, "on-demand to the end")
        if state.spot_available[z] and b.can_start_spot():
            return Decision(Choice.SPOT, z, "spot available")
        if b.can_wait():
            return Decision(Choice.NONE, z, "wait for spot")
        self._committed = True
        return Decision(Choice.ON_DEMAND, z, "safety net: on-demand to the end")


class UniformProgressPolicy(_CommittingPolicy):
    """Uniform Progress (Can't Be Late, NSDI'24, section 5.2), with its hysteresis and safety net.

    cp(t) = progress made, ep(t) = t * C(0) / R(0) (the progress of a uniform spread), d = the
    restart overhead. Rules, in the paper's order of precedence:
      Thrifty: done -> idle.
      Safety Net: idle and R(t) < C(t) + 2d -> on-demand until the end.
      Exploitation: on a live spot cluster -> stay until preempted.
      Hysteresis: on on-demand -> stay until cp(t) >= ep(t + 2d).
      Taking Risks: spot available -> spot (even when cp(t) < ep(t)).
      Uniform Progress: cp(t) < ep(t) -> on-demand to catch up; otherwise idle.
    """

    name = "uniform-progress"

    def decide(self, state: DecisionState) -> Decision:
        z = state.current_zone
        early, b = self._start(state)
        if early is not None:
            return early
        if self._committed:
            return Decision(Choice.ON_DEMAND, z, "safety net: on-demand to the end")
        if holding_spot(state):
            return Decision(Choice.SPOT, z, "exploitation")
        if state.current is Choice.NONE and not b.can_wait() and not (
            state.spot_available[z] and b.can_start_spot()
        ):
            self._committed = True
            return Decision(Choice.ON_DEMAND, z, "safety net: on-demand to the end")

        rate = b.total / b.deadline if b.deadline > 0 else float("inf")
        cp = b.done
        if state.current is Choice.ON_DEMAND and cp < (b.elapsed + 2 * b.overhead) * rate:
            return enforce(state, Decision(Choice.ON_DEMAND, z, "hysteresis"), b)
        if state.spot_available[z]:
            return enforce(state, Decision(Choice.SPOT, z, "taking risks"), b)
        if cp < b.elapsed * rate:
            return enforce(state, Decision(Choice.ON_DEMAND, z, "behind uniform progress"), b)
        return enforce(state, Decision(Choice.NONE, z, "ahead of uniform progress"), b)
