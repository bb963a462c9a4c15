"""What a run has seen of each zone's spot capacity: how long its spells up and down last.

Availability spells differ by orders of magnitude between regimes (minutes when capacity flaps,
days when it is plentiful). Whether a move onto spot pays depends on how long the spell it lands in
will last, so the policies estimate the mean spell per zone from the run itself.

The estimate is the exposure estimator of a memoryless spell length, with a prior:

    mean_up = (w * prior_up + time seen up) / (w + spells seen ending up)

Time seen up includes the spell still running and the part of the first spell before the run
started is simply unseen; both are right for memoryless spells, and unlike an average of completed
spells it does not call a zone that has been up for a day "short" because its only completed spell
was the truncated first one. `w` is the prior's weight in spells: small, so that a few short spells
are enough to recognise flapping capacity. `seed` adds what was seen of a zone before the run (time
held on its spot capacity and the preemptions that ended it, its outages and their ends:
`ZoneHistory`) to its spells, as if seen in this run.

Where the cloud cannot report capacity (`None`: not seen), a zone's running spell counts only as far
as it was last seen: a run on on-demand that last saw the zone down a day ago has seen one minute of
outage, not a day of it (counted to the clock, the outage grew by the hour, the chance of capacity
read from it fell, and the run never looked again). The state seen first is assumed to hold until
the next observation only for gaps up to `gap_spells` of its mean spells
(`availability_model.gap_is_evidence`, the rule the model-based policies' estimate follows); a
longer gap closes the spell unended and a new one starts when the zone is next seen.
"""

from __future__ import annotations

import random

from launcher.policies.availability_model import checked_gap_spells, gap_is_evidence
from launcher.policies.zone_history import ZoneHistory


