"""What the recovery and placement policies see and decide with (`_decision_state`): spot
capacity from providers that know it (the optional `spot_available(offer, now)`; else, for the
placement policy, what the run saw: policies/capacity_probes.py), the run's age and the
attempts' running time on the injected clock, the deadline; the placement policy's driver
(controller/placement.py) with the clouds' placement scores and other runs' spot history; the
ranked offer an attempt used.

Part of `Controller`: uses its `job`, `d`, `led`, `_placement`, `_unusable_clouds` and the clocks
(`_started_clock`, `_age_at_start_s`, `_prior_work_s`, `_work_s`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from launcher.controller.outage_watch import OUTAGE_EVENT
from launcher.controller.placement import PLACEMENT_EVENT, PlacementDriver, estimated_total_hours
from launcher.controller.placement_history import read_history
from launcher.controller.placement_scores import ask_scores
from launcher.ledger.records import EndReason
from launcher.policies.base import Choice, DecisionState
from launcher.providers.base import SpotCapacity
from pricing.models import Offer, ScoredOffer


class Decisions:
    """The policies' view of the run and the placement hooks."""

    def _start_clocks(self, run) -> None:
        now = datetime.now(UTC)
        self._started_clock = self.d.clock()
        self._age_at_start_s = max(0.0, (now - (run.created_at or now)).total_seconds())
        self._prior_work_s = sum(
            ((a.ended_at or now) - a.started_at).total_seconds()
            for a in self.led.attempts(self.job.run_id)
            if a.end_reason != EndReason.PROVISION_FAILED
        )

    def _spot_capacity(self) -> bool:
        """Whether spot capacity may exist now for some ranked spot offer. Providers that know
        (the optional `spot_available(offer, now) -> bool | None`, e.g. the local backend
        following a spot trace) are asked; unknown (None, no such capability, an error) counts
        as available, so we try rather than wait. No spot offer at all: True (nothing to wait for)."""
        now = datetime.now(UTC)
        answers: list[bool | None] = []
        for s in self.job.plan.ranked:
            o = s.offer
            if not o.spot or o.cloud in self._unusable_clouds:
                continue
            try:
                p = self.d.provider_for(o.cloud)
                answers.append(p.spot_available(o, now) if isinstance(p, SpotCapacity) else None)
            except Exception:  # a provider that cannot answer must not stop the run
                answers.append(None)
            if answers[-1] is not False:
                return True
        return not answers

    def _decision_state(self, previous: ScoredOffer | None, preemptions: int) -> DecisionState:
        """What a deadline-aware policy sees. The controller asks only when nothing is held (at
        a start, after a preemption, node loss or failed provision), so `current` is NONE and no
        restart overhead is being paid. Work done is approximated by the time attempts spent in
        their `run` phase (the controller cannot see inside the job; the work lost at a
        preemption is bounded by the job's checkpoint interval)."""
        elapsed_s = self._age_at_start_s + (self.d.clock() - self._started_clock)
        done_s = self._prior_work_s + self._work_s
        prev = previous.offer if previous else None
        spot = [s.offer.price_usd_per_hour for s in self.job.plan.ranked if s.offer.spot]
        od = [s.offer.price_usd_per_hour for s in self.job.plan.ranked if not s.offer.spot]
        return DecisionState(
            elapsed_hours=elapsed_s / 3600.0,
            work_done_hours=done_s / 3600.0,
            work_total_hours=estimated_total_hours(
                self.job.plan.work_hours, done_s / 3600.0, self.d.placement_gap_hours or self.d.placement_tick_s / 3600.0
            ),
            deadline_hours=self.job.spec.launcher.deadline_hours,
            restart_overhead_hours=self.d.restart_overhead_hours,
            current=Choice.NONE,
            current_zone=0,
            spot_available=(self._spot_capacity(),),
            spot_price_usd_per_hour=min(spot) if spot else (prev.price_usd_per_hour if prev and prev.spot else None),
            on_demand_price_usd_per_hour=min(od) if od else None,
            preemptions=preemptions,
            overhead_remaining_hours=0.0,
        )

    def _placement_driver(self) -> PlacementDriver | None:
        if self.d.placement_policy is None:
            return None

        def capacity(offer):
            if offer.cloud in self._unusable_clouds:
                return False
            provider = self.d.provider_for(offer.cloud)
            return provider.spot_available(offer, datetime.now(UTC)) if isinstance(provider, SpotCapacity) else None

        spot = [s.offer for s in self.job.plan.ranked if s.offer.spot]
        return PlacementDriver(
            self.d.placement_policy, tuple(self.job.plan.ranked), work_hours=self.job.plan.work_hours,
            deadline_hours=self.job.spec.launcher.deadline_hours, restart_overhead_s=self.d.restart_overhead_hours * 3600.0,
            tick_s=self.d.placement_tick_s, capacity=capacity, gap_hours=self.d.placement_gap_hours,
            placement_scores=self._placement_scores(spot), history=self._placement_history(spot),
            clock=self.d.clock, max_probe_s=self.d.max_probe_s,
        )  # fmt: skip

    def _placement_history(self, spot: list[Offer]) -> dict:
        """Other runs' spot spells in the plan's zones (`placement_history`); an event says what was used."""
        history, event = read_history(self.led, spot, run_id=self.job.run_id, days=self.d.placement_history_days)
        if event is not None:
            self.led.add_event(self.job.run_id, "placement_history", event)
        return history

    def _placement_scores(self, spot: list[Offer]) -> dict:
        """The clouds' spot placement scores for the plan's spot offers (`placement_scores`), asked
        once per controller; what they said, or why they could not, is an event."""
        scores, events = ask_scores(spot, self.job.spec.num_nodes, self.d.provider_for)
        for data in events:
            self.led.add_event(self.job.run_id, "placement_scores", data)
        return scores

    def _placement_decide(self, held: ScoredOffer | None, cap: tuple[bool, ...], running_s: float,
                          overhead_left_s: float, preemptions: int):  # fmt: skip
        p = self._placement
        state = p.state(
            elapsed_s=self._age_at_start_s + (self.d.clock() - self._started_clock),
            work_done_s=self._prior_work_s + self._work_s + running_s, held=p.held(held),
            overhead_left_s=overhead_left_s, preemptions=preemptions, capacity=cap,
        )  # fmt: skip
        d = p.decide(state)
        data = p.event(d, state)
        if data is not None:
            self.led.add_event(self.job.run_id, PLACEMENT_EVENT, data)
        for outage in p.outages.take():
            self.led.add_event(self.job.run_id, OUTAGE_EVENT, outage)
        return d

    def _record_open_outages(self) -> None:
        """At the controller's end: the outages it saw, the ones still open included (unended)."""
        if self._placement is None:
            return
        try:
            for outage in self._placement.outages.close():
                self.led.add_event(self.job.run_id, OUTAGE_EVENT, outage)
        except Exception:  # evidence for later runs only: never what ends a run
            pass

    def _place_next(self, preemptions: int) -> ScoredOffer | None:
        """Nothing is held: what to start now (None = wait a tick)."""
        d = self._placement_decide(None, self._placement.capacity(), 0.0, 0.0, preemptions)
        return self._placement.offer_for(d)

    def _placement_tick(self, held: ScoredOffer, cap: tuple[bool, ...], running_s: float,
                        overhead_left_s: float) -> ScoredOffer | None | bool:  # fmt: skip
        """An attempt runs: False to keep it, else the offer to move to (None: stop holding)."""
        preemptions = sum(1 for a in self.led.attempts(self.job.run_id) if a.end_reason in (EndReason.PREEMPTED, EndReason.NODE_LOST))
        d = self._placement_decide(held, cap, running_s, overhead_left_s, preemptions)
        if not self._placement.is_move(d, self._placement.held(held)):
            return False
        return self._placement.offer_for(d)

    def _scored_for(self, attempt) -> ScoredOffer | None:
        """The ranked offer an attempt used (matched on cloud/region/zone/type/market)."""
        for s in self.job.plan.ranked:
            o = s.offer
            if (o.cloud, o.region, o.zone, o.instance_type, o.spot) == (
                attempt.cloud, attempt.region, attempt.zone, attempt.instance_type, attempt.spot,
            ):  # fmt: skip
                return s
        return None


def offer_dict(s: ScoredOffer) -> dict:
    o = s.offer
    return {
        "cloud": o.cloud, "region": o.region, "zone": o.zone, "instance_type": o.instance_type,
        "spot": o.spot, "price_usd_per_hour": o.price_usd_per_hour, "rank": s.rank,
    }  # fmt: skip


def wait_line(reason: str | None, wait_s: float, left_s: float) -> str:
    """What the run waits for, when it checks next, and how long it may still wait (Ctrl-C stops it)."""
    at = (datetime.now(UTC) + timedelta(seconds=wait_s)).strftime("%H:%M:%S UTC")
    return (f"waiting: {reason or 'no offer can be placed now'}; next check in {wait_s:.0f}s (at {at}); "
            f"gives up after {max(left_s, 0.0) / 60:.0f} more min of waiting (launcher: max_wait); Ctrl-C cancels")
