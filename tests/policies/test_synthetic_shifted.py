"""The judging generator (`synthetic_shifted`): seeded, in the simulator's format, shaped as documented."""

from __future__ import annotations

import hashlib

import pytest

from launcher.errors import UnknownNameError
from launcher.simulation.synthetic_shifted import GAP_SECONDS, JUDGING_SEEDS, REGIMES, generate


def test_same_seed_same_traces_other_seed_other_traces():
    a = generate("mixed", zones=3, hours=48, seed=1)
    assert a == generate("mixed", zones=3, hours=48, seed=1)
    assert a != generate("mixed", zones=3, hours=48, seed=2)
    assert a[0].gap_seconds == GAP_SECONDS and len(a[0]) == 48 * 3600 / GAP_SECONDS


def test_frozen_draws_do_not_change():
    # The judging set is frozen: a change to the generator would silently change what is judged.
    h = hashlib.sha256()
    for name in REGIMES:
        for seed in JUDGING_SEEDS:
            for t in generate(name, zones=3, hours=130, seed=seed):
                h.update(bytes(t.available))
    assert h.hexdigest()[:16] == FROZEN_DIGEST


@pytest.mark.parametrize("name", list(REGIMES))
def test_every_regime_has_both_states(name):
    for t in generate(name, zones=3, hours=130, seed=0):
        assert any(t.available) and not all(t.available)


def test_zones_fail_together_share_their_outages():
    ts = generate("zones-fail-together", zones=3, hours=130, seed=0)
    all_down = sum(not any(col) for col in zip(*(t.available for t in ts)))
    one_down = sum(not t.available[i] for t in ts for i in range(len(t))) / 3
    assert all_down > 0.5 * one_down  # most of a zone's down time is everybody's down time


def test_unknown_regime_is_a_clear_error():
    with pytest.raises(UnknownNameError):
        generate("dayly-weekly")


FROZEN_DIGEST = "288f6056707f7fd8"  # of JUDGING_SEEDS x REGIMES x 3 zones x 130 h, taken when the generator was frozen
