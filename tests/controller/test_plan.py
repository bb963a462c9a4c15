"""Planning: candidates from every alternative x enabled providers, the ordering rules (local
last for GPU jobs, `ordered` honored), credentials, budget refusal, plan persistence."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

import pytest

from launcher.errors import BudgetExceededError, CredentialsError, NoOfferError
from launcher.planning import Overrides, build_plan, plan_from_dict, plan_lines, plan_to_dict
from launcher.planning.budget import check_budget
from launcher.planning.candidates import query_for
from launcher.providers.local import LocalProvider
from launcher.spec import load_spec_text
from pricing.models import Offer, ScoredOffer

LOCAL = LocalProvider().offer()


def _spec(text: str):
    return load_spec_text(textwrap.dedent(text))


def _offer(cloud: str, region: str, price: float, gpu: str = "T4") -> Offer:
    return Offer(cloud, region, None, f"{gpu.lower()}.xl", gpu, 1, 8, 32, 16, False, price, price)


class FakeRanker:
    """Stands in for pricing.rank_offers over a tiny catalog; records the queries."""

    def __init__(self, offers: list[Offer]):
        self.offers = offers
        self.queries = []

    def __call__(self, q):
        self.queries.append(q)
        out = [
            o for o in self.offers
            if o.cloud in (q.clouds or ()) and (q.gpus is None or any(g.name == o.accelerator for g in q.gpus))
            and (q.regions is None or o.region in q.regions)
        ]  # fmt: skip
        if not out:
            raise NoOfferError("no offer matches")
        out.sort(key=lambda o: o.price_usd_per_hour)
        return [ScoredOffer(o, i + 1, 0.0, "on-demand", None, q.work_hours, o.price_usd_per_hour * q.work_hours) for i, o in enumerate(out)]


CATALOG = [_offer("aws", "us-east-1", 0.5), _offer("gcp", "us-central1", 0.35), _offer("aws", "us-west-2", 0.6, "L4")]
BOTH = {"aws": True, "gcp": True, "local": True}

GPU_ANY_OF = """
resources:
  accelerators: {T4: 1, L4: 1}
  any_of: [{infra: aws}, {infra: gcp}, {infra: local}]
