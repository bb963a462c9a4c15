from __future__ import annotations

import pytest

from launcher.controller.controller import ControllerDeps, RunJob
from launcher.policies.recovery import NextOfferPolicy
from launcher.ledger import Ledger, RunRecord
from launcher.planning.budget import BudgetCheck
from launcher.planning.candidates import Candidate
from launcher.planning.plan import Plan
from launcher.spec import load_spec_text
from tests.controller.doubles import ScriptedExecutor, ScriptedProvider, offer, scored

OFFERS = [offer("r1", 1.0), offer("r2", 2.0), offer("r3", 3.0)]


@pytest.fixture
def ledger():
    with Ledger() as led:
        yield led


def make_plan(offers=OFFERS) -> Plan:
    cands = tuple(Candidate(scored(o, i + 1), 0) for i, o in enumerate(offers))
    return Plan("t", 1, cands, False, True, 1.0, BudgetCheck(1.0, None, "p", None, None))


def make_job(ledger, tmp_path, *, spec_text: str = "run: python train.py\n", offers=OFFERS, run_id="r-test-1") -> RunJob:
    loaded = load_spec_text(spec_text)
    ledger.create_run(RunRecord(run_id=run_id, name="t", spec_hash="h", spec_yaml=spec_text, project="p",
                                budget_usd=loaded.spec.launcher.budget_usd))  # fmt: skip
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    return RunJob(run_id, run_dir, loaded.spec, make_plan(offers), None, run_dir / "ck", {"project": "p"}, grace_s=0.1)


def make_deps(ledger, provider: ScriptedProvider, executor: ScriptedExecutor, **kw) -> ControllerDeps:
    return ControllerDeps(
        ledger=ledger, provider_for=lambda cloud: provider, executor_for=lambda cloud: executor,
        policy=kw.pop("policy", NextOfferPolicy()), poll_interval_s=0.0, heartbeat_interval_s=0.0,
        sleep=lambda s: None, **kw,
    )  # fmt: skip
