"""`markov-dp` where the cloud cannot report spot capacity: a zone shown available but not seen
(a probe is due, or it was never tried) is up only with the chain's probability since it was last
seen. A try launches spot before what is held stops (make-before-break, in the simulator and the
controller), so one that finds no capacity costs nothing: on-demand runs on. Before, it read such a
zone as up for sure and a refused try had dropped on-demand: held on on-demand through an outage, it
left on-demand for every probe (a refusal, then on-demand started again)."""

from __future__ import annotations

import math

import pytest

from launcher.policies.availability_model import ZoneModel
from launcher.policies.base import Choice, DecisionState
from launcher.policies.deadline_aware import DeadlineAwarePolicy
from launcher.policies.last_seen import LastSeen, chain_p_up
from launcher.policies.markov_dp import MarkovDPPolicy
from launcher.simulation.engine import SimCase, simulate
from launcher.simulation.traces import Trace

G = 1 / 15  # 4-minute ticks


def state(t: float, *, up: bool, seen: bool | None, held: Choice = Choice.NONE, done: float = 0.0) -> DecisionState:
    return DecisionState(
        elapsed_hours=t, work_done_hours=done, work_total_hours=10.0, deadline_hours=30.0,
        restart_overhead_hours=0.2, current=held, current_zone=0, spot_available=(up,), gap_hours=G,
        spot_price_usd_per_hour=1.0, on_demand_price_usd_per_hour=3.0,
        spot_observed=None if seen is None else (seen,),
    )  # fmt: skip


def test_the_belief_follows_the_chain_from_what_was_last_seen():
    p = MarkovDPPolicy(belief_quantile=None)
    p.reset()
    p.decide(state(0.0, up=True, seen=False))  # never seen: the chain's share of time up
    ru, rd = p.plan.rates
    share = float(rd[0] / (ru[0] + rd[0]))
    assert p.p_up(0, 0.0, p.plan) == pytest.approx(share)
    p.decide(state(G, up=False, seen=True))  # seen down at G
    rate = float(ru[0] + rd[0])
    for tau in (0.1, 0.5, 0.9):  # within the run's first hour: one hourly rate
        assert p.p_up(0, G + tau, p.plan) == pytest.approx(share * (1 - math.exp(-rate * tau)), rel=1e-9)
    later = [p.p_up(0, G + tau, p.plan) for tau in (0.0, 1.0, 5.0, 30.0, 100.0)]
    assert later[0] == 0.0 and later == sorted(later) and later[-1] < 1.0
    hopeful = MarkovDPPolicy(belief_quantile=0.9)
    hopeful.reset()
    hopeful.decide(state(0.0, up=True, seen=False))
    hopeful.decide(state(G, up=False, seen=True))
    assert hopeful.p_up(0, G + 0.5, hopeful.plan) > p.p_up(0, G + 0.5, p.plan)  # an upper quantile of the rates


def test_the_chain_relaxes_to_its_share_up_and_the_reason_says_when_it_was_seen():
    assert chain_p_up(0.0, 0.5, 0.25, 0.0) == 0.0 and chain_p_up(1.0, 0.5, 0.25, 0.0) == 1.0
    assert chain_p_up(0.0, 0.5, 0.25, 1e3) == pytest.approx(1 / 3) == chain_p_up(1.0, 0.5, 0.25, 1e3)
    assert chain_p_up(1.0, 0.5, 0.25, 2.0) == pytest.approx(1 / 3 + 2 / 3 * math.exp(-1.5))
    assert chain_p_up(0.0, 0.5, 0.25, -1.0) == 0.0  # a clock read twice: no time has passed
    seen = LastSeen()
    seen.observe(1, 2.0, None)  # not seen at this decision: nothing recorded
    assert seen.get(1) is None and seen.since_text(1, 3.0) == "never seen"
    seen.observe(1, 2.0, False)
    assert seen.get(1) == (2.0, False) and seen.since_text(1, 2.84) == "seen down 0.8 h ago"
    seen.observe(1, 3.0, True)
    assert seen.since_text(1, 3.0) == "seen up 0.0 h ago"


