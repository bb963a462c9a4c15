"""The placement policy inside the live controller: the same decisions `launcher simulate` makes.

The simulator asks a placement policy once per trace tick what to hold: spot in zone z, on-demand, or
nothing. `PlacementDriver` asks the same policy object the same question from the controller, at
every *tick-equivalent*: when an attempt would be placed, every `tick_s` of the controller's clock
while one runs or while waiting, and whenever the spot capacity it can observe changes. It maps
the policy's zones onto the plan's offers:

- zone i = the i-th spot offer of the plan in rank order (one per cloud/region/zone/instance type),
  except that offers the cloud scores as unlikely to get capacity now (a spot placement score of
  `LOW_PLACEMENT_SCORE` or less out of 10, where the provider reports scores) go after the others:
  zone 0 is where a single-zone policy runs and where `multi-zone` starts and waits;
- on-demand = the cheapest on-demand offer of the plan (rank breaks ties).

What the policy is shown is what the controller can observe: capacity per zone from the providers
that know it (`Provider.spot_available`), else what the run saw there (its spot cluster running, a
launch refused, a preemption; `capacity_probes.ProbedCapacity`: a zone seen without capacity is
tried again after one tick, then twice as late after each miss, and a zone not seen counts as
available but not as an observation, `DecisionState.spot_observed`), what earlier runs' attempts saw
of each zone's spot spells (`placement_history`, read from the ledger once), the run's age and the work
done (time attempts spent in their `run` phase), the restart overhead still to pay (time since the
attempt started, while it is still provisioning or in setup), and the preemptions so far.

A decision that differs from what is held is a *move*: the controller asks the job to checkpoint
and stop (the preemption-notice path), ends the attempt as `moved`, and starts the chosen offer. A
move to spot launches the chosen offer first, while the job runs on (make-before-break,
`AttemptRunner._look`): a launch refused for want of capacity leaves the job running.
Every change of decision is a `placement` event in the ledger with the policy's reason and the
slack left, so `launcher runs show` says why the run waited, moved or stayed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from launcher.controller.outage_watch import OutageWatch
from launcher.policies.base import Choice, Decision, DecisionState, PlacementPolicy, RecoveryPolicy
from launcher.policies.capacity_probes import ProbedCapacity
from launcher.policies.registry import get_placement_policy
from launcher.policies.zone_history import ZoneHistory
from pricing.models import Offer, ScoredOffer

PLACEMENT_EVENT = "placement"
# AWS: 1-3 "not likely to succeed" (its console's band); such zones are tried after the others.
LOW_PLACEMENT_SCORE = 3


def estimated_total_hours(work_hours: float, done_hours: float, step_hours: float) -> float:
    """The work is an estimate; the job is done when it exits. Past the estimate, one more step
    of work is always left, so a policy never idles an unfinished job as done."""
    return max(work_hours, done_hours + step_hours)


def _key(o: Offer) -> tuple:
    return (o.cloud, o.region, o.zone, o.instance_type, o.spot)


def spot_zones(ranked):
    """The ranked spot offers, one per zone (the first, best-ranked, of each), in rank order."""
    seen: set[tuple] = set()
    out = []
    for s in ranked:
        if s.offer.spot and _key(s.offer) not in seen:
            seen.add(_key(s.offer))
            out.append(s)
    return out


class Capacity(tuple):
    """Spot capacity per zone (a tuple of bools, compared as one), with `seen`: per zone, whether
    that is an observation or the stand-in for a zone nobody could see."""

    seen: tuple[bool, ...]

    def __new__(cls, available: tuple[bool, ...], seen: tuple[bool, ...]) -> Capacity:
        out = super().__new__(cls, available)
        out.seen = tuple(seen)
        return out


@dataclass(frozen=True)
class Held:
    """What the controller holds now, in the policy's terms."""

    choice: Choice
    zone: int = 0


