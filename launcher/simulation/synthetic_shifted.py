"""A second, differently built generator of spot availability: the **judging** set for placement policies.

Frozen before any policy was tuned and never tuned on (see `JUDGING_SEEDS`): a policy's parameters are
chosen on `launcher.simulation.synthetic` (the tuning generator) and reported here and on the public
traces. It differs from the tuning generator in structure, not only in seeds:

| regime | what it looks like |
|---|---|
| `daily-weekly` | capacity follows a daily and a weekly cycle, each with a random phase and amplitude; spells come from a time-varying Markov chain (no fixed spell law) |
| `regime-shift` | one regime for a random part of the trace, then another one (e.g. plentiful, then flapping): the shift lands in the middle of jobs |
| `zones-fail-together` | a shared outage process (Pareto-long outages) takes every zone down at once; small independent flaps on top |
| `heavy-tail` | Pareto outages (shape 1.1-1.7: most short, a few of a day or more) between Weibull up spells of shape < 1 |
| `mixed` | a daily cycle, Pareto outages shared by the zones, and a shift of the mean up spell half-way |

Ticks are 240 s (the tuning generator's are 300 s). `generate(regime, zones=Z, hours=H, seed=S)` is
reproducible on every machine (one `random.Random` per regime and seed drives everything).
"""

from __future__ import annotations

import math
import random

from launcher.errors import UnknownNameError
from launcher.simulation.traces import Trace

GAP_SECONDS = 240.0
REGIMES: dict[str, str] = {
    "daily-weekly": "daily and weekly cycles with random phase and amplitude",
    "regime-shift": "one regime, then another one in the middle of jobs",
    "zones-fail-together": "shared Pareto outages take every zone down at once",
    "heavy-tail": "Pareto outages between Weibull (shape < 1) up spells",
    "mixed": "daily cycle, shared Pareto outages, and a shift of the up spells",
}
# Frozen with the generator, before tuning: the judging draws. Never tuned on.
JUDGING_SEEDS: tuple[int, ...] = tuple(range(6))
_MAX_SPELL_HOURS = 96.0


def _ticks(hours: float, gap_h: float) -> int:
    return max(1, round(hours / gap_h))


def _pareto(rng: random.Random, scale_h: float, shape: float) -> float:
    return min(_MAX_SPELL_HOURS, scale_h * rng.paretovariate(shape))


def _weibull(rng: random.Random, mean_h: float, shape: float) -> float:
    scale = mean_h / math.gamma(1.0 + 1.0 / shape)
    return min(_MAX_SPELL_HOURS, rng.weibullvariate(scale, shape))


def _alternate(rng: random.Random, n: int, gap_h: float, up_draw, down_draw) -> list[bool]:
    """Alternating spells; `up_draw(t_hours)` / `down_draw(t_hours)` give a spell in hours."""
    out: list[bool] = []
    up = rng.random() < 0.5
    while len(out) < n:
        t = len(out) * gap_h
        out.extend([up] * _ticks(up_draw(t) if up else down_draw(t), gap_h))
        up = not up
    return out[:n]


def _cycle(rng: random.Random) -> tuple[float, float, float, float]:
    """(daily amplitude, daily phase in hours, weekly amplitude, weekly phase in hours)."""
    return rng.uniform(0.15, 0.45), rng.uniform(0, 24), rng.uniform(0.0, 0.25), rng.uniform(0, 168)


def _p_up(t: float, base: float, cyc: tuple[float, float, float, float]) -> float:
    ad, pd, aw, pw = cyc
    p = base + ad * math.sin(2 * math.pi * (t - pd) / 24.0) + aw * math.sin(2 * math.pi * (t - pw) / 168.0)
    return min(0.97, max(0.03, p))


def _markov(rng: random.Random, n: int, gap_h: float, base: float, cyc, memory_h: float, zone_shift_h: float) -> list[bool]:
    """A two-state chain whose stationary share of time up follows the cycles, relaxing to it with
    time constant `memory_h`."""
    nu = 1.0 / memory_h
    out: list[bool] = []
    p = _p_up(zone_shift_h, base, cyc)
    up = rng.random() < p
    for i in range(n):
        p = _p_up(i * gap_h + zone_shift_h, base, cyc)
        if up and rng.random() < 1.0 - math.exp(-nu * (1.0 - p) * gap_h):
            up = False
        elif not up and rng.random() < 1.0 - math.exp(-nu * p * gap_h):
            up = True
        out.append(up)
    return out


