"""A per-zone model of spot availability learnt from what a run observes: the `expected-cost` policy's model.

Capacity in a zone is a two-state (up / down) Markov chain in continuous time whose rates depend on the
hour of the day (hours of the run's clock, modulo 24: the run sees its own age, not the wall clock, so
a daily cycle is learnt in the run's phase). Rates carry their uncertainty as Gamma posteriors:

    overall rate up->down   ~ Gamma(w + ends seen,           w * prior_up_hours + time seen up)
    rate up->down in hour h ~ Gamma(c * overall + ends in h, c + time seen up in h)

(likewise down->up; `c` = `bin_weight_hours` of pseudo-observation), so an hour with little evidence
falls back on the zone's overall rate, and the
overall rate on the prior (`prior_up_hours`, from the offer's interruption band when the controller
knows it). The running spell counts as time seen (the exposure estimator: a zone up for a day is not
called short because its only completed spell was the truncated first one).

One day of observations cannot tell a daily cycle from a drift: hour 3 of day 1 looked good, but
is that because of the hour or because it was early? With `cycle_prior` set, the hour bins are
weighed by the posterior probability `w` that the rates follow the hour of day at all, against a
flat (one-rate) model. Each observation is scored, before it is added, under both: the flat model's
rate and the hour bin's rate from earlier days only (`_scored_rates`), so the first day is no evidence
either way and a cycle must repeat to earn weight. The bins then count with weight `w` (a tempered
likelihood, which keeps the posterior Gamma):

    rate up->down in hour h ~ Gamma(c * overall + w * ends in h, c + w * time seen up in h)

Without `cycle_prior` (the `expected-cost` policy) `w` is 1.

Where the cloud cannot report capacity, a run sees a zone only while it holds a cluster there or
tries one; between two observations it assumes the earlier state held (a short wait between probes of
a zone seen down is most likely down throughout). With `gap_spells` set, a gap longer than that many
of the earlier state's mean spells is no evidence: the spell then running is closed as censored (its
time counts, no end) and a new one starts at the next observation. Otherwise a day on on-demand
between a zone seen down and seen up again would be counted as one day-long outage.

Predictions use the posterior predictive, not only the mean rate: the chance that an up spell
survives `dt` hours is E[exp(-λ dt)] = (β / (β + dt))^α, heavier-tailed than exp(-mean λ dt) while
evidence is thin (a few spells), converging to it as spells are seen.
"""

from __future__ import annotations

import math
import random

from launcher.policies.zone_history import ZoneHistory

HOURS_PER_DAY = 24
CYCLE_SHOWN = 0.3  # a daily profile whose hours differ by this much in share up is called a cycle


def checked_gap_spells(gap_spells: float | None) -> float | None:
    """`gap_spells` as given, or ValueError unless a number > 0 or None."""
    if gap_spells is not None and (isinstance(gap_spells, bool) or not isinstance(gap_spells, int | float)
                                   or not gap_spells > 0):  # fmt: skip
        raise ValueError("gap_spells must be > 0, or None")
    return gap_spells


def gap_is_evidence(gap_hours: float, mean_spell_hours: float, gap_spells: float | None) -> bool:
    """Does a gap of `gap_hours` between two observations of a zone count as the state seen first?
    Yes up to `gap_spells` of that state's mean spell (None: always); a longer one is no evidence
    of what held in it (a run on on-demand for a day between a zone seen down and seen up)."""
    return gap_spells is None or gap_hours <= gap_spells * mean_spell_hours


