"""Recovery policies: where the controller places the next attempt after a preemption or node loss.

Registered by name (`get_recovery_policy`, `names`); a task spec picks one with
`launcher: recovery: NAME`, else `default_recovery_policy(has_deadline)`:

- `same-offer`: the offer that just ended, once its capacity is back (waits while the context says
  spot capacity is gone); the first ranked offer at the first start.
- `next-offer`: the next offer in the ranking after the one that ended, wrapping around, with
  regions that preempted us at least `penalize_after` (2) times moved to the back.
- `on-demand`: the cheapest on-demand offer (price per hour, then rank).
- `expected-cost`: the same, asking the `expected-cost` placement policy (and, in the controller, its
  multi-zone twin when the plan offers spot in several places).
- `deadline-aware`: asks the `deadline-aware` placement policy (the same object `launcher simulate`
  runs) for spot / on-demand / wait given `ctx.state`, then takes the best ranked offer of that kind
  (spot offers in the `next-offer` order). Without a state it behaves like `next-offer`.

Policies are pure; one object per run (the adapter keeps its placement policy's per-run state).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from launcher.errors import BadInputError, UnknownNameError
from launcher.policies.base import Choice, RecoveryContext, RecoveryDecision, RecoveryPolicy
from pricing.models import ScoredOffer

DEFAULT_WAIT_SECONDS = 60.0


def offer_key(s: ScoredOffer) -> tuple:
    """Identity of a placement, independent of its (changing) price and score."""
    o = s.offer
    return (o.cloud, o.region, o.zone, o.instance_type, o.spot)


def _penalized_regions(ctx: RecoveryContext, threshold: int) -> set[str]:
    return {r for r, n in Counter(ctx.preempted_regions).items() if n >= threshold}


def _next_order(ctx: RecoveryContext, candidates: Sequence[ScoredOffer], threshold: int) -> list[ScoredOffer]:
    """Candidates in ranking order starting after the previous offer (wrapping), penalized regions last."""
    cands = list(candidates)
    if ctx.previous is not None:
        keys = [offer_key(c) for c in cands]
        prev = offer_key(ctx.previous)
        if prev in keys:
            i = keys.index(prev)
            cands = cands[i + 1 :] + cands[: i + 1]
    bad = _penalized_regions(ctx, threshold)
    return [c for c in cands if c.offer.region not in bad] + [c for c in cands if c.offer.region in bad]


class SameOfferPolicy(RecoveryPolicy):
    name = "same-offer"

    def __init__(self, wait_seconds: float = DEFAULT_WAIT_SECONDS) -> None:
        self.wait_seconds = wait_seconds

    def choose(self, ctx: RecoveryContext) -> RecoveryDecision:
        if not ctx.ranked:
            return RecoveryDecision(None, self.wait_seconds, "no enabled offer")
        if ctx.previous is None:
            return RecoveryDecision(ctx.ranked[0], 0.0, "first start: best ranked offer")
        same = [s for s in ctx.ranked if offer_key(s) == offer_key(ctx.previous)]
        if not same:
            return RecoveryDecision(None, self.wait_seconds, "previous offer is not offered now: wait for it")
        st = ctx.state
        if ctx.previous.offer.spot and st is not None and not st.spot_available[st.current_zone]:
            return RecoveryDecision(None, self.wait_seconds, "previous spot offer has no capacity yet: wait")
        return RecoveryDecision(same[0], 0.0, "retry the same offer")


class NextOfferPolicy(RecoveryPolicy):
    name = "next-offer"

    def __init__(self, penalize_after: int = 2) -> None:
        self.penalize_after = penalize_after

    def choose(self, ctx: RecoveryContext) -> RecoveryDecision:
        order = _next_order(ctx, ctx.ranked, self.penalize_after)
        if not order:
            return RecoveryDecision(None, DEFAULT_WAIT_SECONDS, "no enabled offer")
        bad = _penalized_regions(ctx, self.penalize_after)
        why = "next offer in the ranking" if ctx.previous is not None else "first start: best ranked offer"
        if bad:
            why += f" (avoiding {', '.join(sorted(bad))}: preempted {self.penalize_after}+ times)"
        return RecoveryDecision(order[0], 0.0, why)


def _cheapest_on_demand(ranked: Sequence[ScoredOffer]) -> ScoredOffer | None:
    od = [s for s in ranked if not s.offer.spot]
    return min(od, key=lambda s: (s.offer.price_usd_per_hour, s.rank)) if od else None


class OnDemandRecoveryPolicy(RecoveryPolicy):
    name = "on-demand"

    def choose(self, ctx: RecoveryContext) -> RecoveryDecision:
        best = _cheapest_on_demand(ctx.ranked)
        if best is not None:
            return RecoveryDecision(best, 0.0, "cheapest on-demand offer")
        fallback = NextOfferPolicy().choose(ctx)
        return RecoveryDecision(fallback.offer, fallback.wait_seconds, "no on-demand offer; " + fallback.reason)


class DeadlineAwareRecoveryPolicy(RecoveryPolicy):
    """Adapter from the `deadline-aware` placement policy to a concrete offer."""

    name = "deadline-aware"

    def __init__(self, penalize_after: int = 2, placement: str = "deadline-aware", **placement_params) -> None:
        from launcher.policies.registry import get_placement_policy

        self.penalize_after = penalize_after
        self.placement = get_placement_policy(placement, **placement_params)

    def choose(self, ctx: RecoveryContext) -> RecoveryDecision:
        if ctx.state is None:
            return NextOfferPolicy(self.penalize_after).choose(ctx)
        decision = self.placement.decide(ctx.state)
        spot = _next_order(ctx, [s for s in ctx.ranked if s.offer.spot], self.penalize_after)
        if decision.choice is Choice.SPOT and spot:
            return RecoveryDecision(spot[0], 0.0, f"spot: {decision.reason}")
        if decision.choice is Choice.NONE:
            poll = getattr(self.placement, "poll_hours", DEFAULT_WAIT_SECONDS / 3600.0)
            return RecoveryDecision(None, poll * 3600.0, f"wait: {decision.reason}")
        on_demand = [s for s in ctx.ranked if not s.offer.spot]
        if on_demand:
            why = decision.reason if decision.choice is Choice.ON_DEMAND else "no spot offer"
            return RecoveryDecision(on_demand[0], 0.0, f"on-demand: {why}")
        if spot:  # nothing on-demand to fall back to: the best we can do is spot
            return RecoveryDecision(spot[0], 0.0, f"no on-demand offer; spot instead ({decision.reason})")
        return RecoveryDecision(None, DEFAULT_WAIT_SECONDS, "no enabled offer")


class ExpectedCostRecoveryPolicy(DeadlineAwareRecoveryPolicy):
    """The same adapter over the `expected-cost` placement policy (`launcher: recovery: expected-cost`)."""

    name = "expected-cost"

    def __init__(self, penalize_after: int = 2, placement: str = "expected-cost", **placement_params) -> None:
        super().__init__(penalize_after, placement, **placement_params)


class MarkovDPRecoveryPolicy(DeadlineAwareRecoveryPolicy):
    """The same adapter over the `markov-dp` placement policy (`launcher: recovery: markov-dp`)."""

    name = "markov-dp"

    def __init__(self, penalize_after: int = 2, placement: str = "markov-dp", **placement_params) -> None:
        super().__init__(penalize_after, placement, **placement_params)


_RECOVERY: dict[str, Callable[..., RecoveryPolicy]] = {
    "same-offer": SameOfferPolicy,
    "next-offer": NextOfferPolicy,
    "on-demand": OnDemandRecoveryPolicy,
    "deadline-aware": DeadlineAwareRecoveryPolicy,
    "expected-cost": ExpectedCostRecoveryPolicy,
    "markov-dp": MarkovDPRecoveryPolicy,
}


def names() -> list[str]:
    return list(_RECOVERY)


def get_recovery_policy(name: str, **params) -> RecoveryPolicy:
    """A new recovery policy object by name (one per run)."""
    try:
        factory = _RECOVERY[name]
    except KeyError:
        raise UnknownNameError("recovery policy", name, _RECOVERY) from None
    try:
        return factory(**params)
    except (TypeError, ValueError) as e:
        raise BadInputError(f"bad parameters for recovery policy {name!r}: {e}") from None


def default_recovery_policy(has_deadline: bool) -> str:
    return "deadline-aware" if has_deadline else "next-offer"
