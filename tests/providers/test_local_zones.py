"""The local backend as several zones of simulated spot capacity (`--simulate-trace` repeated): one
spot offer per zone, each following its own trace, refusals and notices per zone."""

from __future__ import annotations

import pytest

from launcher.errors import ProviderError
from launcher.providers.base import ClusterRequest
from launcher.providers.local import LocalProvider, SpotTrace, load_traces


def write(tmp_path, name: str, data: list[int]):
    f = tmp_path / name
    f.write_text('{"metadata": {"gap_seconds": 60}, "data": %s}' % data)
    return f


def test_each_zone_follows_its_own_trace(tmp_path):
    a = write(tmp_path, "zone-a.json", [0, 1, 1, 0])  # 1 = no capacity
    b = write(tmp_path, "zone-b.json", [1, 0, 0, 0])
    one, zones = load_traces([a, b], speedup=60)  # one tick per second
    assert one is None and list(zones) == ["zone-a", "zone-b"]
    now = [0.0]
    p = LocalProvider(zone_traces=zones, clock=lambda: now[0])
    oa, ob = p.offers()
    assert (oa.zone, ob.zone) == ("zone-a", "zone-b") and oa.spot and ob.spot
    assert (p.spot_available(oa), p.spot_available(ob)) == (True, False)
    with pytest.raises(ProviderError, match="no spot capacity in zone zone-b"):
        p.provision(ClusterRequest(cluster="c0", offer=ob, num_nodes=1, tags={}))
    ha = p.provision(ClusterRequest(cluster="c1", offer=oa, num_nodes=1, tags={}))
    assert ha.zone == "zone-a" and p.preemption_notice(ha, 0.5) is None
    now[0] = 1.5  # zone a loses capacity, zone b gets some
    assert "zone zone-a" in p.preemption_notice(ha, 1.5)
    assert (p.spot_available(oa), p.spot_available(ob)) == (False, True)
    hb = p.provision(ClusterRequest(cluster="c2", offer=ob, num_nodes=1, tags={}))
    assert p.preemption_notice(hb, 0.1) is None  # b's trace, not a's, decides b's cluster
    od = p.offer(spot=False)
    assert p.spot_available(od) is None and p.preemption_notice(p.provision(ClusterRequest("c3", od, 1, {})), 9) is None


def test_one_trace_is_the_machine_itself_and_names_must_differ(tmp_path):
    a = write(tmp_path, "t.json", [0])
    one, zones = load_traces([a])
    assert isinstance(one, SpotTrace) and zones == {}
    assert load_traces(str(a))[0] == one  # a run launched before zones stored one path
    (tmp_path / "d").mkdir()
    b = write(tmp_path / "d", "t.json", [1])
    with pytest.raises(ValueError, match="'t' is given twice"):
        load_traces([a, b])
    with pytest.raises(ValueError, match="not both"):
        LocalProvider(trace=one, zone_traces={"x": one})