class ZoneModel:
    """One zone's spells up and down, by hour of the run's day."""

    __slots__ = ("prior_up_hours", "prior_down_hours", "prior_weight", "bin_weight", "_state", "_since", "_last",
                 "_exp", "_ends", "_bexp", "_bends", "_prior_logit", "_llr", "_sday", "_sexp", "_sends",
                 "gap_spells")  # fmt: skip

    def __init__(self, prior_up_hours: float, prior_down_hours: float, prior_weight: float = 0.5,
                 bin_weight: float = 1.0, cycle_prior: float | None = None,
                 gap_spells: float | None = None) -> None:  # fmt: skip
        if min(prior_up_hours, prior_down_hours, prior_weight, bin_weight) <= 0:
            raise ValueError("model priors and weights must be > 0")
        self.gap_spells = checked_gap_spells(gap_spells)
        if cycle_prior is not None and not 0.0 < cycle_prior < 1.0:
            raise ValueError("cycle_prior must be in (0, 1)")
        self._prior_logit = None if cycle_prior is None else math.log(cycle_prior / (1.0 - cycle_prior))
        self._llr = 0.0  # log likelihood ratio, daily-cycle model over flat model, of what was seen
        self._sday = [-1] * HOURS_PER_DAY  # day of the run each bin's snapshot was taken on
        self._sexp = [[0.0] * HOURS_PER_DAY, [0.0] * HOURS_PER_DAY]  # bins as they were before that day
        self._sends = [[0] * HOURS_PER_DAY, [0] * HOURS_PER_DAY]
        self.prior_up_hours = prior_up_hours
        self.prior_down_hours = prior_down_hours
        self.prior_weight = prior_weight
        self.bin_weight = bin_weight
        self._state: bool | None = None  # up now?
        self._since = 0.0  # when the current spell was first seen
        self._last = 0.0  # last observation time
        self._exp = [0.0, 0.0]  # time seen [down, up], completed part (the running spell is added on read)
        self._ends = [0, 0]  # spells ended [down->up, up->down]
        self._bexp = [[0.0] * HOURS_PER_DAY, [0.0] * HOURS_PER_DAY]  # per hour bin, time seen [down, up]
        self._bends = [[0] * HOURS_PER_DAY, [0] * HOURS_PER_DAY]  # per hour bin, spells ended [down, up]

    # ---- observing ------------------------------------------------------------------------------
    def observe(self, now_hours: float, up: bool) -> None:
        if self._state is None:
            self._state, self._since, self._last = up, now_hours, now_hours
            return
        dt = now_hours - self._last
        if dt < 0:
            return
        s = int(self._state)
        if not gap_is_evidence(dt, self.mean_hours(s), self.gap_spells):
            self._exp[s] += self._last - self._since  # the spell seen so far: censored, no end
            self._state, self._since, self._last = up, now_hours, now_hours
            return
        if dt > 0:
            self._add_time(s, self._last, now_hours)
        if up != self._state:
            if now_hours == self._since:
                self._state = up  # asked twice at one instant: no spell was seen
                return
            # The change happened between the last observation and this one: its hour is theirs.
            mid = (self._last + now_hours) / 2
            h = int(mid % HOURS_PER_DAY)
            if self._prior_logit is not None:
                rc, rf = self._scored_rates(s, mid)
                self._llr += math.log(rc / rf)
            self._exp[s] += now_hours - self._since
            self._ends[s] += 1
            self._bends[s][h] += 1
            self._state, self._since = up, now_hours
        self._last = now_hours

    def _add_time(self, s: int, t0: float, t1: float) -> None:
        row = self._bexp[s]
        while t1 - t0 > 1e-12:
            h = int(t0 % HOURS_PER_DAY)
            edge = min(t1, math.floor(t0) + 1.0)
            if self._prior_logit is not None:
                rc, rf = self._scored_rates(s, t0)
                self._llr -= (rc - rf) * (edge - t0)
            row[h] += edge - t0
            t0 = edge

    def _scored_rates(self, s: int, t: float) -> tuple[float, float]:
        """The rates of leaving state s at run time t that the daily-cycle model and the flat model
        predicted before seeing it: the cycle model's from its hour bin as it was before this day."""
        h, day = int(t % HOURS_PER_DAY), int(t // HOURS_PER_DAY)
        if self._sday[h] != day:
            self._sday[h] = day
            for k in (0, 1):
                self._sexp[k][h], self._sends[k][h] = self._bexp[k][h], self._bends[k][h]
        a, b = self._posterior(s)
        flat, c = a / b, self.bin_weight
        return (c * flat + self._sends[s][h]) / (c + self._sexp[s][h]), flat

    @property
    def cycle_weight(self) -> float:
        """Posterior probability that the rates follow the hour of the day (1 without `cycle_prior`)."""
        if self._prior_logit is None:
            return 1.0
        x = self._prior_logit + self._llr
        return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0

    def seed(self, history: ZoneHistory) -> None:
        """Evidence from before this run (`ZoneHistory`: up time and preemptions, outages and their
        ends). It has no hour of day: it goes to the overall rates only."""
        self._exp[1] += history.up_hours
        self._ends[1] += history.preemptions
        self._exp[0] += history.down_hours
        self._ends[0] += history.recoveries

    # ---- reading --------------------------------------------------------------------------------
    @property
    def up(self) -> bool:
        return bool(self._state)

    @property
    def age_hours(self) -> float:
        return self._last - self._since if self._state is not None else 0.0

    def _posterior(self, s: int) -> tuple[float, float]:
        """(alpha, beta) of the overall rate of leaving state s (s = 1: up->down)."""
        prior = self.prior_up_hours if s else self.prior_down_hours
        seen = self._exp[s] + (self._last - self._since if self._state is not None and int(self._state) == s else 0.0)
        return self.prior_weight + self._ends[s], self.prior_weight * prior + seen

    def rate_quantile_factor(self, s: int, q: float) -> float:
        """The overall rate of leaving state s at its posterior q-quantile, over the posterior mean:
        with chance q the rate is below the mean times this."""
        from scipy.special import gammaincinv  # the Gamma quantile; imported here, only plans need it

        a, _ = self._posterior(s)
        return float(gammaincinv(a, q)) / a

    def drawn_mean_hours(self, s: int, rng: random.Random) -> float:
        """The mean spell in state s under one draw of its overall rate from the posterior (for
        Thompson sampling: it exceeds a threshold as often as the posterior says it may)."""
        a, b = self._posterior(s)
        return b / max(rng.gammavariate(a, 1.0), 1e-300)

    def mean_hours(self, s: int) -> float:
        """Mean spell in state s (1 = up): time seen in it over spells seen ending, with the prior."""
        a, b = self._posterior(s)
        return b / a

    def rate_posterior(self, s: int, hour: int) -> tuple[float, float]:
        """(alpha, beta) of the rate of leaving state s in hour-of-day bin `hour`."""
        a, b = self._posterior(s)
        c, w = self.bin_weight, self.cycle_weight
        # The running spell's time is already in the bins (added as observed).
        return c * a / b + w * self._bends[s][hour], c + w * self._bexp[s][hour]

    def survival(self, s: int, t: float, dt: float) -> float:
        """Posterior predictive chance that a spell in state s at run time `t` (hours) lasts `dt`
        more hours: the product over the hours of the day it crosses."""
        out = 1.0
        end = t + dt
        while end - t > 1e-12:
            edge = min(end, math.floor(t) + 1.0)
            a, b = self.rate_posterior(s, int(t % HOURS_PER_DAY))
            out *= (b / (b + edge - t)) ** a
            t = edge
        return out

    def daily_profile(self) -> list[float]:
        """Share of time up per hour of the run's day, leaning on the zone's overall share (worth
        one hour of observation) where an hour has been seen little."""
        up_all, down_all = self.mean_hours(1), self.mean_hours(0)
        share = up_all / (up_all + down_all)
        return [(share + u) / (1.0 + u + d) for u, d in zip(self._bexp[1], self._bexp[0])]

    def seen_hours(self) -> float:
        return sum(self._exp) + (self._last - self._since if self._state is not None else 0.0)

    def cycle_text(self) -> str:
        """' (daily cycle, up most at run hour H: X%, least at ...)' once a day has been seen and the
        hours differ by `CYCLE_SHOWN` in share up, else ''; for decision reasons."""
        if self.seen_hours() < HOURS_PER_DAY or self.cycle_weight < 0.5:
            return ""
        prof = self.daily_profile()
        hi, lo = max(prof), min(prof)
        if hi - lo < CYCLE_SHOWN:
            return ""
        odds = "" if self._prior_logit is None else f", {100 * self.cycle_weight:.0f}% sure"
        return f" (daily cycle{odds}, up most at run hour {prof.index(hi)}: {100 * hi:.0f}%, least at {prof.index(lo)}: {100 * lo:.0f}%)"
