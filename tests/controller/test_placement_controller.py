"""The live controller with a placement policy: a capacity error in one zone moves the next decision
to another zone of the plan, with the reason in the ledger; on a cloud that cannot report spot
capacity, refusals and preemptions are what the policy learns from, and a zone without capacity is
tried again at growing intervals, not once a tick."""

from __future__ import annotations

import pytest

from launcher.controller.controller import Controller
from launcher.errors import ProviderError
from launcher.executors.base import Outcome
from launcher.policies.registry import get_placement_policy
from tests.controller.conftest import make_deps, make_job
from tests.controller.doubles import Clock, ScriptedExecution, ScriptedExecutor, ScriptedProvider, offer


def test_capacity_error_in_one_zone_moves_the_next_placement_to_another(ledger, tmp_path):
    offers = [offer("east", 1.0), offer("west", 1.1), offer("east", 3.0, spot=False)]
    job = make_job(ledger, tmp_path, offers=offers, spec_text="run: python train.py\nlauncher: {deadline: 10h}\n")
    provider = ScriptedProvider(fail_regions={"east"})
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    clock = Clock()
    deps = make_deps(ledger, provider, executor, clock=clock, placement_policy=get_placement_policy("multi-zone"),
                     placement_tick_s=60.0, capacity_retry_s=1.0)  # fmt: skip
    deps.sleep, deps.poll_interval_s = clock.sleep, 0.25
    result = Controller(job, deps).run()
    assert result.state == "succeeded"
    # The cloud cannot say where capacity is: a refusal is no capacity there until a probe, one tick
    # later, then twice as late after each further refusal, up to 16 min. With slack to spare the
    # policy first waits for its zone (a wait is free, a move costs a restart), and leaves it once
    # waiting would use up the slack: refusals at growing intervals, then the other zone.
    regions = [r.offer.region for r in provider.provisioned]
    assert regions[-1] == "west" and set(regions[:-1]) == {"east"} and 4 <= len(regions) - 1 <= 20
    tries = [e.data["elapsed_hours"] * 60 for e in ledger.events(job.run_id, kind="placement")
             if e.data["decision"] == "spot" and e.data["zone_index"] == 0]  # fmt: skip
    gaps = [round(b - a) for a, b in zip(tries, tries[1:])]
    assert gaps[:4] == [1, 2, 4, 8] and set(gaps[4:]) <= {16}, gaps
    attempts = ledger.attempts(job.run_id)
    assert [(a.region, a.end_reason) for a in attempts] == (
        [("east", "provision_failed")] * (len(regions) - 1) + [("west", "completed")])
    placed = [e.data for e in ledger.events(job.run_id, kind="placement")]
    spot_regions = [p["offer"]["region"] for p in placed if p["decision"] == "spot"]
    assert spot_regions[0] == "east" and spot_regions[-1] == "west"
    assert placed[-1]["zone_index"] == 1 and "slack_hours" in placed[-1]


class ScoringProvider(ScriptedProvider):
    """A cloud that reports spot placement scores (or fails to)."""

    def __init__(self, scores: dict[str, int] | None, **kw) -> None:
        super().__init__(**kw)
        self.scores = scores
        self.asked: list[tuple[list[str], int]] = []

    def spot_placement_scores(self, offers, num_nodes):
        self.asked.append(([o.region for o in offers], num_nodes))
        if self.scores is None:
            raise ProviderError("AWS GetSpotPlacementScores failed: UnauthorizedOperation: not allowed")
        return {o: self.scores[o.region] for o in offers if o.region in self.scores}


def run_with(ledger, tmp_path, provider):
    offers = [offer("east", 1.0), offer("west", 1.1), offer("east", 3.0, spot=False)]
    job = make_job(ledger, tmp_path, offers=offers, spec_text="run: python train.py\nlauncher: {deadline: 10h}\n")
    executor = ScriptedExecutor([lambda: ScriptedExecution(Outcome.SUCCEEDED)])
    clock = Clock()
    deps = make_deps(ledger, provider, executor, clock=clock, placement_policy=get_placement_policy("multi-zone"),
                     placement_tick_s=60.0, capacity_retry_s=1.0)  # fmt: skip
    deps.sleep, deps.poll_interval_s = clock.sleep, 0.25
    return job, Controller(job, deps).run()


def test_a_zone_the_cloud_scores_unlikely_is_tried_after_the_others(ledger, tmp_path):
    provider = ScoringProvider({"east": 2, "west": 9})
    job, result = run_with(ledger, tmp_path, provider)
    assert result.state == "succeeded"
    assert provider.asked == [(["east", "west"], 1)]  # once, the plan's spot offers only
    # east ranks first but is scored 2 of 10: the job starts in west and never needs east.
    assert [r.offer.region for r in provider.provisioned] == ["west"]
    (scored,) = [e.data for e in ledger.events(job.run_id, kind="placement_scores")]
    assert sorted((s["region"], s["score"]) for s in scored["scores"]) == [("east", 2), ("west", 9)]
    first = next(e.data for e in ledger.events(job.run_id, kind="placement") if e.data["decision"] == "spot")
    assert first["offer"]["region"] == "west" and first["offer"]["placement_score"] == 9 and first["zone_index"] == 0


def test_a_cloud_that_cannot_score_keeps_the_rank_order_and_says_why(ledger, tmp_path):
    provider = ScoringProvider(None)
    job, result = run_with(ledger, tmp_path, provider)
    assert result.state == "succeeded" and [r.offer.region for r in provider.provisioned] == ["east"]
    (ev,) = [e.data for e in ledger.events(job.run_id, kind="placement_scores")]
    assert ev["cloud"] == "fake" and "UnauthorizedOperation" in ev["error"]


def test_the_controller_starts_from_other_runs_spells_in_the_plans_zones(ledger, tmp_path):
    from datetime import UTC, datetime, timedelta

    from launcher.ledger import RunRecord
    from launcher.ledger.records import NewAttempt

    ledger.create_run(RunRecord(run_id="r-old", name="old", spec_hash="h", spec_yaml="run: x", project="p"))
    start = datetime.now(UTC) - timedelta(hours=3)
    for i in range(3):  # three 4-minute spells in east, each ended by a preemption
        a = ledger.add_attempt("r-old", NewAttempt.from_offer(offer("east", 1.0)), started_at=start + timedelta(minutes=10 * i))
        ledger.end_attempt(a.attempt_id, "preempted", ended_at=start + timedelta(minutes=10 * i + 4))
    job, result = run_with(ledger, tmp_path, ScriptedProvider())
    assert result.state == "succeeded"
    (ev,) = [e.data for e in ledger.events(job.run_id, kind="placement_history")]
    assert ev["days"] == 7.0 and [(z["region"], z["preemptions"]) for z in ev["zones"]] == [("east", 3)]
    assert ev["zones"][0]["up_hours"] == pytest.approx(0.2)
