"""What a run last saw of each zone's spot capacity, and the chance of capacity since then.

Without a capacity signal (AWS, GCP) a zone the run does not hold is shown available but not seen
(`DecisionState.spot_observed`); the policies then weigh a try by the chance it has capacity now,
which a two-state chain gives from what was last seen and how long ago.
"""

from __future__ import annotations

import math


def chain_p_up(p0: float, leave_up_per_hour: float, leave_down_per_hour: float, hours: float) -> float:
    """Chance of up after `hours` in a two-state chain with these rates, starting up with chance `p0`:
    it relaxes from `p0` to the chain's share of time up at the sum of the rates."""
    rate = leave_up_per_hour + leave_down_per_hour
    share = leave_down_per_hour / rate
    return share + (p0 - share) * math.exp(-rate * max(0.0, hours))


class LastSeen:
    """Per zone (index), when its capacity was last seen and whether it was up."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[float, bool]] = {}

    def observe(self, zone: int, now_hours: float, up: bool | None) -> None:
        if up is not None:
            self._seen[zone] = (now_hours, up)

    def get(self, zone: int) -> tuple[float, bool] | None:
        """(when, up) it was last seen, or None if never."""
        return self._seen.get(zone)

    def since_text(self, zone: int, now_hours: float) -> str:
        """'never seen' or 'seen down 0.8 h ago', for decision reasons."""
        seen = self._seen.get(zone)
        if seen is None:
            return "never seen"
        # Rounded to the microhour first: the controller's clock (seconds) and the simulator's ticks
        # give 1.75 h as 1.7499999 and 1.7500001, and a reason must not depend on which.
        return f"seen {'up' if seen[1] else 'down'} {round(now_hours - seen[0], 6):.1f} h ago"
