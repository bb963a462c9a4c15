"""Notional prices for the local backend's simulated spot capacity
(LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR): parsed strictly, applied only when simulating, and a bad
value is bad input before anything is written."""

from __future__ import annotations

import pytest

from launcher.errors import BadInputError
from launcher.providers.local import LocalProvider, PreemptionSchedule, SimulatedPrices
from tests.cli.launch_helpers import clean_env, cli_inproc, state_files  # noqa: F401


def test_parse_spot_and_on_demand():
    assert SimulatedPrices.parse(None) == SimulatedPrices(0.0, None)
    assert SimulatedPrices.parse("0.4").on_demand == 0.4
    p = SimulatedPrices.parse("0.3, 0.9")
    assert (p.spot_usd_per_hour, p.on_demand) == (0.3, 0.9)
    for bad in ("abc", "-1", "1,2,3", "nan", "0.3,"):
        with pytest.raises(BadInputError, match="SPOT or SPOT,ON_DEMAND"):
            SimulatedPrices.parse(bad)


def test_price_applies_only_to_simulated_capacity(monkeypatch):
    monkeypatch.setenv("LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR", "0.3,0.9")
    plain = LocalProvider().offer()
    assert (plain.spot, plain.price_usd_per_hour) == (False, 0.0)
    sim = LocalProvider(PreemptionSchedule((5.0,)))
    assert (sim.offer().spot, sim.offer().price_usd_per_hour) == (True, 0.3)
    assert (sim.offer(spot=False).spot, sim.offer(spot=False).price_usd_per_hour) == (False, 0.9)
    assert sim.spot_available(sim.offer()) is True and sim.spot_available(sim.offer(spot=False)) is None
    assert LocalProvider().spot_available(plain) is None


@pytest.mark.usefixtures("clean_env")
def test_bad_price_is_bad_input_and_writes_nothing(monkeypatch, launcher_home, capsys):
    monkeypatch.setenv("LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR", "cheap")
    code, _, err = cli_inproc(capsys, "launch", "task_specs/quickstart.yaml", "--yes", "--simulate-preemptions", "1")
    assert code == 2 and "LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR" in err
    assert state_files(launcher_home) == []