class PlacementDriver:
    """One per run. `capacity(offer) -> bool | None` reads a provider's view of spot capacity."""

    def __init__(
        self,
        policy: PlacementPolicy,
        ranked: tuple[ScoredOffer, ...],
        *,
        work_hours: float,
        deadline_hours: float | None,
        restart_overhead_s: float,
        tick_s: float,
        capacity: Callable[[Offer], bool | None],
        gap_hours: float = 0.0,
        placement_scores: Mapping[Offer, int] | None = None,
        history: Mapping[Offer, ZoneHistory] | None = None,
        clock: Callable[[], float] | None = None,
        max_probe_s: float = 16 * 60.0,
    ) -> None:
        if tick_s <= 0:
            raise ValueError("tick_s must be positive")
        self.policy = policy
        zones = spot_zones(ranked)
        self.placement_scores: dict[Offer, int] = dict(placement_scores or {})
        zones.sort(key=lambda s: self.placement_scores.get(s.offer, 10) <= LOW_PLACEMENT_SCORE)  # stable: rank order within
        if not policy.multi_zone:
            zones = zones[:1]
        self.zones: tuple[ScoredOffer, ...] = tuple(zones)
        od = [s for s in ranked if not s.offer.spot]
        self.on_demand = min(od, key=lambda s: (s.offer.price_usd_per_hour, s.rank)) if od else None
        self.work_hours = work_hours
        self.deadline_hours = deadline_hours
        self.restart_overhead_s = restart_overhead_s
        self.tick_s = tick_s
        self.gap_hours = gap_hours
        self._capacity = capacity
        self._clock = clock or (lambda: 0.0)
        self.probes = ProbedCapacity(tick_s, max(tick_s, max_probe_s))
        self.outages = OutageWatch()  # what the run saw of each zone's outages, for later runs
        self.log: list[Decision] = []  # every decision, in order (the replay proof compares it)
        self._last: tuple | None = None
        self.last_zone = 0
        if getattr(policy, "band_priors", False):  # priors that outlive `reset`: set before it
            for i, s in enumerate(self.zones):
                policy.seed_prior(i, band_prior_up_hours(s))
        policy.reset()
        self.history = {i: history[s.offer] for i, s in enumerate(self.zones) if history and s.offer in history}
        for i, h in self.history.items():
            policy.seed_history(i, h)

    # ---- what the policy sees ------------------------------------------------------------------
    def capacity(self, held: ScoredOffer | None = None) -> Capacity:
        """Spot capacity per zone now: the provider's answer where it has one (a launch refused
        less than a tick ago still counts as none), up in the zone of `held` (a spot cluster
        running there), else what the probes saw (`ProbedCapacity.view`). What is known goes to
        `outages`."""
        now = self._clock()
        out: list[bool] = []
        seen: list[bool] = []
        for s in self.zones:
            key = _key(s.offer)
            here = held is not None and held.offer.spot and _key(held.offer) == key
            if here:
                self.probes.running(key)
            try:
                ans = self._capacity(s.offer)
            except Exception:  # a provider that cannot answer must not stop the run
                ans = None
            if ans is not None:
                up, known = ans and not self.probes.refused_within(key, now, self.tick_s), True
            elif here:
                up, known = True, True
            else:
                up, known = self.probes.view(key, now)
            if known:
                self.outages.observe(s.offer, up, now)
            out.append(up)
            seen.append(known)
        return Capacity(tuple(out), tuple(seen)) if out else Capacity((False,), (True,))

    def refused(self, offer: ScoredOffer) -> None:
        """A launch of `offer` was refused or its cluster preempted: no capacity there for now."""
        if offer.offer.spot:
            self.probes.refused(_key(offer.offer), self._clock())

    def held(self, offer: ScoredOffer | None) -> Held:
        """In the policy's terms. The zone is the last spot zone held (on-demand and idle keep it,
        as in the simulator), so a policy that prefers its own zone sees the same one."""
        if offer is None:
            return Held(Choice.NONE, self.last_zone)
        if not offer.offer.spot:
            return Held(Choice.ON_DEMAND, self.last_zone)
        for i, s in enumerate(self.zones):
            if _key(s.offer) == _key(offer.offer):
                self.last_zone = i
                return Held(Choice.SPOT, i)
        return Held(Choice.SPOT, self.last_zone)

    def state(self, *, elapsed_s: float, work_done_s: float, held: Held, overhead_left_s: float,
              preemptions: int, capacity: tuple[bool, ...]) -> DecisionState:  # fmt: skip
        sp = self.zones[0].offer.price_usd_per_hour if self.zones else None
        od = self.on_demand.offer.price_usd_per_hour if self.on_demand else None
        done_h = work_done_s / 3600.0
        total_h = estimated_total_hours(self.work_hours, done_h, self.gap_hours or self.tick_s / 3600.0)
        return DecisionState(
            elapsed_hours=elapsed_s / 3600.0,
            work_done_hours=done_h,
            work_total_hours=total_h,
            deadline_hours=self.deadline_hours,
            restart_overhead_hours=self.restart_overhead_s / 3600.0,
            current=held.choice,
            current_zone=held.zone,
            spot_available=capacity,
            gap_hours=self.gap_hours,
            spot_price_usd_per_hour=sp,
            on_demand_price_usd_per_hour=od,
            preemptions=preemptions,
            overhead_remaining_hours=max(0.0, overhead_left_s) / 3600.0,
            spot_observed=None if all(getattr(capacity, "seen", ())) else capacity.seen,
        )

    # ---- the decision ---------------------------------------------------------------------------
    def decide(self, state: DecisionState) -> Decision:
        d = self.policy.decide(state)
        self.log.append(d)
        return d

    def offer_for(self, d: Decision) -> ScoredOffer | None:
        """The plan's offer for a decision (None = hold nothing)."""
        if d.choice is Choice.SPOT:
            if not 0 <= d.zone < len(self.zones):
                return None
            self.last_zone = d.zone
            return self.zones[d.zone]
        if d.choice is Choice.ON_DEMAND:
            return self.on_demand
        return None

    def is_move(self, d: Decision, held: Held) -> bool:
        """The decision asks for something other than what is held."""
        if d.choice is not held.choice:
            return True
        return d.choice is Choice.SPOT and d.zone != held.zone

    def event(self, d: Decision, state: DecisionState) -> dict | None:
        """The ledger event for a decision, or None when it repeats the last one."""
        key = (d.choice, d.zone if d.choice is Choice.SPOT else 0, d.reason)
        if key == self._last:
            return None
        self._last = key
        offer = self.offer_for(d)
        data: dict = {"decision": d.choice.value}
        if state.deadline_hours is not None:  # first: `runs show` shortens long event lines
            left = state.deadline_hours - state.elapsed_hours
            data["slack_hours"] = round(left - max(0.0, state.work_total_hours - state.work_done_hours), 4)
        data.update(reason=d.reason, held=state.current.value, elapsed_hours=round(state.elapsed_hours, 6),
                    work_done_hours=round(state.work_done_hours, 6))  # fmt: skip
        if offer is not None:
            o = offer.offer
            data["offer"] = {"cloud": o.cloud, "region": o.region, "zone": o.zone, "spot": o.spot,
                             "price_usd_per_hour": o.price_usd_per_hour}  # fmt: skip
            if o in self.placement_scores:
                data["offer"]["placement_score"] = self.placement_scores[o]
        if d.choice is Choice.SPOT:
            data["zone_index"] = d.zone
        return data


