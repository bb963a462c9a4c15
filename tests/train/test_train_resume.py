"""task_specs/train.py, run for real in subprocesses: an interrupted-and-resumed run (SIGTERM
twice, kill -9 once) ends with weights bit-identical to an uninterrupted run, and every loss
it logs matches the uninterrupted run's loss at the same step."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from launcher.checkpoint import PREEMPTED_EXIT_CODE

TRAIN = Path(__file__).resolve().parents[2] / "task_specs" / "train.py"
# 4 epochs x 35 steps; slow each step down a little so a signal lands within a step or two.
ARGS = ["--epochs", "4", "--batch-size", "40", "--log-every-steps", "1", "--checkpoint-every-steps", "25",
        "--step-time-s", "0.004"]  # fmt: skip
TOTAL_STEPS = 4 * (1437 // 40)
INTERVAL = 25


def interrupted_chain(ckpt: Path) -> list[Run]:
    """SIGTERM at step ~20, SIGTERM at ~80 (with wall-clock saves too), kill -9 at ~115, run to
    the end, then start the finished job once more."""
    return [
        train(ckpt, stop_at=20),
        train(ckpt, "--checkpoint-every-seconds", "0.1", stop_at=80),
        train(ckpt, stop_at=115, sig=signal.SIGKILL),
        train(ckpt),
        train(ckpt),
    ]


@dataclass
class Run:
    returncode: int
    events: list[dict] = field(default_factory=list)
    last_line: str = ""

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["event"] == kind]

    def losses(self) -> dict[int, float]:
        return {e["step"]: e["loss"] for e in self.of("step")}


def train(ckpt: Path | None, *extra: str, stop_at: int | None = None, sig: int = signal.SIGTERM, env=None) -> Run:
    """Run train.py; once it logs step >= stop_at, send `sig`. Returns its parsed output."""
    cmd = [sys.executable, str(TRAIN), *ARGS, *extra]
    if ckpt is not None:
        cmd += ["--checkpoint-dir", str(ckpt)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    run = Run(returncode=0)
    sent = False
    for line in proc.stdout:
        line = line.strip()
        run.last_line = line
        if line.startswith("{"):
            event = json.loads(line)
            run.events.append(event)
            if stop_at is not None and not sent and event["event"] == "step" and event["step"] >= stop_at:
                proc.send_signal(sig)
                sent = True
    run.returncode = proc.wait(timeout=120)
    assert run.returncode in (0, PREEMPTED_EXIT_CODE, -signal.SIGKILL), proc.stderr.read()
    proc.stderr.close()
    return run


@pytest.mark.slow
def test_preempted_and_killed_run_resumes_bit_identically(tmp_path):
    # The uninterrupted reference runs beside the interrupted chain (2 cores), checked after.
    with ThreadPoolExecutor(1) as pool:
        pending_reference = pool.submit(train, None)
        runs = interrupted_chain(tmp_path / "ck")
        reference = pending_reference.result()
    assert reference.returncode == 0
    assert reference.last_line.startswith("final_weights_sha256=")
    assert len(reference.last_line.split("=", 1)[1]) == 64
    assert reference.of("done")[0]["step"] == TOTAL_STEPS
    ref_losses = reference.losses()
    assert len(ref_losses) == TOTAL_STEPS

    first, second, third, fourth, again = runs
    seen_losses: dict[int, float] = {}

    def check_losses(run: Run) -> None:
        for step, loss in run.losses().items():
            assert loss == ref_losses[step], f"step {step}: {loss} != {ref_losses[step]}"
            seen_losses[step] = loss

    # 1) SIGTERM at step ~20: saves at the next step boundary and exits with the preempted code.
    assert first.returncode == PREEMPTED_EXIT_CODE
    stopped = first.of("preempted")[0]["step"]
    assert stopped >= 20 and first.of("checkpoint")[-1] == {
        **first.of("checkpoint")[-1], "step": stopped, "reason": "preemption"}
    assert second.of("resumed")[0]["checkpoint"] == first.of("checkpoint")[-1]["checkpoint"]
    check_losses(first)

    # 2) Resume exactly there (mid-epoch), SIGTERM again in a later epoch. Also save on a wall
    #    clock here: when saves happen must not change what is computed.
    assert second.returncode == PREEMPTED_EXIT_CODE
    assert any(c["reason"] == "interval_seconds" for c in second.of("checkpoint"))
    assert second.of("resumed")[0]["step"] == stopped
    assert min(second.losses()) == stopped + 1
    check_losses(second)
    stopped = second.of("preempted")[0]["step"]

    # 3) kill -9 (no notice, no save): the next run resumes from the last interval checkpoint.
    assert third.returncode == -signal.SIGKILL
    assert third.of("resumed")[0]["step"] == stopped
    check_losses(third)
    last_logged_ckpt = third.of("checkpoint")[-1]["step"]
    killed_after = max(third.losses())

    assert fourth.returncode == 0
    resumed = fourth.of("resumed")[0]["step"]
    assert resumed >= last_logged_ckpt  # never an older checkpoint than the last committed one
    assert killed_after - resumed <= INTERVAL + 2  # lost work bounded by the checkpoint interval
    check_losses(fourth)
    assert set(seen_losses) == set(ref_losses)  # together the runs covered every step
    assert fourth.last_line == reference.last_line

    # A finished job that is started again (e.g. preempted after it printed) just reports.
    assert again.returncode == 0 and again.last_line == reference.last_line
    assert again.of("resumed")[0]["step"] == TOTAL_STEPS and again.losses() == {}