def test_a_long_unseen_gap_is_not_counted_as_the_state_last_seen():
    """A zone seen down, then not looked at for 20 h (the run on on-demand), then seen up: with
    `gap_spells` the 20 h are no evidence of a long outage; a short wait between probes still is."""
    def model(gap_spells):
        m = ZoneModel(1.0, 2.0, 0.5, gap_spells=gap_spells)
        for t in (0.0, 0.1, 0.2):  # seen down, probes refused
            m.observe(t, False)
        m.observe(20.2, True)
        return m

    counted, censored = model(None), model(3.0)
    assert counted.mean_hours(0) > 10.0  # one 20 h outage, as read before
    assert censored.mean_hours(0) == pytest.approx((0.5 * 2.0 + 0.2) / 0.5)  # 0.2 h seen, no end
    assert censored.mean_hours(1) == counted.mean_hours(1) == pytest.approx(1.0)  # up just now: prior
    short = model(3.0)
    short.observe(20.5, False)  # 0.3 h later: well within three mean spells
    short.observe(20.6, True)
    assert short._ends == [1, 1]  # both changes seen as spells ending
    with pytest.raises(ValueError, match="gap_spells"):
        ZoneModel(1.0, 2.0, gap_spells=0.0)


def outage_case(outage_hours: float) -> SimCase:
    """Spot up for an hour, gone for `outage_hours`, then up to the end; work 10 h, deadline 13 h:
    an outage longer than the slack is spent on on-demand."""
    n = round(40 / G)
    up_ticks, down_ticks = round(1 / G), round(outage_hours / G)
    avail = tuple(not (up_ticks <= i < up_ticks + down_ticks) for i in range(n))
    return SimCase((Trace("outage", G * 3600, avail),), 0, 10.0, 13.0, 0.2, 3.0, 1.0)


def test_on_demand_through_an_outage_is_not_dropped_for_a_probe():
    """Through a 6 h outage on on-demand the run looks at every probe; each look is refused and
    on-demand runs on, so spot is taken within a probe of its return and the run pays what it would
    with a capacity signal, to 1%. Before, each refused look dropped on-demand (six starts, 24.13
    against 21.40 with the signal for `markov-dp`; 29.20 against 19.93 for `deadline-aware`)."""
    from launcher.policies.deadline_aware import DeadlineAwarePolicy

    for make in (MarkovDPPolicy, DeadlineAwarePolicy):
        for hours in (6.0, 9.0):  # back at 7 h, or at 10 h: too late to pay for a move
            case = outage_case(hours)
            blind, signalled = simulate(make(), case, capacity_signal=False), simulate(make(), case)
            assert blind.met_deadline and signalled.met_deadline
            assert blind.refused >= 20 and blind.starts == signalled.starts == 3  # spot, on-demand, spot
            assert blind.cost <= 1.01 * signalled.cost, (make, hours)


def test_the_reason_names_the_probability_it_acted_on():
    p = MarkovDPPolicy()
    p.reset()
    d = p.decide(state(0.0, up=True, seen=False))
    assert "capacity not seen (never seen): up with probability" in d.reason
    p.decide(state(G, up=False, seen=True, held=Choice.NONE))
    d = p.decide(state(2 * G, up=True, seen=False, held=Choice.ON_DEMAND))
    assert "seen down 0.1 h ago" in d.reason and "up with probability" in d.reason


def test_with_a_capacity_signal_nothing_changes():
    case = outage_case(6.0)
    on, off = MarkovDPPolicy(), MarkovDPPolicy(belief=False)
    assert simulate(on, case) == simulate(off, case)


