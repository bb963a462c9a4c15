"""Spot capacity where the cloud cannot say: what the run saw of each zone, and when to look again.

AWS and GCP have no "is there spot capacity in this zone now?" call. What a run sees of a zone is
its own spot cluster running there, a launch refused, and a preemption. `ProbedCapacity` keeps
that per zone: up while a spot cluster runs there; down from a refusal or a preemption until the
next probe, due one placement tick after the first miss and twice as late after each further one
(at most `max_probe`); at a probe, and in a zone never tried or left by choice, the zone is
shown available but *not seen*, so the policy may try it (a launch there is the probe) and the
policies' spell estimates do not learn from it (`DecisionState.spot_observed`).

Counting unknown as available at every tick, as the controller did before, tried a zone in an
outage once a minute (111 refused launches in a two-hour outage) and taught `markov-dp` the
retry rhythm as the zone's spells ("expected up 0.2 h, down 0.2 h").
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass


@dataclass
class _Zone:
    down_since: float | None = None  # last seen without capacity (None: last seen up, or never)
    misses: int = 0  # refusals and preemptions since it last ran
    probe_at: float = 0.0  # when a launch may try it again


class ProbedCapacity:
    """Per zone key (any hashable). Times in one unit of the caller's: the controller's clock in
    seconds, the simulator's tick count (exact, so a probe due at a tick never slips one)."""

    def __init__(self, first_probe: float, max_probe: float) -> None:
        if first_probe <= 0 or max_probe < first_probe:
            raise ValueError("probe intervals must be > 0 and max_probe >= first_probe")
        self.first_probe = first_probe
        self.max_probe = max_probe
        self._zones: dict[Hashable, _Zone] = {}

    def running(self, key: Hashable) -> None:
        """A spot cluster runs in the zone: it has capacity, and the probes start over."""
        self._zones[key] = _Zone()

    def refused(self, key: Hashable, now: float) -> None:
        """A launch was refused, or the cluster preempted: no capacity from now until a probe."""
        z = self._zones.setdefault(key, _Zone())
        z.misses += 1
        z.down_since = now
        z.probe_at = now + self.interval(z.misses)

    def interval(self, misses: int) -> float:
        return min(self.max_probe, self.first_probe * 2.0 ** min(max(misses - 1, 0), 60))

    def refused_within(self, key: Hashable, now: float, span: float) -> bool:
        z = self._zones.get(key)
        return z is not None and z.down_since is not None and now - z.down_since < span

    def view(self, key: Hashable, now: float) -> tuple[bool, bool]:
        """(available, seen) for a zone not held now: seen down until its probe is due; then, and
        for a zone never tried or last seen up, available and not seen."""
        z = self._zones.get(key)
        if z is not None and z.down_since is not None and now < z.probe_at:
            return False, True
        return True, False

    def misses(self, key: Hashable) -> int:
        z = self._zones.get(key)
        return z.misses if z is not None else 0
