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


def test_on_demand_recovery_moves_to_the_simulated_on_demand_variant(tmp_path, launcher_home):
    """`--simulate-price SPOT,ON_DEMAND` gives simulated capacity an on-demand variant: the
    `on-demand` recovery policy moves there after the preemption, billed at its price."""
    from launcher.ledger import Ledger
    from tests.conftest import run_cli

    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: od\nrun: |\n  trap 'exit 75' TERM\n  for i in $(seq 40); do sleep 0.05; done\n  echo finished\n"
        "launcher: {expected_hours: 0.01, recovery: on-demand}\n"
    )
    r = run_cli("launch", str(spec), "--yes", "--cheapest", "--simulate-preemptions", "0.5", "--simulate-price", "0.3,0.9", "--grace-seconds", "5")
    assert r.returncode == 0, r.stderr
    assert "simulated on-demand, $0.9/h" in r.stderr  # the fallback is in the plan
    with Ledger() as led:
        (run,) = led.list_runs()
        attempts = led.attempts(run.run_id)
    assert [(a.spot, a.price_usd_per_hour, a.end_reason) for a in attempts] == [(True, 0.3, "preempted"), (False, 0.9, "completed")]


@pytest.mark.usefixtures("clean_env")
def test_simulate_price_flag_without_simulation_is_bad_input(launcher_home, capsys):
    code, _, err = cli_inproc(capsys, "launch", "task_specs/quickstart.yaml", "--yes", "--simulate-price", "0.3")
    assert code == 2 and "--simulate-price goes with" in err
    assert state_files(launcher_home) == []


def test_the_simulated_price_is_kept_in_the_run_for_resume(monkeypatch):
    """A resumed controller rebuilds its provider from the run's launch options, not from the
    environment of whoever resumes it."""
    from launcher.controller.runner import LaunchOptions, make_provider_for
    from launcher.ledger import Ledger, RunRecord

    monkeypatch.delenv("LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR", raising=False)
    with Ledger() as led:
        led.create_run(RunRecord(run_id="r-price", name="p", spec_hash="h", spec_yaml="run: x"))
        opts = LaunchOptions(simulate_preemptions="3", simulate_price="0.4,1.2")
        local = make_provider_for("r-price", opts, led, 0.1)("local")
    assert (local.offer().price_usd_per_hour, local.offer(spot=False).price_usd_per_hour) == (0.4, 1.2)