# Recovery policy -> the placement policies its controller consults (one zone, several zones).
PLACEMENT_BY_RECOVERY: dict[str, tuple[str, str]] = {
    "deadline-aware": ("deadline-aware", "multi-zone"),
    "expected-cost": ("expected-cost", "expected-cost-multi-zone"),
    "markov-dp": ("markov-dp", "markov-dp-multi-zone"),
}


def band_prior_up_hours(offer: ScoredOffer, base_hours: float = 1.0) -> float:
    """Prior mean up spell of a zone from its offer's interruption hazard (its Spot Advisor band):
    `base_hours` for AWS's average band, longer for calmer bands, shorter for busier ones, within
    0.25x-4x of it. The bands are monthly shares of instances interrupted, far from the hour-scale
    spells of the traces, so only their ratio is used, and the run's own spells soon outweigh it."""
    from pricing.risk import CLOUD_DEFAULTS

    h = offer.hazard_per_hour
    if h is None or h <= 0:
        return base_hours
    return min(4.0, max(0.25, CLOUD_DEFAULTS["aws"] / h)) * base_hours


def placement_for(recovery: RecoveryPolicy, ranked: tuple[ScoredOffer, ...], *, has_deadline: bool) -> PlacementPolicy | None:
    """The placement policy a run's controller consults at every tick-equivalent: with a deadline
    and the `deadline-aware` recovery policy (the default then), `multi-zone` when the plan offers
    spot in several places, else `deadline-aware`; with `expected-cost`, `expected-cost-multi-zone`
    or `expected-cost` (priors of each zone's spells from its interruption band, given by `PlacementDriver`);
    with `markov-dp`, `markov-dp-multi-zone` or `markov-dp` likewise.
    Other recovery policies keep their own rule."""
    if not has_deadline or recovery.name not in PLACEMENT_BY_RECOVERY:
        return None
    spots = spot_zones(ranked)
    if not spots:
        return None  # nothing to wait for or move to: the recovery policy places on-demand at once
    single, multi = PLACEMENT_BY_RECOVERY[recovery.name]
    name = multi if len(spots) > 1 else single
    if recovery.name in ("expected-cost", "markov-dp"):  # zones' priors come from their bands (PlacementDriver)
        return get_placement_policy(name, band_priors=True)
    return get_placement_policy(name)
