"""A reaper pass end to end over the fake provider (contract-checked against moto and the GCP
server in tests/providers) and a real SQLite ledger: mark, grace, act, dry run, faults, lock,
crash mid-pass."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from filelock import FileLock

from launcher import paths
from launcher.errors import ConflictError
from launcher.ledger import Ledger
from launcher.providers.fake import FakeProvider
from launcher.reaper.decide import MARK_TAG
from launcher.reaper.policy import ProjectPolicy, ReapPolicy
from launcher.reaper.runner import run_pass

T0 = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
POLICY = ReapPolicy(providers=["fake"], defaults=ProjectPolicy(grace_minutes=60))
MANAGED = {"managed-by": "gpu-launcher", "project": "vision", "owner": "ana"}


@pytest.fixture
def world():
    fake = FakeProvider(clock=lambda: T0)
    ids = {
        "idle": fake.add_instance("us-east-1", tags={**MANAGED, "cluster": "c-idle"}),
        "busy": fake.add_instance("us-west-2", tags={**MANAGED, "cluster": "c-busy"}),
        "protected": fake.add_instance("us-east-1", tags={**MANAGED, "keep-alive": "true"}),
        "unmanaged": fake.add_instance("us-east-1", tags={"project": "vision"}),
        "flappy": fake.add_instance("eu-west-1", tags={**MANAGED, "cluster": "c-flappy"}),
    }
    for k in ("idle", "protected", "unmanaged", "flappy"):
        fake.set_utilization(ids[k], gpu_pct=0.5, cpu_pct=1.0)
    fake.set_utilization(ids["busy"], gpu_pct=93.0, cpu_pct=40.0)
    return fake, ids


def by_id(report):
    return {o.instance_id: o for o in report.outcomes}


def tags_of(fake, iid):
    return next(i.tags for i in fake.list_instances() if i.instance_id == iid)


def states(fake):
    return {iid: inst.info.state for iid, inst in fake._instances.items()}  # noqa: SLF001 - test inspection


def test_mark_then_act_after_grace_and_activity_clears_mark(world):
    fake, ids = world
    with Ledger() as led:
        r1 = by_id(run_pass(POLICY, {"fake": fake}, led, now=T0, sleep=lambda s: None))
        assert r1[ids["idle"]].decision == "mark"
        assert r1[ids["flappy"]].decision == "mark"
        assert r1[ids["busy"]].decision == "keep"
        assert r1[ids["protected"]].decision == "skip"
        assert ids["unmanaged"] not in r1  # never even considered
        assert MARK_TAG in tags_of(fake, ids["idle"])
        assert MARK_TAG not in tags_of(fake, ids["busy"])

        # Within grace: kept. The flappy one became busy: its mark is cleared.
        fake.set_utilization(ids["flappy"], gpu_pct=70.0, cpu_pct=50.0)
        r2 = by_id(run_pass(POLICY, {"fake": fake}, led, now=T0 + timedelta(minutes=30), sleep=lambda s: None))
        assert r2[ids["idle"]].decision == "keep"
        assert r2[ids["flappy"]].action == "clear-mark"
        assert MARK_TAG not in tags_of(fake, ids["flappy"])

        # Grace over: the idle one is terminated; flappy (idle again) is only re-marked.
        fake.set_utilization(ids["flappy"], gpu_pct=0.0, cpu_pct=0.0)
        r3 = by_id(run_pass(POLICY, {"fake": fake}, led, now=T0 + timedelta(minutes=61), sleep=lambda s: None))
        assert r3[ids["idle"]].decision == "act" and r3[ids["idle"]].ok
        assert r3[ids["flappy"]].decision == "mark"
        st = states(fake)
        assert st[ids["idle"]] == "terminated"
        assert {st[ids[k]] for k in ("busy", "protected", "unmanaged", "flappy")} == {"running"}

        audit = led.reap_audit(instance_id=ids["idle"])
        assert [a.decision for a in audit] == ["mark", "keep", "act"]
        assert audit[-1].action == "destroy"


def test_dry_run_changes_nothing(world):
    fake, ids = world
    before = {i.instance_id: (i.state, dict(i.tags)) for i in fake.list_instances()}
    with Ledger() as led:
        fake.tag_instance("us-east-1", ids["idle"], {MARK_TAG: "20261129t000000z"})
        before[ids["idle"]] = ("running", tags_of(fake, ids["idle"]))
        calls_before = len(fake.calls)
        rep = run_pass(POLICY, {"fake": fake}, led, now=T0, dry_run=True, sleep=lambda s: None)
        assert by_id(rep)[ids["idle"]].decision == "act"  # it says what it would do ...
        assert by_id(rep)[ids["idle"]].estimated_saving_usd is None  # no price known: none guessed
        # With a price: a day of it (the nightly pass's horizon), $1.25/h x 24 h.
        priced = run_pass(POLICY, {"fake": fake}, led, now=T0, dry_run=True, sleep=lambda s: None,
                          price_lookup=lambda inst: 1.25)  # fmt: skip
        assert by_id(priced)[ids["idle"]].estimated_saving_usd == pytest.approx(30.0)
        assert by_id(priced)[ids["idle"]].hourly_price_usd == 1.25
        after = {i.instance_id: (i.state, dict(i.tags)) for i in fake.list_instances()}
        assert after == before  # ... but does nothing
        mutating = [c for c in fake.calls[calls_before:] if c[0] in ("terminate_instance", "stop_instance", "tag_instance")]
        assert mutating == []
        assert led.reap_audit() == []


def test_terminate_error_is_reported_and_the_pass_goes_on(world):
    fake, ids = world
    fake.tag_instance("us-east-1", ids["idle"], {MARK_TAG: "20261129t000000z"})
    fake.tag_instance("eu-west-1", ids["flappy"], {MARK_TAG: "20261129t000000z"})
    fake.fail_next("terminate_instance", times=10)  # more than the retries: this one fails
    with Ledger() as led:
        rep = run_pass(POLICY, {"fake": fake}, led, now=T0, sleep=lambda s: None)
        out = by_id(rep)
        failed = [o for o in out.values() if o.decision == "act" and not o.ok]
        assert len(failed) >= 1 and "injected" in failed[0].error
        # the next pass finishes the job
        rep2 = run_pass(POLICY, {"fake": fake}, led, now=T0 + timedelta(minutes=1), sleep=lambda s: None)
        assert all(o.ok for o in rep2.outcomes)
        st = states(fake)
        assert st[ids["idle"]] == "terminated" and st[ids["flappy"]] == "terminated"


def test_transient_errors_are_retried_with_backoff(world):
    fake, ids = world
    fake.tag_instance("us-east-1", ids["idle"], {MARK_TAG: "20261129t000000z"})
    fake.fail_next("terminate_instance", times=2)
    slept: list[float] = []
    with Ledger() as led:
        rep = run_pass(POLICY, {"fake": fake}, led, now=T0, sleep=slept.append)
    assert by_id(rep)[ids["idle"]].ok
    assert states(fake)[ids["idle"]] == "terminated"
    assert len(slept) >= 2 and slept[1] > slept[0] * 0.9  # backoff grows


def test_second_reaper_is_refused(world):
    fake, _ = world
    lock = FileLock(str(paths.ensure_home() / "reaper.lock"))
    with lock, Ledger() as led, pytest.raises(ConflictError):
        run_pass(POLICY, {"fake": fake}, led, now=T0)


class CrashAfter(FakeProvider):
    """Dies (like kill -9 would, from the pass's point of view) after N terminations."""

    crash_after: int = 1

    def terminate_instance(self, region, instance_id):
        super().terminate_instance(region, instance_id)
        if sum(1 for c in self.calls if c[0] == "terminate_instance") >= self.crash_after:
            raise SystemExit("crash mid-pass")


def test_crash_mid_pass_next_pass_finishes_without_double_termination():
    fake = CrashAfter(clock=lambda: T0)
    ids = [fake.add_instance("us-east-1", tags={**MANAGED, MARK_TAG: "20261129t000000z"}) for _ in range(4)]
    for i in ids:
        fake.set_utilization(i, gpu_pct=0.0, cpu_pct=0.0)
    with Ledger() as led:
        with pytest.raises(SystemExit):
            run_pass(POLICY, {"fake": fake}, led, now=T0, sleep=lambda s: None)
        fake.crash_after = 10**9
        run_pass(POLICY, {"fake": fake}, led, now=T0 + timedelta(minutes=5), sleep=lambda s: None)
    assert {states(fake)[i] for i in ids} == {"terminated"}
    terminations = Counter(c[1][0] for c in fake.calls if c[0] == "terminate_instance")
    assert all(n == 1 for n in terminations.values()), terminations


def test_project_filter_limits_the_pass(world):
    fake, ids = world
    other = fake.add_instance("us-east-1", tags={"managed-by": "gpu-launcher", "project": "nlp"})
    with Ledger() as led:
        rep = run_pass(POLICY, {"fake": fake}, led, now=T0, project="nlp", sleep=lambda s: None)
    assert [o.instance_id for o in rep.outcomes] == [other]


class RegionDown(FakeProvider):
    """us-west-2's API is failing: its instances are not listed, the others are."""

    def list_instances_partial(self, tag_filter=None):
        found = [i for i in self.list_instances(tag_filter) if i.region != "us-west-2"]
        return found, {"us-west-2": "RequestLimitExceeded (after retries)"}


def test_a_failed_region_listing_never_counts_as_instances_gone():
    from launcher.ledger import ClusterRecord

    fake = RegionDown(clock=lambda: T0)
    west = fake.add_instance("us-west-2", tags={**MANAGED, "cluster": "c-west"})
    with Ledger() as led:
        led.upsert_cluster(ClusterRecord(name="c-west", provider="fake", region="us-west-2", state="up", project="vision", stack="vision.c-west", nodes=[{"instance_id": west}]))
        destroyed: list = []
        rep = run_pass(POLICY, {"fake": fake}, led, now=T0, sleep=lambda s: None, destroy_stack=lambda p, c: destroyed.append((p, c)))
        assert destroyed == []
        assert led.get_cluster("c-west").state == "up"
        assert any("us-west-2" in e for e in rep.errors)
        # once the region answers again and the instance is really gone, the stack is cleaned up
        fake.terminate_instance("us-west-2", west)
        rep2 = run_pass(POLICY, {"fake": _Healthy(fake)}, led, now=T0, sleep=lambda s: None, destroy_stack=lambda p, c: destroyed.append((p, c)))
        assert destroyed == [("vision", "c-west")]
        assert led.get_cluster("c-west").state == "terminated"
        assert [o.action for o in rep2.outcomes] == ["destroy-stack"]


class _Healthy:
    """The same fake, with its region back."""

    def __init__(self, fake):
        self._f = fake
        self.name = fake.name

    def list_instances(self, tag_filter=None):
        return self._f.list_instances(tag_filter)

    def __getattr__(self, item):
        if item == "list_instances_partial":
            raise AttributeError(item)
        return getattr(self._f, item)


def test_only_transient_errors_are_retried(world):
    """The reaper retries what a provider marks transient; a provider's final error (what a cloud
    provider raises once its SDK's own retries are spent) is tried once, not retried again."""
    from launcher.errors import ProviderError

    fake, ids = world
    fake.tag_instance("us-east-1", ids["idle"], {MARK_TAG: "20261129t000000z"})
    fake.fail_next("terminate_instance", error=ProviderError("AWS TerminateInstances failed: RequestLimitExceeded"), times=1)
    slept: list[float] = []
    with Ledger() as led:
        out = by_id(run_pass(POLICY, {"fake": fake}, led, now=T0, sleep=slept.append))
    failed = out[ids["idle"]]
    assert failed.decision == "act" and not failed.ok and "RequestLimitExceeded" in failed.error
    assert [c for c in fake.calls if c == ("terminate_instance", (ids["idle"],))] == [("terminate_instance", (ids["idle"],))]
    assert slept == []


def test_a_provider_without_the_reapers_capabilities_is_judged_but_not_touched():
    """Optional operations are capability types: a provider that publishes no metrics and cannot
    tag is asked for neither; its expired machine is decided on (mark) and the mark is reported as
    not possible, never attempted through a NotImplementedError."""
    from launcher.providers.base import InstanceInfo, InstanceMarks, Provider

    class Bare(Provider):
        name = "bare"

        def credentials(self):
            raise AssertionError("not asked")

        def provision(self, request):
            raise AssertionError("not asked")

        def terminate(self, handle):
            raise AssertionError("not asked")

        def list_instances(self, tag_filter=None):
            tags = {**MANAGED, "cluster": "c-bare", "expires-at": "2026-11-29T00:00:00Z"}
            return [InstanceInfo("bare", "r1", None, "b-1", "node", "running", False, tags)]

    bare = Bare()
    assert not isinstance(bare, InstanceMarks)
    with Ledger() as led:
        rep = run_pass(ReapPolicy(providers=["fake"], defaults=ProjectPolicy(grace_minutes=60)), {"bare": bare}, led, now=T0, sleep=lambda s: None)
    [o] = rep.outcomes
    assert o.decision == "mark" and o.action == "tag-mark" and not o.ok, o
    assert "bare cannot tag instances" in o.error
    assert "cpu-utilization: CPU utilization not published" in o.reasons
