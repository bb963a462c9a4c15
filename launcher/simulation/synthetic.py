"""Seeded synthetic spot availability traces, in the simulator's trace format, for a hold-out set.

The public traces show a few availability patterns; policies tuned on them can fail on others.
Each *regime* here is an alternating renewal process (capacity up for a random spell, then down
for a random spell) with its own spell lengths, per zone, or a shared daily cycle:

| regime | what it looks like |
|---|---|
| `flapping` | capacity comes and goes every tens of minutes (spells ~ 20-40 min) |
| `long-outages` | long availability, broken by outages of many hours (5-20 h) |
| `scarce` | capacity rare and short (up ~ 1 h, down ~ 4 h) |
| `mostly-available` | capacity nearly always there (down ~ 20 min every ~ 12 h) |
| `daily-correlated` | every zone loses capacity at the same hours each day (a shared busy window) |
| `independent` | zones fail independently, each with its own (random) spell lengths |

Spell lengths are lognormal around the regime's means (heavy-ish tails, as in the real traces).
`generate(regime, zones=Z, hours=H, seed=S)` returns Z traces; the same arguments give the same
traces on every machine (one `random.Random(seed)` drives everything). `draw(...)` also returns each
zone's mean spells as drawn (`ZoneSpells`): what a policy could at best know of a zone, which the
benchmark gives a policy to separate the cost of estimating spells from the cost of its rule.
`to_json(trace)` is the `{"metadata": {"gap_seconds": G}, "data": [0|1, ...]}` object (1 = no capacity).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from launcher.errors import UnknownNameError
from launcher.simulation.traces import Trace

DEFAULT_GAP_SECONDS = 300.0


@dataclass(frozen=True)
class Regime:
    name: str
    up_hours: tuple[float, float]  # range the per-zone mean up-spell is drawn from
    down_hours: tuple[float, float]  # likewise for down-spells
    sigma: float = 0.6  # lognormal shape of each spell around the zone's mean
    daily_window_hours: tuple[float, float] | None = None  # shared daily outage: (start hour, length)
    description: str = ""


REGIMES: dict[str, Regime] = {
    r.name: r
    for r in (
        Regime("flapping", (0.3, 0.6), (0.3, 0.6), 0.5, description="on and off every tens of minutes"),
        Regime("long-outages", (12.0, 30.0), (5.0, 20.0), 0.5, description="outages of many hours"),
        Regime("scarce", (0.5, 1.5), (3.0, 6.0), 0.7, description="capacity rare and short"),
        Regime("mostly-available", (8.0, 16.0), (0.2, 0.5), 0.6, description="capacity nearly always there"),
        Regime(
            "daily-correlated", (20.0, 40.0), (0.5, 1.0), 0.5, daily_window_hours=(9.0, 8.0),
            description="all zones lose capacity at the same hours each day",
        ),
        Regime("independent", (1.0, 12.0), (0.5, 8.0), 0.8, description="zones fail independently, unlike each other"),
    )
}


def regime(name: str) -> Regime:
    try:
        return REGIMES[name]
    except KeyError:
        raise UnknownNameError("trace regime", name, REGIMES) from None


def _spell(rng: random.Random, mean_hours: float, sigma: float) -> float:
    # Lognormal with the given mean: mu = ln(mean) - sigma^2 / 2.
    return rng.lognormvariate(math.log(mean_hours) - sigma * sigma / 2, sigma)


def _renewal(rng: random.Random, n: int, gap_h: float, up_mean: float, down_mean: float, sigma: float) -> list[bool]:
    out: list[bool] = []
    up = rng.random() < up_mean / (up_mean + down_mean)  # start in the stationary mix
    while len(out) < n:
        length = max(1, round(_spell(rng, up_mean if up else down_mean, sigma) / gap_h))
        out.extend([up] * length)
        up = not up
    return out[:n]


@dataclass(frozen=True)
class ZoneSpells:
    """A zone's mean spells, as drawn from its regime (before the daily window, if any, cuts them)."""

    up_mean_hours: float
    down_mean_hours: float


def generate(
    name: str, *, zones: int = 1, hours: float = 96.0, seed: int = 0, gap_seconds: float = DEFAULT_GAP_SECONDS
) -> tuple[Trace, ...]:
    """`zones` traces of `hours` in regime `name`, reproducible from `seed`."""
    return draw(name, zones=zones, hours=hours, seed=seed, gap_seconds=gap_seconds)[0]


def draw(
    name: str, *, zones: int = 1, hours: float = 96.0, seed: int = 0, gap_seconds: float = DEFAULT_GAP_SECONDS
) -> tuple[tuple[Trace, ...], tuple[ZoneSpells, ...]]:
    """`generate`'s traces and the mean spells each zone's trace was drawn with."""
    if zones < 1 or hours <= 0 or gap_seconds <= 0:
        raise ValueError("zones >= 1, hours > 0 and gap_seconds > 0")
    r = regime(name)
    rng = random.Random(f"{name}:{seed}")
    gap_h = gap_seconds / 3600.0
    n = max(1, math.ceil(hours / gap_h))
    shared_down: list[bool] | None = None
    if r.daily_window_hours is not None:
        start_h, length_h = r.daily_window_hours
        shared_down = []
        day_shift = [rng.uniform(-1.0, 1.0) for _ in range(int(hours // 24) + 2)]  # the window wanders a little
        for i in range(n):
            t = i * gap_h
            day = int(t // 24)
            s = start_h + day_shift[day]
            shared_down.append(s <= t % 24 < s + length_h)
    out, means = [], []
    for z in range(zones):
        up_mean = rng.uniform(*r.up_hours)
        down_mean = rng.uniform(*r.down_hours)
        avail = _renewal(rng, n, gap_h, up_mean, down_mean, r.sigma)
        if shared_down is not None:
            avail = [a and not d for a, d in zip(avail, shared_down)]
        out.append(Trace(name=f"synthetic/{name}/seed{seed}/zone{z}", gap_seconds=float(gap_seconds), available=tuple(avail)))
        means.append(ZoneSpells(up_mean, down_mean))
    return tuple(out), tuple(means)


def to_json(trace: Trace) -> dict:
    """The trace-file object (`launcher simulate --trace-root` reads these)."""
    return {"metadata": {"gap_seconds": trace.gap_seconds}, "data": [0 if a else 1 for a in trace.available]}


def write(out_dir, name: str, *, zones: int = 1, hours: float = 96.0, seed: int = 0,
          gap_seconds: float = DEFAULT_GAP_SECONDS) -> list:  # fmt: skip
    """Write the traces as `OUT/<regime>/seed<S>/zone<i>.json` (a `--trace-root` for `launcher simulate`)."""
    import json
    from pathlib import Path

    from launcher.atomic import atomic_write_text

    paths = []
    for i, t in enumerate(generate(name, zones=zones, hours=hours, seed=seed, gap_seconds=gap_seconds)):
        p = Path(out_dir) / name / f"seed{seed}" / f"zone{i}.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, json.dumps(to_json(t)))
        paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> int:
    """python -m launcher.simulation.synthetic REGIME --out DIR [--zones Z] [--hours H] [--seed S]"""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m launcher.simulation.synthetic", description=main.__doc__)
    ap.add_argument("regime", choices=list(REGIMES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--zones", type=int, default=1)
    ap.add_argument("--hours", type=float, default=96.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gap-seconds", type=float, default=DEFAULT_GAP_SECONDS)
    a = ap.parse_args(argv)
    for p in write(a.out, a.regime, zones=a.zones, hours=a.hours, seed=a.seed, gap_seconds=a.gap_seconds):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