def test_deadline_aware_tries_an_unseen_zone_from_on_demand_where_spells_pay():
    """The rule-based default leaves on-demand for a zone shown available but not seen on the same
    rule as for one seen up (spells long enough to pay for the move), and says the chance it had."""
    from launcher.policies.deadline_aware import DeadlineAwarePolicy

    p = DeadlineAwarePolicy()
    p.reset()
    p.decide(state(0.0, up=False, seen=True))
    d = p.decide(state(G, up=True, seen=False, held=Choice.ON_DEMAND))
    assert d.choice is Choice.SPOT and "seen down 0.1 h ago): up with probability 0.0" in d.reason
    assert p.p_up(0, G) < p.p_up(0, 1.0) < p.p_up(0, 100.0) == pytest.approx(
        p.spells.mean_up(0) / (p.spells.mean_up(0) + p.spells.mean_down(0)))
    short = DeadlineAwarePolicy(hop_margin=50.0)  # spells this short never pay for a move
    short.reset()
    short.decide(state(0.0, up=False, seen=True))
    d = short.decide(state(G, up=True, seen=False, held=Choice.ON_DEMAND))
    assert d.choice is Choice.ON_DEMAND and "a move would not pay" in d.reason


def test_deadline_aware_does_not_read_hours_unseen_as_outage():
    """On on-demand, with the zone last seen down, the zone is not looked at: its outage is what was
    seen of it, and the chance of capacity rises with the hours unseen towards the share of time up.
    Before, the tracker counted the running down spell to the clock: the outage grew by the hour,
    the chance fell (0.12 at 2 h, 0.02 at 47 h on a judging case) and the run never looked again."""
    from launcher.policies.deadline_aware import DeadlineAwarePolicy

    p = DeadlineAwarePolicy()
    p.reset()
    p.decide(state(0.0, up=False, seen=True))
    p.decide(state(G, up=False, seen=True))
    down = p.spells.mean_down(0)
    chances = []
    for k in range(2, 300):  # 20 h on on-demand, the zone shown available but not seen
        d = p.decide(state(k * G, up=True, seen=False, held=Choice.ON_DEMAND, done=(k - 2) * G / 2))
        chances.append(p.p_up(0, k * G))
        assert "up with probability" in d.reason
    assert p.spells.mean_down(0) == down and p.spells.age(0) == pytest.approx(G)
    assert all(a <= b + 1e-12 for a, b in zip(chances, chances[1:]))
    share = p.spells.mean_up(0) / (p.spells.mean_up(0) + p.spells.mean_down(0))
    assert chances[0] < 0.5 * share and chances[-1] == pytest.approx(share, rel=1e-3)


def test_the_multi_zone_twin_weighs_an_unseen_zone_it_would_stand_in_for():
    """On on-demand, every zone just refused: a stand-in in a zone whose probe is due is priced with
    its chance of capacity, a refusal keeping on-demand (make-before-break); the reason says so."""
    from launcher.policies.markov_dp_multi_zone import MarkovDPMultiZonePolicy

    def two(t: float, avail: tuple[bool, bool], seen: tuple[bool, bool]) -> DecisionState:
        return DecisionState(
            elapsed_hours=t, work_done_hours=max(0.0, t - 0.2), work_total_hours=10.0, deadline_hours=13.0,
            restart_overhead_hours=0.2, current=Choice.ON_DEMAND, current_zone=0, spot_available=avail,
            gap_hours=G, spot_price_usd_per_hour=1.0, on_demand_price_usd_per_hour=3.0, spot_observed=seen,
        )  # fmt: skip

    choices = {}
    for belief in (True, False):
        p = MarkovDPMultiZonePolicy(belief=belief)
        p.reset()
        p.decide(two(0.0, (False, False), (True, True)))
        d = p.decide(two(G, (False, True), (True, False)))
        choices[belief] = d
    assert (choices[False].choice, choices[False].zone) == (Choice.SPOT, 1)
    assert (choices[True].choice, choices[True].zone) == (Choice.SPOT, 1)  # a refusal would cost nothing
    assert "zone 1 capacity not seen (seen down 0.1 h ago): up with probability 0.30" in choices[True].reason
    assert "capacity not seen" not in choices[False].reason
    p = MarkovDPMultiZonePolicy()
    p.reset()
    p.decide(two(0.0, (False, False), (True, True)))
    d = p.decide(two(2.0, (False, True), (True, False)))  # zone 1 last seen down 2 h ago: likely back
    assert (d.choice, d.zone) == (Choice.SPOT, 1)
    assert "zone 1 capacity not seen (seen down 2.0 h ago): up with probability" in d.reason


