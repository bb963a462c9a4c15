"""`--simulate-preemptions N`: N preemptions fit in the expected run, and a shortfall is explained."""

from __future__ import annotations

import pytest

from launcher.controller.simulated_preemptions import default_window_s, requested_count
from launcher.providers.local import PreemptionSchedule


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(8))
def test_default_window_fits_all_n_preemptions_in_the_expected_run(n, seed):
    expected_hours = 0.01  # task_specs/train.yaml: a job of about 36 s
    sched = PreemptionSchedule.parse(str(n), seed=seed, horizon_s=default_window_s(expected_hours, n))
    assert len(sched.delays_s) == n
    # Each attempt runs only until its preemption: together they use at most half the run.
    assert sum(sched.delays_s) <= expected_hours * 3600 / 2 + 1e-9


def test_window_has_a_floor_and_counts_parse():
    assert default_window_s(0.0001, 3) == 2.0
    assert default_window_s(1.0, 0) == 1800.0
    assert requested_count("3") == 3 and requested_count("5,12.5,30") == 3 and requested_count(None) is None
