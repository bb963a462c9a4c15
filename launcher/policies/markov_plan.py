"""`markov-dp`'s plan: the tables solved for the availability model estimated so far, and how a
decision reads them.

`Solve` turns a zone's model (`availability_model.ZoneModel`) into per-tick probabilities over the time
left and runs the exact DP (`chain_dp.solve_chain`) a chunk at a time; the finished `Plan` holds the
tables (one per chain of `scenario_factors`) and reads each action's expected cost to finish at a
decision's tick and progress. `blended_options` reads them where capacity is up only with a chance (a
cloud that cannot report it); `estimate_text` and `saving_text` are what a decision's reason says of
the estimate and of what the chosen action saves. `markov-dp` and its multi-zone twin share all of it.
"""

from __future__ import annotations

import math

import numpy as np

from launcher.policies.availability_model import HOURS_PER_DAY, ZoneModel
from launcher.policies.base import Choice, DecisionState
from launcher.policies.chain_dp import pick_action, solve_chain


def blended_options(state: DecisionState, plan: Plan, held: Choice, owed_hours: float,
                    p_up: float) -> dict[Choice, float] | None:  # fmt: skip
    """Each action's expected cost to finish where the plan's zone has capacity with chance `p_up`:
    staying or waiting go on with capacity up or down in that proportion; a try at spot that finds
    none keeps what was held for the tick (on-demand or nothing: the new cluster is launched before
    the old one stops). None past the plan's work."""
    up = plan.options(state, held, owed_hours, True)
    down = plan.options(state, held, owed_hours, False)
    if not up or not down:
        return None
    options = {c: blend(p_up, up[c], down[c]) for c in (Choice.NONE, Choice.ON_DEMAND)}
    kept = held if held is Choice.ON_DEMAND else Choice.NONE
    options[Choice.SPOT] = blend(p_up, up[Choice.SPOT], down[kept])
    return options


def blend(p: float, a: float, b: float) -> float:
    """p * a + (1 - p) * b, where a branch of chance 0 costs nothing (even infinite)."""
    return (p * a if p > 0 else 0.0) + ((1.0 - p) * b if p < 1 else 0.0)


def hourly_rates(model: ZoneModel) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean rates (per hour) of leaving up and leaving down, per hour of the run's day."""
    post = np.array([[model.rate_posterior(s, h) for h in range(HOURS_PER_DAY)] for s in (1, 0)])  # [s, h, (a, b)]
    rates = post[..., 0] / post[..., 1]
    return rates[0], rates[1]


def scenario_factors(model: ZoneModel, n: int) -> list[tuple[float, float]]:
    """The chains a plan is solved for, as factors on the hourly mean rates (up->down, down->up).

    One: the posterior mean. Several: the posterior cut into n slices of equal probability, each
    represented by its middle quantile ((i + 1/2) / n) of the zone's overall rate of leaving up, with
    the rate of leaving down at the opposite quantile, so they run from the most hopeful chain (long
    spells up, short ones down) to the least. A point estimate is as sure of two short spells as of
    two hundred; with few spells seen the hopeful chains differ most from the mean, and what an action
    keeps open for them (waiting for spot rather than committing to on-demand) is in its score. As
    spells are seen, the slices close on the mean and so does the plan."""
    if n == 1:
        return [(1.0, 1.0)]
    qs = [(i + 0.5) / n for i in range(n)]
    return [(model.rate_quantile_factor(1, q), model.rate_quantile_factor(0, 1.0 - q)) for q in qs]


def estimate_text(model: ZoneModel, scenarios: int) -> str:
    """What a reason says of the estimate: 'expected up 0.3 h, down 0.9 h', with the range the plan's
    chains span when it weighs several ('(its 3 chains: up 0.2-1.9 h, down 0.4-2.1 h)'), and the daily
    cycle where one is seen."""
    up, down = model.mean_hours(1), model.mean_hours(0)
    text = f"expected up {up:.1f} h, down {down:.1f} h"
    if scenarios > 1:
        f = scenario_factors(model, scenarios)
        ups, downs = [up / fu for fu, _ in f], [down / fd for _, fd in f]
        text += (f" (its {scenarios} chains: up {min(ups):.1f}-{max(ups):.1f} h, "
                 f"down {min(downs):.1f}-{max(downs):.1f} h)")  # fmt: skip
    return text + model.cycle_text()


