"""Which recovery policy the controller asks after a preemption, node loss or failed provision.

The registry lives in `launcher.policies.recovery` (`get_recovery_policy(name)`); until that
module exists, the controller falls back to `NextOfferPolicy`, the simplest useful rule.
"""

from __future__ import annotations

from launcher.errors import UnknownNameError
from launcher.policies.base import RecoveryContext, RecoveryDecision, RecoveryPolicy

FALLBACK_NAME = "next-offer"


class NextOfferPolicy(RecoveryPolicy):
    """First start: the best offer. After that: the next offer in the ranking that has not been
    tried, skipping regions that preempted us; when every offer was tried, the previous one."""

    name = FALLBACK_NAME

    def choose(self, ctx: RecoveryContext) -> RecoveryDecision:
        if not ctx.ranked:
            return RecoveryDecision(None, wait_seconds=60.0, reason="no offers")
        if ctx.previous is None:
            return RecoveryDecision(ctx.ranked[0], reason="best offer")
        tried = {s.offer for s in ctx.tried} | {ctx.previous.offer}
        bad_regions = set(ctx.preempted_regions)
        start = next((i for i, s in enumerate(ctx.ranked) if s.offer == ctx.previous.offer), -1) + 1
        order = list(ctx.ranked[start:]) + list(ctx.ranked[:start])
        for s in order:
            if s.offer not in tried and s.offer.region not in bad_regions:
                return RecoveryDecision(s, reason="next offer in the ranking")
        for s in order:
            if s.offer not in tried:
                return RecoveryDecision(s, reason="next untried offer (all regions preempted)")
        return RecoveryDecision(ctx.previous, reason="every offer tried; same offer again")


def recovery_policy(name: str | None, *, has_deadline: bool = False) -> RecoveryPolicy:
    """The named policy (None = the registry's default: `deadline-aware` when the spec has a
    deadline, else `next-offer`). UnknownNameError lists the known names."""
    try:
        from launcher.policies import recovery as registry
    except ImportError:  # registry not available: our fallback only
        if name not in (None, FALLBACK_NAME):
            raise UnknownNameError("recovery policy", name, [FALLBACK_NAME]) from None
        return NextOfferPolicy()
    if name is None:
        default = getattr(registry, "default_recovery_policy", None)
        name = default(has_deadline) if default else FALLBACK_NAME
    return registry.get_recovery_policy(name)
