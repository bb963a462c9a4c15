"""One contract, three backends: aws (moto_server), gcp (local Compute REST server), fake.

The fake provider used by the controller and reaper tests must behave like the real ones; this
suite is what keeps it honest. Every case runs on all three, except the one about Pulumi stacks,
which runs on the stack-backed clouds only (no skips).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from launcher.providers.base import MANAGED_BY_TAG, MANAGED_BY_VALUE, ClusterHandle, Node
from tests.providers.conftest import no_signal

MANAGED = {MANAGED_BY_TAG: MANAGED_BY_VALUE}


def tags(**kw) -> dict[str, str]:
    return {**MANAGED, "created-at": "2026-11-30T08:00:00Z", **{k.replace("_", "-"): v for k, v in kw.items()}}


def ids(instances) -> set[str]:
    return {i.instance_id for i in instances}


def test_lists_managed_instances_across_regions_and_nothing_else(cloud):
    a, b = cloud.places
    in_a = cloud.seed(a, 3, tags(project="p1", cluster="c1"))
    in_b = cloud.seed(b, 2, tags(project="p1", cluster="c2"))
    cloud.seed(a, 2, {"project": "p1"})  # a user's own machines, same project tag, not ours
    cloud.seed(b, 1, {MANAGED_BY_TAG: "someone-else", "project": "p1"})

    found = cloud.provider.list_instances()

    assert ids(found) == set(in_a) | set(in_b)
    assert {i.instance_id: i.region for i in found} == {
        **{x: cloud.region_of(a) for x in in_a},
        **{x: cloud.region_of(b) for x in in_b},
    }
    assert all(i.provider == cloud.name for i in found)


def test_partial_listing_agrees_with_the_full_one_when_healthy(cloud):
    a, b = cloud.places
    seeded = cloud.seed(a, 2, tags(project="pl")) + cloud.seed(b, 1, tags(project="pl"))
    found, errors = cloud.provider.list_instances_partial({"project": "pl"})
    assert errors == {} and ids(found) == set(seeded) == ids(cloud.provider.list_instances({"project": "pl"}))


def test_many_instances_cross_page_boundaries(cloud):
    a, b = cloud.places
    # Several separate creations (several EC2 reservations) with small pages on aws and gcp.
    seeded = []
    for n in range(7):
        seeded += cloud.seed(a if n % 2 else b, 2, tags(project="big", cluster=f"c{n}"))
    assert ids(cloud.provider.list_instances({"project": "big"})) == set(seeded)


def test_tag_filter_is_an_and_of_all_pairs(cloud):
    a, b = cloud.places
    p1c1 = cloud.seed(a, 2, tags(project="p1", cluster="c1"))
    p1c2 = cloud.seed(b, 1, tags(project="p1", cluster="c2"))
    p2c1 = cloud.seed(a, 1, tags(project="p2", cluster="c1"))

    assert ids(cloud.provider.list_instances({"project": "p1"})) == set(p1c1 + p1c2)
    assert ids(cloud.provider.list_instances({"cluster": "c1"})) == set(p1c1 + p2c1)
    assert ids(cloud.provider.list_instances({"project": "p1", "cluster": "c1"})) == set(p1c1)
    assert cloud.provider.list_instances({"project": "nope"}) == []


def test_states_spot_type_tags_and_launch_time(cloud):
    a, _ = cloud.places
    spot = cloud.seed(a, 1, tags(project="s"), spot=True, instance_type="g5.2xlarge")
    ondemand = cloud.seed(a, 1, tags(project="s"), spot=False)
    stopped = cloud.seed(a, 1, tags(project="s"))
    cloud.stop(a, stopped)

    by_id = {i.instance_id: i for i in cloud.provider.list_instances({"project": "s"})}

    assert by_id[spot[0]].state == "running"
    assert by_id[spot[0]].spot is True
    assert by_id[spot[0]].instance_type == "g5.2xlarge"
    assert by_id[ondemand[0]].spot is False
    assert by_id[stopped[0]].state in ("stopping", "stopped")
    # Tags come back as tags (GCP labels decoded), including the timestamp tag.
    assert by_id[spot[0]].tags["created-at"] == "2026-11-30T08:00:00Z"
    assert by_id[spot[0]].tags["project"] == "s"
    assert isinstance(by_id[spot[0]].launched_at, datetime) and by_id[spot[0]].launched_at.tzinfo is not None
    assert cloud.provider.instance_state(cloud.region_of(a), spot[0]) == "running"


def test_terminate_instance_is_idempotent_and_spares_unmanaged(cloud):
    a, _ = cloud.places
    mine = cloud.seed(a, 2, tags(project="t"))
    theirs = cloud.seed(a, 1, {"project": "t"})
    region = cloud.region_of(a)

    cloud.provider.terminate_instance(region, mine[0])
    cloud.provider.terminate_instance(region, mine[0])  # already gone: success
    cloud.provider.terminate_instance(region, "i-0123456789abcdef0" if cloud.name == "aws" else "never-existed")

    assert ids(cloud.provider.list_instances({"project": "t"})) == {mine[1]}
    assert cloud.provider.instance_state(region, mine[0]) in (None, "terminated")
    assert cloud.backend_state(a, theirs[0]) in ("running", "RUNNING")


def test_terminate_cluster_without_stack_removes_its_nodes_and_is_idempotent(cloud):
    a, _ = cloud.places
    nodes = cloud.seed(a, 3, tags(project="t", cluster="gone"))
    keep = cloud.seed(a, 1, tags(project="t", cluster="keep"))
    handle = ClusterHandle(
        cluster="gone",
        provider=cloud.name,
        region=cloud.region_of(a),
        zone=a if cloud.name == "gcp" else None,
        nodes=tuple(Node(iid, None, rank) for rank, iid in enumerate(nodes)),
    )

    cloud.provider.terminate(handle)
    cloud.provider.terminate(handle)

    assert ids(cloud.provider.list_instances({"project": "t"})) == set(keep)


def test_tag_and_untag_a_mark(cloud):
    a, _ = cloud.places
    target, other = cloud.seed(a, 2, tags(project="m"))
    region = cloud.region_of(a)

    cloud.provider.tag_instance(region, target, {"reaper-mark": "idle"})
    assert ids(cloud.provider.list_instances({"reaper-mark": "idle"})) == {target}
    # Other tags survive a mark.
    marked = next(i for i in cloud.provider.list_instances({"project": "m"}) if i.instance_id == target)
    assert marked.tags["project"] == "m" and marked.tags[MANAGED_BY_TAG] == MANAGED_BY_VALUE

    cloud.provider.untag_instance(region, target, ["reaper-mark"])
    assert cloud.provider.list_instances({"reaper-mark": "idle"}) == []
    assert ids(cloud.provider.list_instances({"project": "m"})) == {target, other}


def test_stop_instance(cloud):
    a, _ = cloud.places
    (iid,) = cloud.seed(a, 1, tags(project="st"))
    cloud.provider.stop_instance(cloud.region_of(a), iid)
    assert cloud.provider.instance_state(cloud.region_of(a), iid) in ("stopping", "stopped")


def test_reclaimed_spot_instance_leaves_the_listing(cloud):
    a, _ = cloud.places
    victim, survivor = cloud.seed(a, 2, tags(project="pre"), spot=True)
    cloud.preempt(a, victim)
    assert ids(cloud.provider.list_instances({"project": "pre"})) == {survivor}
    assert cloud.provider.instance_state(cloud.region_of(a), victim) in (None, "terminated")


def test_idle_signals_tell_busy_from_idle_where_published(cloud):
    a, _ = cloud.places
    busy, idle, silent = cloud.seed(a, 3, tags(project="idle"))
    supported = cloud.set_utilization(a, busy, 85.0, 40.0)
    cloud.set_utilization(a, idle, 1.0, 2.0)
    by_id = {i.instance_id: i for i in cloud.provider.list_instances({"project": "idle"})}

    s_busy = cloud.provider.idle_signals(by_id[busy], 60)
    s_idle = cloud.provider.idle_signals(by_id[idle], 60)
    s_silent = cloud.provider.idle_signals(by_id[silent], 60)

    assert supported
    assert s_busy.gpu_utilization_pct == pytest.approx(85.0)  # busiest GPU, not the mean over GPUs
    assert s_busy.cpu_utilization_pct == pytest.approx(40.0)
    assert s_idle.gpu_utilization_pct == pytest.approx(1.0)
    assert s_idle.cpu_utilization_pct == pytest.approx(2.0)
    assert s_busy.samples > 0
    assert no_signal(s_silent)  # no metrics published is unknown, not idle
    # The batch form (what the reaper uses for thousands of instances) agrees with the single one.
    many = cloud.provider.idle_signals_many(list(by_id.values()), 60)
    assert many == {busy: s_busy, idle: s_idle, silent: s_silent}


def test_credentials_report_a_source(cloud):
    status = cloud.provider.credentials()
    assert status.provider == cloud.name
    assert status.enabled is True
    assert status.source


def test_preemption_notice_from_outside_the_instance(cloud):
    a, _ = cloud.places
    nodes = cloud.seed(a, 2, tags(project="pn", cluster="pn"), spot=True)
    handle = ClusterHandle(
        cluster="pn",
        provider=cloud.name,
        region=cloud.region_of(a),
        zone=a if cloud.name == "gcp" else None,
        nodes=tuple(Node(iid, None, rank) for rank, iid in enumerate(nodes)),
    )
    assert cloud.provider.preemption_notice(handle, 10.0) is None
    cloud.preempt(a, nodes[1])
    why = cloud.provider.preemption_notice(handle, 20.0)
    assert why is not None and nodes[1] in why


def test_provision_without_pulumi_cli_refuses_before_creating_anything(stack_cloud, tmp_path, monkeypatch):
    """A claim about Pulumi-backed providers only: the fake is not part of it (it has no stack)."""
    cloud = stack_cloud
    from launcher.errors import ToolMissingError
    from launcher.providers.base import ClusterRequest
    from pricing.models import Offer

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests test@host\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no `pulumi` on PATH
    a, _ = cloud.places
    offer = Offer(cloud.name, cloud.region_of(a), a if cloud.name == "gcp" else None, "g5.xlarge", "A10G", 1,
                  4, 16, 24, True, 0.5)
    t = {**tags(project="prov", cluster="prov"), "experiment": "e", "owner": "o", "cost-center": "c",
         "run-id": "r", "expires-at": "2026-12-01T08:00:00Z"}
    req = ClusterRequest("prov", offer, 1, t, ssh_allowed_cidr="203.0.113.7/32")
    with pytest.raises(ToolMissingError, match="(?i)pulumi"):
        cloud.provider.provision(req)
    assert cloud.provider.list_instances({"project": "prov"}) == []
