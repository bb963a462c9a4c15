"""The proof for issue 4: `task_specs/train.py` run through the real `launch` CLI on the local
backend as simulated spot capacity, preempted three times, finishes with weights bit-identical
to an uninterrupted run of the same seed; the ledger holds one attempt per placement, each with
its (notional) price and cost, and the preemption, recovery and checkpoint events; and the work lost at
each preemption is bounded by the checkpoint interval (it is zero when the job gets its notice).

Robust under load: the preemption times are seeded (1.4 s, 3.5 s and 3.3 s into each attempt's
run phase) and add up to less than the job's minimum training time, so there are always four
attempts; whether a preemption lands during torch's import or mid-training depends on the
machine, and every assertion holds either way (train.py handles SIGTERM before importing
torch). The uninterrupted reference runs beside the launched chain.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from launcher.checkpoint import PREEMPTED_EXIT_CODE
from launcher.providers.local import PreemptionSchedule
from tests.cli.launch_helpers import clean_env, ledger_runs, write_spec  # noqa: F401
from tests.conftest import REPO, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_env")]

TRAIN = REPO / "task_specs" / "train.py"
K = 10  # checkpoint interval in steps
EPOCHS = 3
TOTAL_STEPS = EPOCHS * (1437 // 40)  # 1,437 training digits, batches of 40
STEP_TIME_S = 0.09  # minimum wall time per step: the whole job trains for at least 9.45 s
ARGS = ["--epochs", str(EPOCHS), "--batch-size", "40", "--seed", "0", "--log-every-steps", "1",
        "--checkpoint-every-steps", str(K), "--step-time-s", str(STEP_TIME_S)]  # fmt: skip
PREEMPTIONS = ["--simulate-preemptions", "3", "--simulate-seed", "1", "--simulate-within", "4"]
PRICE = 0.5  # notional USD per hour of the simulated spot capacity


def events_of(lines: list[str]) -> list[dict]:
    return [json.loads(line) for line in lines if line.startswith("{")]


def segments(log: str) -> list[list[str]]:
    """rank-0.log split into attempts (the run script echoes `attempt N` first)."""
    out: list[list[str]] = []
    for line in log.splitlines():
        if line.startswith("attempt "):
            assert line == f"attempt {len(out) + 1}", line
            out.append([])
        else:
            out[-1].append(line)
    return out


def test_schedule_leaves_work_for_the_fourth_attempt():
    # Each attempt trains at most for its delay (less its start-up), so the three preempted
    # attempts cannot finish the job on any machine: there are always 4 attempts.
    delays = PreemptionSchedule.random(3, seed=1, horizon_s=4.0).delays_s
    assert delays == (1.403, 3.542, 3.291)
    assert sum(delays) < TOTAL_STEPS * STEP_TIME_S


def test_three_preemptions_through_launch_end_bit_identical_with_bounded_loss(tmp_path, launcher_home):
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHER_CHECKPOINT_DIR"}
    reference = subprocess.Popen([sys.executable, str(TRAIN), *ARGS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env)  # fmt: skip
    args = " ".join(ARGS)
    spec = write_spec(
        tmp_path,
        f"""
        name: proof
        run: echo "attempt $LAUNCHER_ATTEMPT"; exec {sys.executable} {TRAIN} {args}
        launcher: {{project: proof, expected_hours: 0.01}}
        """,
    )
    r = run_cli(
        "launch", str(spec), "--yes", "--cheapest", *PREEMPTIONS, "--grace-seconds", "60",
        env={"LAUNCHER_SIMULATE_PRICE_USD_PER_HOUR": str(PRICE)}, timeout=300,
    )  # fmt: skip
    ref_out, ref_err = reference.communicate(timeout=300)
    assert reference.returncode == 0, ref_err[-2000:]
    assert r.returncode == 0, r.stderr[-3000:]

    # (a) bit-identical final weights, and the same loss at every step on the way.
    ref_lines = ref_out.splitlines()
    assert ref_lines[-1].startswith("final_weights_sha256=") and len(ref_lines[-1]) == len("final_weights_sha256=") + 64
    assert r.stdout.splitlines()[-1] == ref_lines[-1]
    ref_loss = {e["step"]: e["loss"] for e in events_of(ref_lines) if e["event"] == "step"}
    assert sorted(ref_loss) == list(range(1, TOTAL_STEPS + 1))

    (run,) = ledger_runs()
    log = (launcher_home / "runs" / run.run_id / "logs" / "rank-0.log").read_text()
    attempts_log = segments(log)
    assert len(attempts_log) == 4
    for lines in attempts_log:
        for e in events_of(lines):
            if e["event"] == "step":
                assert e["loss"] == ref_loss[e["step"]], e
    assert attempts_log[-1][-1] == ref_lines[-1]

    # (b) the ledger: one attempt per placement, each billed at its price, and the events.
    from launcher.ledger import Ledger

    with Ledger() as led:
        attempts = led.attempts(run.run_id)
        preemptions = led.events(run.run_id, kind="preemption")
        recoveries = led.events(run.run_id, kind="recovery")
        checkpoints = led.events(run.run_id, kind="checkpoint")
        spend = led.run_spend_usd(run.run_id)
        costs = led.attempt_costs_usd(run.run_id)
    assert run.state == "succeeded"
    assert [a.end_reason for a in attempts] == ["preempted", "preempted", "preempted", "completed"]
    assert all(a.cloud == "local" and a.spot and a.price_usd_per_hour == PRICE for a in attempts)
    for a in attempts:
        assert a.billed_seconds == pytest.approx((a.ended_at - a.started_at).total_seconds(), abs=1e-3)
        # billed until the machines were torn down (the teardown event), at least the billed time
        assert costs[a.attempt_id] >= a.billed_seconds / 3600 * PRICE - 1e-9 and costs[a.attempt_id] > 0
    assert spend == pytest.approx(sum(costs.values()))
    assert [e.attempt_id for e in preemptions] == [a.attempt_id for a in attempts[:3]]
    assert all(e.data["reason"].startswith("simulated preemption #") for e in preemptions)
    placements = [e.data for e in recoveries if "offer" in e.data]
    assert len(placements) == 3 and all(p["offer"]["spot"] and p["policy"] == "next-offer" for p in placements)
    running_again = [e for e in recoveries if e.data.get("running_again")]
    assert [e.attempt_id for e in running_again] == [a.attempt_id for a in attempts[1:]]
    assert all(e.data["restart_overhead_seconds"] >= 0 for e in running_again)
    # The controller saw the job's checkpoints (on the attempt that wrote them), in order.
    ids = [a.attempt_id for a in attempts]
    assert checkpoints and all(e.attempt_id in ids and e.data["size_bytes"] > 0 for e in checkpoints)
    steps = [e.data["step"] for e in checkpoints]
    assert steps == sorted(steps) and steps[-1] == TOTAL_STEPS

    # (c) lost work per preemption <= K steps: the step reached before it vs the step resumed from.
    #     A job that got its notice checkpoints there and exits 75, losing nothing.
    for i, (a, lines) in enumerate(zip(attempts[:3], attempts_log[:3], strict=True)):
        ev = events_of(lines)
        started = any(e["event"] == "start" for e in ev)
        resumed_from = next((e["step"] for e in ev if e["event"] == "resumed"), 0)
        reached = max([resumed_from] + [e["step"] for e in ev if e["event"] == "step"])
        nxt = events_of(attempts_log[i + 1])
        next_from = next((e["step"] for e in nxt if e["event"] == "resumed"), 0)
        assert 0 <= reached - next_from <= K, (i, reached, next_from)
        # The ledger agrees: the newest checkpoint it recorded up to this preemption is where
        # the next attempt resumed.
        recorded = [e.data["step"] for e in checkpoints if e.attempt_id in ids[: i + 1]]
        assert max(recorded, default=0) == next_from, (i, recorded, next_from)
        if started:  # the notice handler was live: a clean preemption exit, nothing lost
            assert a.exit_code == PREEMPTED_EXIT_CODE, (i, a.exit_code, lines[-3:])
            (pre,) = [e for e in ev if e["event"] == "preempted"]
            assert pre["step"] == reached == next_from
    done = [e for e in events_of(attempts_log[-1]) if e["event"] == "done"]
    assert done and done[0]["step"] == TOTAL_STEPS and attempts[-1].exit_code in (0, None)
