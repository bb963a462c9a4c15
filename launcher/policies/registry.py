"""Placement policies by name. `get_placement_policy("deadline-aware")` returns a fresh object
(policies keep per-run state between `reset` calls, so runs must not share one)."""

from __future__ import annotations

from collections.abc import Callable

from launcher.errors import BadInputError, UnknownNameError
from launcher.policies.base import PlacementPolicy


def _on_demand(**kw) -> PlacementPolicy:
    from launcher.policies.baselines import OnDemandPolicy

    return OnDemandPolicy(**kw)


def _greedy(**kw) -> PlacementPolicy:
    from launcher.policies.baselines import GreedyPolicy

    return GreedyPolicy(**kw)


def _uniform_progress(**kw) -> PlacementPolicy:
    from launcher.policies.baselines import UniformProgressPolicy

    return UniformProgressPolicy(**kw)


def _deadline_aware(**kw) -> PlacementPolicy:
    from launcher.policies.deadline_aware import DeadlineAwarePolicy

    return DeadlineAwarePolicy(**kw)


def _multi_zone(**kw) -> PlacementPolicy:
    from launcher.policies.multi_zone import MultiZonePolicy

    return MultiZonePolicy(**kw)


def _expected_cost(**kw) -> PlacementPolicy:
    from launcher.policies.expected_cost import ExpectedCostPolicy

    return ExpectedCostPolicy(**kw)


def _expected_cost_multi_zone(**kw) -> PlacementPolicy:
    from launcher.policies.expected_cost import ExpectedCostMultiZonePolicy

    return ExpectedCostMultiZonePolicy(**kw)


def _markov_dp(**kw) -> PlacementPolicy:
    from launcher.policies.markov_dp import MarkovDPPolicy

    return MarkovDPPolicy(**kw)


def _markov_dp_multi_zone(**kw) -> PlacementPolicy:
    from launcher.policies.markov_dp_multi_zone import MarkovDPMultiZonePolicy

    return MarkovDPMultiZonePolicy(**kw)


_PLACEMENT: dict[str, Callable[..., PlacementPolicy]] = {
    "on-demand": _on_demand,
    "greedy": _greedy,
    "uniform-progress": _uniform_progress,
    "deadline-aware": _deadline_aware,
    "multi-zone": _multi_zone,
    "expected-cost": _expected_cost,
    "expected-cost-multi-zone": _expected_cost_multi_zone,
    "markov-dp": _markov_dp,
    "markov-dp-multi-zone": _markov_dp_multi_zone,
}

DEFAULT_WITH_DEADLINE = "deadline-aware"


def names() -> list[str]:
    return list(_PLACEMENT)


def get_placement_policy(name: str, **params) -> PlacementPolicy:
    """A new policy object by registered name; `params` go to its constructor."""
    try:
        factory = _PLACEMENT[name]
    except KeyError:
        raise UnknownNameError("placement policy", name, _PLACEMENT) from None
    try:
        return factory(**params)
    except (TypeError, ValueError) as e:
        raise BadInputError(f"bad parameters for placement policy {name!r}: {e}") from None


def register(name: str, factory: Callable[..., PlacementPolicy]) -> None:
    _PLACEMENT[name] = factory
