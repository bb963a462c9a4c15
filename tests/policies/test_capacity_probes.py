"""`ProbedCapacity`: what the run saw of a zone on a cloud that cannot report spot capacity."""

from __future__ import annotations

import pytest

from launcher.policies.capacity_probes import ProbedCapacity


def test_a_refused_zone_is_seen_down_until_its_probe_then_probed_twice_as_late_up_to_the_cap():
    p = ProbedCapacity(60.0, 960.0)
    assert p.view("a", 0.0) == (True, False)  # never tried: worth a try, not an observation
    now, gaps = 0.0, []
    for _ in range(8):
        p.refused("a", now)
        assert p.view("a", now) == (False, True)
        t = now
        while p.view("a", t) == (False, True):
            t += 1.0
        assert p.view("a", t) == (True, False)  # the probe: available, not seen
        gaps.append(t - now)
        now = t
    assert gaps == [60.0, 120.0, 240.0, 480.0, 960.0, 960.0, 960.0, 960.0]
    assert p.misses("a") == 8


def test_a_running_cluster_starts_the_probes_over_and_zones_are_apart():
    p = ProbedCapacity(60.0, 960.0)
    for t in (0.0, 100.0, 300.0):
        p.refused("a", t)
    p.refused("b", 300.0)
    p.running("a")
    assert p.misses("a") == 0 and p.view("a", 301.0) == (True, False)  # left by choice: not seen
    p.refused("a", 400.0)
    assert p.view("a", 459.0) == (False, True) and p.view("a", 460.0) == (True, False)  # one tick again
    assert p.misses("b") == 1 and p.view("b", 330.0) == (False, True)
    assert p.refused_within("b", 330.0, 60.0) and not p.refused_within("b", 360.0, 60.0)
    assert not p.refused_within("c", 0.0, 60.0)


@pytest.mark.parametrize("first, most", [(0.0, 60.0), (-1.0, 60.0), (60.0, 30.0)])
def test_probe_intervals_must_make_sense(first, most):
    with pytest.raises(ValueError, match="probe intervals must be"):
        ProbedCapacity(first, most)