class SpellTracker:
    __slots__ = ("prior_up_hours", "prior_down_hours", "prior_weight", "gap_spells", "_state", "_since", "_last",
                 "_exposure", "_ends", "_seed")  # fmt: skip

    def __init__(self, prior_up_hours: float, prior_down_hours: float, prior_weight: float = 1.0,
                 gap_spells: float | None = 3.0) -> None:  # fmt: skip
        self.gap_spells = checked_gap_spells(gap_spells)
        self.prior_up_hours = prior_up_hours
        self.prior_down_hours = prior_down_hours
        self.prior_weight = prior_weight
        self._state: list[bool | None] = []  # per zone: up now? (None: not seen yet)
        self._since: list[float] = []  # when the current spell was first seen
        self._last: list[float] = []  # when the zone was last seen
        self._exposure: list[list[float]] = []  # per zone: [completed time down, completed time up]
        self._ends: list[list[int]] = []  # per zone: [spells down ended, spells up ended]
        self._seed: dict[int, ZoneHistory] = {}  # zone -> what was seen of it before this run

    def seed(self, z: int, history: ZoneHistory) -> None:
        """Evidence from before this run of zone `z`: its up time and preemptions, its outages."""
        self._seed[z] = history

    def observe(self, now_hours: float, available: tuple[bool | None, ...]) -> None:
        """Capacity per zone now; None = not seen (nothing is counted for it: its running spell counts
        to when it was last seen)."""
        for z, up in enumerate(available):
            if z >= len(self._state):
                self._state.append(up)
                self._since.append(now_hours)
                self._last.append(now_hours)
                self._exposure.append([0.0, 0.0])
                self._ends.append([0, 0])
                continue
            if up is None:
                continue
            prev = self._state[z]
            if prev is None:
                self._state[z], self._since[z] = up, now_hours  # first seen: no spell ended
            elif not gap_is_evidence(now_hours - self._last[z], self._mean(z, prev), self.gap_spells):
                self._exposure[z][int(prev)] += self._last[z] - self._since[z]  # seen so far: censored, no end
                self._state[z], self._since[z] = up, now_hours
            elif prev != up and now_hours == self._since[z]:
                self._state[z] = up  # asked twice at one instant: no spell was seen
            elif prev != up:
                self._exposure[z][int(prev)] += now_hours - self._since[z]
                self._ends[z][int(prev)] += 1
                self._state[z], self._since[z] = up, now_hours
            self._last[z] = now_hours

    def _running(self, z: int) -> float:
        """Hours of zone z's current spell seen so far: to the last time it was seen, not to now."""
        return self._last[z] - self._since[z]

    def _posterior(self, z: int, up: bool, prior: float | None = None) -> tuple[float, float]:
        """(alpha, beta) of the Gamma posterior of zone z's rate of leaving the state: the prior and
        the seed as pseudo-spells plus the spells seen ended, and the hours behind them."""
        if prior is None:
            prior = self.prior_up_hours if up else self.prior_down_hours
        h = self._seed.get(z)
        seed_h, seed_n = (0.0, 0) if h is None else (h.up_hours, h.preemptions) if up else (h.down_hours, h.recoveries)
        if z >= len(self._state):
            return self.prior_weight + seed_n, self.prior_weight * prior + seed_h
        seen = self._exposure[z][int(up)] + (self._running(z) if self._state[z] == up else 0.0)
        return self.prior_weight + seed_n + self._ends[z][int(up)], self.prior_weight * prior + seed_h + seen

    def _mean(self, z: int, up: bool, prior: float | None = None) -> float:
        alpha, beta = self._posterior(z, up, prior)
        return beta / alpha

    def mean_up(self, z: int) -> float:
        """Expected length of an up spell in zone `z` (hours); also the expected time left of the
        one running now (memoryless)."""
        return self._mean(z, True, self.prior_up_hours)

    def mean_down(self, z: int) -> float:
        return self._mean(z, False, self.prior_down_hours)

    def drawn_mean_up(self, z: int, rng: random.Random) -> float:
        """Zone `z`'s mean up spell under one draw of its rate from the Gamma posterior that
        `mean_up` is the mean of (prior and seed as pseudo-spells, the spells seen ended over the
        time seen up): it exceeds a threshold as often as the evidence leaves room for."""
        alpha, beta = self._posterior(z, True)
        return beta / max(rng.gammavariate(alpha, 1.0), 1e-300)

    def up_fraction(self, z: int, prior_fraction: float, prior_hours: float) -> float:
        """Share of the time zone `z` has had capacity, starting from `prior_fraction` worth
        `prior_hours` of observation."""
        if z >= len(self._state):
            return prior_fraction
        state, running = self._state[z], self._running(z)
        up = self._exposure[z][1] + (running if state is not None and state else 0.0)
        down = self._exposure[z][0] + (running if state is not None and not state else 0.0)
        return (prior_fraction * prior_hours + up) / (prior_hours + up + down)

    def age(self, z: int) -> float:
        """How long zone `z` has been in its current state (hours, from first to last seen)."""
        return self._running(z) if z < len(self._since) else 0.0


class KnownSpells(SpellTracker):
    """A tracker told each zone's true mean spells (the synthetic generator's parameters) instead
    of estimating them; zones it is not told about are estimated as usual. No policy uses it when
    placing jobs: the benchmark gives it to a policy to tell the cost of estimating spells from
    the run apart from the cost of the policy's rule (`bench/bench_policies.py`, known spells)."""

    __slots__ = ("_known",)

    def __init__(self, means_hours: tuple[tuple[float, float], ...], prior_up_hours: float, prior_down_hours: float,
                 prior_weight: float = 1.0, gap_spells: float | None = 3.0) -> None:  # fmt: skip
        super().__init__(prior_up_hours, prior_down_hours, prior_weight, gap_spells)
        if any(u <= 0 or d <= 0 for u, d in means_hours):
            raise ValueError("known mean spells must be > 0")
        self._known = means_hours  # per zone: (mean up, mean down) in hours

    def mean_up(self, z: int) -> float:
        return self._known[z][0] if z < len(self._known) else super().mean_up(z)

    def mean_down(self, z: int) -> float:
        return self._known[z][1] if z < len(self._known) else super().mean_down(z)

    def drawn_mean_up(self, z: int, rng: random.Random) -> float:
        return self._known[z][0] if z < len(self._known) else super().drawn_mean_up(z, rng)

    def up_fraction(self, z: int, prior_fraction: float, prior_hours: float) -> float:
        if z >= len(self._known):
            return super().up_fraction(z, prior_fraction, prior_hours)
        u, d = self._known[z]
        return u / (u + d)