class Plan:
    """Solved tables and where they stand in the run: solved at `t0` with `w_ticks` of work left,
    from the hourly `rates` (up, down; the posterior means), one table per chain of
    `scenario_factors` (all of the same shape), with the price on slack `slack_usd_per_hour` (an idle
    hour's charge when one restart's worth of slack is left) in their values. With one table it reads
    the table's own choice; with several, every action's expected cost averaged over them, chosen by
    the table's rule (`chain_dp.pick_action`, `margin`: the idle start margin in USD)."""

    __slots__ = ("tables", "t0", "g", "w_ticks", "rates", "slack_usd_per_hour", "margin")

    def __init__(self, tables: list, t0: float, g: float, w_ticks: int, rates: tuple[np.ndarray, np.ndarray],
                 slack_usd_per_hour: float = 0.0, margin: float = 0.0) -> None:  # fmt: skip
        self.tables, self.t0, self.g, self.w_ticks, self.rates = tables, t0, g, w_ticks, rates
        self.slack_usd_per_hour, self.margin = slack_usd_per_hour, margin

    @property
    def table(self):
        """The first table: the shape (D, O, W, state rows) all of them share."""
        return self.tables[0]

    def release(self) -> None:
        """No longer read: the tables' memory goes to the next solve (`chain_dp.TABLE_MEMORY`)."""
        for tab in self.tables:
            tab.release()

    def lookup(self, state: DecisionState) -> tuple[Choice, float]:
        return self.at(state, state.current, state.overhead_remaining_hours, state.spot_available[state.current_zone])

    def at(self, state: DecisionState, held: Choice, owed_hours: float, up: bool) -> tuple[Choice, float]:
        """The plan's action and expected cost to finish at this decision's time and progress, for
        the cluster `held` (owing `owed_hours` of restart) and capacity `up` in the plan's zone."""
        i, p, owed = self._where(state, owed_hours)
        if len(self.tables) == 1:
            tab = self.tables[0]
            return tab.choose(i, p, held, owed, up), tab.value(i, p, held, owed, up)
        if p >= self.w_ticks:
            return Choice.NONE, 0.0
        options = self._mean_options(i, p, held, owed, up)
        choice = pick_action(options, held, up, self.margin)
        return choice, options[choice]

    def options(self, state: DecisionState, held: Choice, owed_hours: float, up: bool) -> dict[Choice, float]:
        """Each open action's expected cost to finish there (`ChainTable.action_values`, averaged)."""
        i, p, owed = self._where(state, owed_hours)
        return self._mean_options(i, p, held, owed, up)

    def _mean_options(self, i: int, p: int, held: Choice, owed: int, up: bool) -> dict[Choice, float]:
        per = [tab.action_values(i, p, held, owed, up) for tab in self.tables]
        return {c: sum(o[c] for o in per) / len(per) for c in per[0]}

    def idle_values(self, ticks: np.ndarray, progress: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Expected cost to finish idle at these ticks and progress, capacity (down, up), averaged."""
        down = sum(tab.values[ticks, tab.none[0], progress] for tab in self.tables) / len(self.tables)
        up = sum(tab.values[ticks, tab.none[1], progress] for tab in self.tables) / len(self.tables)
        return down, up

    def _where(self, state: DecisionState, owed_hours: float) -> tuple[int, int, int]:
        """The tables' tick, progress and restart ticks owed at this decision."""
        g = self.g
        i = int(math.floor((state.elapsed_hours - self.t0) / g + 1e-6))
        left = max(0.0, state.work_total_hours - state.work_done_hours)
        return i, self.w_ticks - math.ceil(left / g - 1e-6), math.ceil(owed_hours / g - 1e-6)


VERB = {Choice.SPOT: "spot", Choice.ON_DEMAND: "on-demand", Choice.NONE: "wait"}  # what a reason says was chosen
_NAME = {Choice.SPOT: "spot", Choice.ON_DEMAND: "on-demand", Choice.NONE: "waiting"}


def saving_text(options: dict[Choice, float], choice: Choice) -> str:
    """', saving $X over <the next best action>' for a reason (or what the start margin cost). The
    table's values are float32, so differences under half a cent read as a tie."""
    others = {c: v for c, v in options.items() if c is not choice and math.isfinite(v)}
    if not others or choice not in options:
        return ""
    alt = min(others, key=lambda c: (others[c], c.value))
    d = others[alt] - options[choice]
    if d > -0.005:
        return f", saving ${max(d, 0.0):.2f} over {_NAME[alt]}"
    margin = " (within the start margin)" if choice is Choice.SPOT else ""  # spot taken within the margin
    return f", ${-d:.2f} dearer than {_NAME[alt]}{margin}"


class Solve:
    """One solve in progress, a table per chain of `scenario_factors`, one after another: `step()`
    runs a chunk of it and says when it is done (so a decision's work is one chunk however many
    chains there are; the plan arrives that many times later)."""

    def __init__(self, model: ZoneModel, t0: float, left: float, work: float, g: float, overhead: float,
                 od: float, sp: float, chunk: tuple[int, int], margin: float = 0.0,
                 slack_usd_per_hour: float = 0.0, scenarios: int = 1) -> None:  # fmt: skip
        D = max(1, math.floor(left / g + 1e-9))
        W = max(1, math.ceil(work / g - 1e-9))
        O = round(overhead / g)
        W = min(W, max(1, D - O))  # an estimate past what on-demand can do: the safety net decides
        tau = t0 + (np.arange(D) + 0.5) * g
        hours = (tau % HOURS_PER_DAY).astype(int)
        ru, rd = self.rates = hourly_rates(model)
        ticks, width = chunk
        chunk_ticks = max(1, min(ticks, ticks * 2 * width // (W + width)))
        self._gens = [
            solve_chain(np.exp(-g * fu * ru[hours]), np.exp(-g * fd * rd[hours]), W, O, od * g, sp * g, values=True,
                        chunk=chunk_ticks, idle_start_margin=margin, slack_tick_cost=slack_usd_per_hour * g)
            for fu, fd in scenario_factors(model, scenarios)
        ]  # fmt: skip
        self._tables: list = []
        self.t0, self.g, self.W, self.slack_usd_per_hour, self.margin = t0, g, W, slack_usd_per_hour, margin
        self.plan: Plan | None = None

    def step(self) -> bool:
        try:
            next(self._gens[len(self._tables)])
            return False
        except StopIteration as done:
            self._tables.append(done.value)
            if len(self._tables) < len(self._gens):
                return False
            self.plan = Plan(self._tables, self.t0, self.g, self.W, self.rates, self.slack_usd_per_hour, self.margin)
            return True

    def finish(self) -> Plan:
        while not self.step():
            pass
        assert self.plan is not None
        return self.plan