def short_then_long(deadline_hours: float) -> SimCase:
    """Four short up spells, a 3 h outage, then 60 h of capacity; 20 h of work."""
    spells = [(1, 0.27), (0, 0.4), (1, 0.13), (0, 0.4), (1, 0.13), (0, 0.4), (1, 0.13), (0, 3.0), (1, 60.0)]
    avail = tuple(bool(up) for up, hours in spells for _ in range(round(hours / G)))
    return SimCase((Trace("short-then-long", G * 3600, avail),), 0, 20.0, deadline_hours, 0.2, 3.0, 1.0)


def test_explore_tests_an_estimate_of_short_spells_when_the_zone_is_not_seen():
    """Four short spells, a 3 h outage that sends the run to on-demand, then 60 h of capacity nobody
    sees: on the posterior mean (spells of about 0.2 h) a move never pays, and without `explore` the
    run stays on on-demand to the end, paying twice what it would with a capacity signal. With it,
    a draw from the posterior long enough to pay for the move sends a look; the look finds the long
    spell, which the estimate learns, and the run is on spot. Draws are seeded per run: the same
    run twice decides alike; with the signal nothing changes."""
    case = short_then_long(deadline_hours=26.0)

    class Logged(MarkovDPPolicy):
        def decide(self, state):
            d = super().decide(state)
            self.log.append(d)
            return d

        def reset(self):
            super().reset()
            self.log = []

    stuck = simulate(MarkovDPPolicy(explore=False), case, capacity_signal=False)
    explorer = Logged()
    looked = simulate(explorer, case, capacity_signal=False)
    signalled = simulate(MarkovDPPolicy(), case)
    assert stuck.met_deadline and looked.met_deadline
    assert stuck.spot_hours < 1.0 and stuck.cost > 1.8 * signalled.cost
    assert looked.spot_hours > 15.0 and looked.cost < 0.5 * stuck.cost and looked.cost < 1.1 * signalled.cost
    assert any("a draw of its up spells from the posterior" in d.reason and d.choice is Choice.SPOT for d in explorer.log)
    assert simulate(Logged(), case, capacity_signal=False) == looked
    assert simulate(MarkovDPPolicy(explore=False), case) == signalled


def test_deadline_aware_explores_an_estimate_of_short_spells_too():
    """The same trace for `deadline-aware` (the default policy), 3 h of slack: it waits through the
    outage to its reserve and goes on-demand; its spells estimate, about 0.2 h, is under the move's
    break-even, so without `explore` it keeps on-demand to the end with 60 h of capacity unseen;
    with it, a draw of the mean up spell from its posterior that pays for the move sends a look,
    and the run finishes on spot. Seeded: the same run twice decides alike; with the signal
    (capacity seen, a move is a real hop) nothing changes."""
    case = short_then_long(deadline_hours=23.0)
    reasons = []

    class Logged(DeadlineAwarePolicy):
        def decide(self, state):
            d = super().decide(state)
            reasons.append((d.choice, d.reason))
            return d

    stuck = simulate(DeadlineAwarePolicy(explore=False), case, capacity_signal=False)
    looked = simulate(Logged(), case, capacity_signal=False)
    assert stuck.met_deadline and looked.met_deadline
    assert stuck.spot_hours < 1.0
    assert looked.spot_hours > 15.0 and looked.cost < 0.5 * stuck.cost
    assert any(c is Choice.SPOT and "a draw of them from the posterior" in r for c, r in reasons)
    assert simulate(DeadlineAwarePolicy(), case, capacity_signal=False) == looked
    assert simulate(DeadlineAwarePolicy(explore=False), case) == simulate(DeadlineAwarePolicy(), case)
    with pytest.raises(ValueError, match="explore must be True or False"):
        DeadlineAwarePolicy(explore="no")
