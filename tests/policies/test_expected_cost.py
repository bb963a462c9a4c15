"""`expected-cost`: its model learns what it should, its DP prices actions sensibly, its replays of
the baselines bill what the simulator bills, and every reason names the estimate it acted on."""

from __future__ import annotations

import pytest

from launcher.errors import BadInputError
from launcher.policies.availability_model import ZoneModel
from launcher.policies.base import Choice, Decision, PlacementPolicy
from launcher.policies.baselines import GreedyPolicy, UniformProgressPolicy
from launcher.policies.cost_to_go import D1, N0, N1, Prices, StepModel, solve
from launcher.policies.registry import get_placement_policy
from launcher.policies.shadow import ShadowRun
from launcher.simulation.engine import SimCase, simulate
from launcher.simulation.omniscient import omniscient_cost
from launcher.simulation.synthetic import generate
from launcher.simulation.synthetic_shifted import generate as generate_shifted
from tests.policies.helpers import Recording, case


def test_model_learns_spells_and_a_daily_cycle():
    m = ZoneModel(1.0, 2.0, 0.5, bin_weight=2.0)
    # Three days: up from hour 0 to 16 of each day, down 16-24, observed every 6 minutes.
    for i in range(3 * 240):
        t = i * 0.1
        m.observe(t, (t % 24) < 16)
    assert m.mean_hours(1) == pytest.approx(16, rel=0.35) and m.mean_hours(0) == pytest.approx(8, rel=0.35)
    prof = m.daily_profile()
    assert min(prof[2:14]) > 0.8 and max(prof[17:23]) < 0.3  # the cycle, by hour of the run's day
    # Capacity that always ends at hour 16: an up spell at hour 15.5 is far likelier to end within
    # the hour than one at hour 8.
    assert m.survival(1, 15.5 + 48, 1.0) < m.survival(1, 8 + 48, 1.0) - 0.15


def test_predictive_survival_is_heavier_tailed_with_little_evidence():
    thin, thick = ZoneModel(1.0, 1.0, 0.5), ZoneModel(1.0, 1.0, 0.5)
    t = 0.0
    for up_h, model, n in ((1.0, thin, 2), (1.0, thick, 200)):
        t = 0.0
        for _ in range(n):
            model.observe(t, True)
            t += up_h
            model.observe(t, False)
            t += 1.0
    # Both think spells last about an hour; with two spells seen, a long spell is less unlikely.
    assert thin.survival(1, 0.0, 4.0) > thick.survival(1, 0.0, 4.0)


def test_dp_prices_waiting_and_on_demand():
    p = Prices(on_demand=3.0, spot=1.0, overhead_hours=0.1)

    def always_up(t, dt):
        return StepModel(1.0, 1.0, 1.0, dt / 2, 1.0, 0.0, 1.0, dt / 2)

    def never_up(t, dt):
        return StepModel(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    tab = solve(0.0, 10.0, 4.0, p, always_up)
    # Capacity for sure: one spot start and the work on spot.
    assert tab.value(0, N1, 4.0) == pytest.approx(1.0 * (4.0 + 0.1), rel=0.05)
    tab = solve(0.0, 10.0, 4.0, p, never_up)
    # No capacity ever: one on-demand start and the work on on-demand, wherever it starts.
    assert tab.value(0, N0, 4.0) == pytest.approx(3.0 * 4.1, rel=0.05)
    assert tab.value(0, D1, 4.0) <= tab.value(0, N0, 4.0)


@pytest.mark.parametrize("make", [GreedyPolicy, UniformProgressPolicy])
@pytest.mark.parametrize("regime,seed", [("flapping", 0), ("long-outages", 1), ("scarce", 2)])
def test_shadow_replay_bills_what_the_simulator_bills(make, regime, seed):
    (tr,) = generate(regime, zones=1, hours=60, seed=seed)
    c = SimCase((tr,), 0, 24.0, 36.0, 0.2, 3.06, 0.9731)
    sim = simulate(make(), c)

    class Idle(PlacementPolicy):
        """Holds nothing (so the run lasts to the simulator's cap), replaying `make` meanwhile."""

        name = "idle"

        def __init__(self):
            self.shadow = ShadowRun(make())

        def decide(self, state):
            self.shadow.observe(state)
            return Decision(Choice.NONE, 0, "watch")

    w = Idle()
    simulate(w, c)
    assert w.shadow.cost == pytest.approx(sim.cost, rel=1e-9)
    assert w.shadow.done == pytest.approx(c.work_hours)


def test_reasons_name_the_estimate_and_the_saving():
    pol = Recording(get_placement_policy("expected-cost", experts=False))
    (tr,) = generate("long-outages", zones=1, hours=60, seed=2)
    r = simulate(pol, SimCase((tr,), 0, 12.0, 24.0, 0.2, 3.06, 0.9731))
    assert r.met_deadline
    modelled = [d.reason for _, d in pol.log if d.reason.startswith("zone 0: expected up")]
    assert modelled and all(" h, down " in x and "saves $" in x and "to finish" in x for x in modelled)


def test_always_available_costs_one_start_on_spot():
    r = simulate(get_placement_policy("expected-cost"), case("0" * 20, work=5, deadline=10, overhead=1))
    assert r.cost == pytest.approx(6 * 1.0) and r.on_demand_hours == 0


@pytest.mark.parametrize("name", ["expected-cost", "expected-cost-multi-zone"])
@pytest.mark.parametrize("regime", ["daily-weekly", "regime-shift", "zones-fail-together", "heavy-tail", "mixed"])
def test_never_misses_a_deadline_and_never_below_the_optimum(name, regime):
    traces = generate_shifted(regime, zones=3, hours=50, seed=11)  # not a judging seed
    for work, factor in ((12.0, 1.2), (12.0, 2.0)):
        c = SimCase(traces, 0, work, work * factor, 0.2, 3.06, 0.9731)
        r = simulate(get_placement_policy(name), c)
        assert r.met_deadline
        assert r.cost >= omniscient_cost(c, multi_zone=name.endswith("multi-zone")) - 1e-6


def test_follows_greedy_when_its_replay_is_ahead():
    # Flapping capacity: the model's rule pays for hops that greedy's replay avoids; once greedy's
    # replay is ahead by more than the margin the policy says so and follows it.
    pol = Recording(get_placement_policy("expected-cost", switch_overheads=0.0, noise_fraction=0.0))
    (tr,) = generate("flapping", zones=1, hours=80, seed=0)
    simulate(pol, SimCase((tr,), 0, 48.0, 72.0, 0.2, 3.06, 0.9731))
    follows = [d.reason for _, d in pol.log if d.reason.startswith("following greedy: replayed on the capacity seen")]
    assert follows and all("for the model's rule" in x for x in follows)


def test_bad_parameters_are_one_clear_error():
    with pytest.raises(BadInputError, match="expected-cost"):
        get_placement_policy("expected-cost", max_steps=2)
    with pytest.raises(BadInputError):
        get_placement_policy("expected-cost", prior_up_hours=0)
    assert get_placement_policy("expected-cost-multi-zone").multi_zone
    assert get_placement_policy("expected-cost").decide  # constructs with defaults
    assert Choice.SPOT.value == "spot"
