"""Checking and planning a launch request (what `launch` calls before writing anything)."""

import pytest

from launcher.controller.launch_plan import LaunchFlags, parse_clouds, prepare_launch
from launcher.errors import BadInputError

SPEC = "name: t\nresources: {cpus: 1}\nrun: echo hi\nlauncher: {project: p, expected_hours: 0.5}\n"


@pytest.fixture
def spec(tmp_path, launcher_home):
    p = tmp_path / "t.yaml"
    p.write_text(SPEC)
    return p


def test_a_local_request_is_planned_and_its_options_carry_the_normalized_flags(spec, launcher_home):
    prepared = prepare_launch(spec, LaunchFlags(clouds=("local",), ssh_cidr="203.0.113.7", dry_run=True, grace_s=3.0))
    assert prepared.plan.chosen.scored.offer.cloud == "local"
    assert prepared.forced_clouds == ("local",)
    assert prepared.ssh_cidr == "203.0.113.7/32"
    lines = prepared.lines()
    assert lines[0] == "Plan for 't' (1 node):" and any("chosen:   local" in x for x in lines)
    opts = prepared.options()
    assert (opts.ssh_cidr, opts.grace_s, opts.simulate_price, opts.simulate_trace) == ("203.0.113.7/32", 3.0, None, None)
    assert prepared.prov.run_id.startswith("r-")
    assert not (launcher_home / "ledger.db").exists()  # nothing written


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (LaunchFlags(clouds=("nope",)), "--cloud: "),
        (LaunchFlags(simulate_price="1.5"), "--simulate-price goes with --simulate-preemptions or --simulate-trace"),
        (LaunchFlags(ssh_cidr="not-a-net"), "--ssh-cidr 'not-a-net' is not a network like 203.0.113.7/32"),
        (LaunchFlags(simulate_preemptions="x,y"), "--simulate-preemptions"),
    ],
)
def test_bad_flags_are_refused_before_anything_is_written(spec, launcher_home, flags, message):
    with pytest.raises(BadInputError) as e:
        prepare_launch(spec, flags)
    assert e.value.message.startswith(message), e.value.message
    assert not (launcher_home / "ledger.db").exists() and not (launcher_home / "runs").exists()


def test_parse_clouds_accepts_repeats_and_comma_lists():
    assert parse_clouds(["aws,gcp", "local"]) == ("aws", "gcp", "local")
    assert parse_clouds([]) is None


def test_one_local_spot_offer_per_trace_zone_then_its_on_demand_variant(spec, launcher_home, tmp_path):
    from launcher.controller.placement import placement_for
    from launcher.controller.recovery import recovery_policy

    files = []
    for name in ("east-1a", "east-1b"):
        f = tmp_path / f"{name}.json"
        f.write_text('{"metadata": {"gap_seconds": 60}, "data": [0, 1]}')
        files.append(f)
    prepared = prepare_launch(spec, LaunchFlags(clouds=("local",), simulate_trace=tuple(files), simulate_price="1,3"))
    ranked = [(s.offer.zone, s.offer.spot, s.offer.price_usd_per_hour) for s in prepared.plan.ranked]
    assert ranked == [("east-1a", True, 1.0), ("east-1b", True, 1.0), (None, False, 3.0)]
    assert any("local/east-1b (this machine" in x for x in prepared.lines())
    assert prepared.options().simulate_trace == [str(f) for f in files]
    policy = placement_for(recovery_policy(None, has_deadline=True), prepared.plan.ranked, has_deadline=True)
    assert policy.name == "multi-zone"
    # One file keeps today's meaning: the local machine itself is the spot capacity, no zone.
    one = prepare_launch(spec, LaunchFlags(clouds=("local",), simulate_trace=(files[0],)))
    assert [s.offer.zone for s in one.plan.ranked if s.offer.spot] == [None]