run: x
launcher: {expected_hours: 2}
"""


def _plan(text, enabled=BOTH, ranker=None, **kw):
    return build_plan(_spec(text), enabled=enabled, local_offer=LOCAL, rank_cloud=ranker or FakeRanker(CATALOG), **kw)


def test_gpu_job_ranks_clouds_by_expected_cost_and_lists_local_last():
    plan = _plan(GPU_ANY_OF)
    got = [(c.scored.offer.cloud, c.scored.offer.region) for c in plan.candidates]
    assert got == [("gcp", "us-central1"), ("aws", "us-east-1"), ("aws", "us-west-2"), ("local", "local")]
    assert [c.scored.rank for c in plan.candidates] == [1, 2, 3, 4]
    assert plan.expected_cost_usd == pytest.approx(0.35 * 2)
    assert plan.candidates[-1].alternative == 2


def test_gpu_job_without_credentials_runs_locally_and_says_why():
    plan = _plan(GPU_ANY_OF, enabled={"aws": False, "gcp": False, "local": True})
    assert [c.scored.offer.cloud for c in plan.candidates] == ["local"]
    text = "\n".join(plan_lines(plan))
    assert "aws has no credentials" in text and "runs on this machine's CPU" in text


def test_cpu_job_without_cloud_prefers_free_local():
    plan = _plan("run: x\n")
    assert plan.chosen.scored.offer.cloud == "local" and plan.expected_cost_usd == 0.0
    assert len(plan.candidates) > 1  # the clouds are fallbacks


def test_ordered_preference_is_honored_over_cost():
    plan = _plan(
        """
        resources:
          accelerators: T4:1
          ordered: [{infra: local}, {infra: aws}, {infra: gcp}]
        run: x
        """
    )
    assert [c.scored.offer.cloud for c in plan.candidates] == ["local", "aws", "gcp"]
    assert plan.ordered


def test_named_cloud_without_credentials_only():
    with pytest.raises(CredentialsError, match="aws has no credentials"):
        _plan("resources: {infra: aws, accelerators: T4:1}\nrun: x\n", enabled={"aws": False, "local": True})


def test_gpu_job_with_nothing_enabled_is_no_offer():
    with pytest.raises(NoOfferError, match="no cloud with credentials"):
        _plan("resources: {accelerators: T4:1}\nrun: x\n", enabled={"local": True})


def test_a_priced_cloud_without_a_provider_is_never_planned_on():
    """Lambda is in the catalog (cheapest here) and has credentials, but no provider can launch
    there: the plan ranks only launchable clouds and says why Lambda is left out."""
    catalog = [*CATALOG, _offer("lambda", "us-south-1", 0.1)]
    ranker = FakeRanker(catalog)
    plan = _plan("resources: {accelerators: T4:1}\nrun: x\n", enabled={**BOTH, "lambda": True}, ranker=ranker)
    assert {c.scored.offer.cloud for c in plan.candidates} == {"aws", "gcp"}
    assert all("lambda" not in q.clouds for q in ranker.queries)
    with pytest.raises(NoOfferError, match=r"lambda: credentials found, but no launch runs there"):
        _plan("resources: {accelerators: T4:1}\nrun: x\n", enabled={"lambda": True, "local": True}, ranker=ranker)
    with pytest.raises(NoOfferError, match=r"lambda is priced .* but has no provider"):
        _plan("resources: {infra: lambda, accelerators: T4:1}\nrun: x\n", enabled={"lambda": True, "local": True})


def test_overrides_cloud_and_spot():
    ranker = FakeRanker(CATALOG)
    plan = _plan(GPU_ANY_OF, ranker=ranker, overrides=Overrides(clouds=("aws",), spot=True))
    assert {c.scored.offer.cloud for c in plan.candidates} == {"aws"}  # local is not spot: left out
    assert {q.spot for q in ranker.queries} == {True}
    only_local = _plan(GPU_ANY_OF, overrides=Overrides(clouds=("local",)))
    assert [c.scored.offer.cloud for c in only_local.candidates] == ["local"]


def test_local_is_skipped_when_the_machine_is_too_small():
    plan = _plan("resources: {cpus: 100000}\nrun: x\n")
    assert "local" not in {c.scored.offer.cloud for c in plan.candidates}
    assert any("needs 100000 CPUs" in n for n in plan.notes)


def test_query_maps_spec_fields():
    loaded = _spec(
        """
        resources:
          infra: aws/us-east-1/us-east-1a
          accelerators: A100:8
          instance_type: p4d.24xlarge
          use_spot: true
          cpus: 8+
          memory: 64
          max_hourly_cost: 20
        run: x
        launcher: {max_price_usd_per_hour: 15, expected_hours: 3, deadline: 12h, checkpoint: {interval: 30m}}
        """
    )
    q = query_for(loaded.spec.resources.alternatives()[0], loaded, ("aws",), Overrides())
    assert (q.regions, q.zones, q.instance_types) == (("us-east-1",), ("us-east-1a",), ("p4d.24xlarge",))
    assert q.gpus[0].name == "A100" and q.gpus[0].count == 8 and q.spot is True
    assert (q.min_vcpus, q.min_memory_gib, q.max_price_usd_per_hour) == (8, 64, 15)
    assert (q.work_hours, q.deadline_hours, q.checkpoint_minutes) == (3, 12, 30)


def test_run_budget_refusal():
    plan = _plan(GPU_ANY_OF.replace("expected_hours: 2", "expected_hours: 2, budget_usd: 0.5"))
    with pytest.raises(BudgetExceededError, match=r"expected cost \$0.70 exceeds the task's budget_usd \$0.50"):
        plan.budget.enforce()
    ok = _plan(GPU_ANY_OF.replace("expected_hours: 2", "expected_hours: 2, budget_usd: 1"))
    ok.budget.enforce()


def test_project_monthly_budget_uses_spend_since_month_start():
    seen = {}

    def spend(project, since):
        seen["args"] = (project, since)
        return 9.5

    check = check_budget(1.0, run_budget_usd=None, project="p", project_budget=lambda p: 10.0, spend=spend,
                         now=datetime(2026, 11, 30, 8, 0, tzinfo=UTC))  # fmt: skip
    assert seen["args"] == ("p", datetime(2026, 11, 1, tzinfo=UTC))
    assert check.project_remaining_usd == pytest.approx(0.5)
    with pytest.raises(BudgetExceededError, match="project 'p'.s remaining monthly budget \\$0.50"):
        check.enforce()
    assert check_budget(0.4, run_budget_usd=None, project="p", project_budget=lambda p: 10.0, spend=spend).refusal() is None
    assert check_budget(5.0, run_budget_usd=None, project="q", project_budget=lambda p: None, spend=spend).refusal() is None


def test_plan_round_trips_through_json():
    import json

    plan = _plan(GPU_ANY_OF)
    again = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan))))
    assert again == plan


def test_plan_keeps_the_best_candidates_and_local(monkeypatch):
    from launcher.planning import candidates

    many = [_offer("aws", f"r{i:02d}", 0.1 + i / 100) for i in range(candidates.MAX_CANDIDATES + 10)]
    plan = _plan(GPU_ANY_OF, ranker=FakeRanker(many))
    assert len(plan.candidates) == candidates.MAX_CANDIDATES
    assert plan.candidates[-1].scored.offer.cloud == "local"
    assert plan.chosen.scored.offer.region == "r00"