_SHIFT_MENU = {  # (up mean h, down mean h) per regime a shift goes from / to
    "plentiful": (12.0, 0.3),
    "flapping": (0.4, 0.4),
    "scarce": (0.8, 4.0),
    "long-outages": (10.0, 10.0),
}


def _zone(kind: str, rng: random.Random, n: int, gap_h: float, shared: dict) -> list[bool]:
    if kind == "daily-weekly":
        return _markov(rng, n, gap_h, shared["base"], shared["cycle"], rng.uniform(0.3, 3.0), rng.uniform(-1.5, 1.5))
    if kind == "regime-shift":
        (u1, d1), (u2, d2) = (_SHIFT_MENU[k] for k in shared["pair"])
        at = shared["shift_h"] + rng.uniform(-2.0, 2.0)
        s1, s2 = rng.uniform(0.7, 1.4), rng.uniform(0.7, 1.4)
        return _alternate(rng, n, gap_h, lambda t: rng.expovariate(1 / (s1 * u1 if t < at else s2 * u2)),
                          lambda t: rng.expovariate(1 / (s1 * d1 if t < at else s2 * d2)))
    if kind == "zones-fail-together":
        own = _alternate(rng, n, gap_h, lambda t: rng.expovariate(1 / rng.uniform(3.0, 10.0)),
                         lambda t: rng.expovariate(1 / 0.25))
        return [a and b for a, b in zip(own, shared["common"])]
    if kind == "heavy-tail":
        mean_up, shape = rng.uniform(2.0, 10.0), rng.uniform(1.1, 1.7)
        return _alternate(rng, n, gap_h, lambda t: _weibull(rng, mean_up, 0.6), lambda t: _pareto(rng, 0.3, shape))
    if kind == "mixed":
        cyc = _markov(rng, n, gap_h, 0.75, shared["cycle"], rng.uniform(0.5, 2.0), rng.uniform(-1.0, 1.0))
        at, u1, u2 = shared["shift_h"], rng.uniform(4.0, 12.0), rng.uniform(0.5, 2.0)
        own = _alternate(rng, n, gap_h, lambda t: rng.expovariate(1 / (u1 if t < at else u2)),
                         lambda t: rng.expovariate(1 / 0.3))
        return [a and b and c for a, b, c in zip(cyc, own, shared["common"])]
    raise UnknownNameError("trace regime", kind, REGIMES)


def _shared(kind: str, rng: random.Random, n: int, gap_h: float, hours: float) -> dict:
    out: dict = {"cycle": _cycle(rng), "base": rng.uniform(0.45, 0.75), "shift_h": rng.uniform(0.15, 0.6) * hours}
    out["pair"] = tuple(rng.sample(sorted(_SHIFT_MENU), 2))
    if kind in ("zones-fail-together", "mixed"):
        up_mean, shape = rng.uniform(4.0, 16.0), rng.uniform(1.2, 1.8)
        out["common"] = _alternate(rng, n, gap_h, lambda t: rng.expovariate(1 / up_mean), lambda t: _pareto(rng, 0.5, shape))
    return out


def generate(name: str, *, zones: int = 1, hours: float = 130.0, seed: int = 0,
             gap_seconds: float = GAP_SECONDS) -> tuple[Trace, ...]:  # fmt: skip
    """`zones` traces of `hours` in regime `name`, reproducible from `seed`."""
    if name not in REGIMES:
        raise UnknownNameError("trace regime", name, REGIMES)
    if zones < 1 or hours <= 0 or gap_seconds <= 0:
        raise ValueError("zones >= 1, hours > 0 and gap_seconds > 0")
    rng = random.Random(f"shifted:{name}:{seed}")
    gap_h = gap_seconds / 3600.0
    n = max(1, math.ceil(hours / gap_h))
    shared = _shared(name, rng, n, gap_h, hours)
    return tuple(
        Trace(name=f"shifted/{name}/seed{seed}/zone{z}", gap_seconds=float(gap_seconds),
              available=tuple(_zone(name, rng, n, gap_h, shared)))  # fmt: skip
        for z in range(zones)
    )
