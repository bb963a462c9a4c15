"""task_specs/train.py as a 2-rank DDP job on CPU (gloo): the ranks agree on the final weights,
and a notice to ONE rank stops both at the same step, after which they resume bit-identically
from checkpoints in S3 (a real moto_server)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.checkpoint import PREEMPTED_EXIT_CODE
from tests.conftest import free_port

TRAIN = Path(__file__).resolve().parents[2] / "task_specs" / "train.py"
ARGS = ["--model", "mlp", "--epochs", "2", "--log-every-steps", "1", "--step-time-s", "0.01"]
STEPS = 2 * ((1437 // 2) // 32)


def run_pair(ckpt: Path | str | None, stop_rank1_at: int | None = None) -> tuple[list[int], list[str], list[dict]]:
    """Start ranks 0 and 1 like the local executor does (SkyPilot env vars); return their exit
    codes, last lines, and rank 0's events. Retried once if the rendezvous port was taken by
    another process between choosing it and binding it (a race of the test, not of train.py)."""
    for attempt in (1, 2):
        try:
            return _run_pair_once(ckpt, stop_rank1_at)
        except PortTaken:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class PortTaken(Exception):
    pass


def _run_pair_once(ckpt: Path | str | None, stop_rank1_at: int | None) -> tuple[list[int], list[str], list[dict]]:
    port = str(free_port())
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "SKYPILOT_NUM_NODES": "2", "SKYPILOT_NODE_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}  # fmt: skip
        env.pop("WORLD_SIZE", None)
        env.pop("RANK", None)
        cmd = [sys.executable, str(TRAIN), *ARGS] + (["--checkpoint-dir", str(ckpt)] if ckpt else [])
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    events, lines, sent = [], ["", ""], False
    for line in procs[0].stdout:
        lines[0] = line.strip()
        if lines[0].startswith("{"):
            events.append(json.loads(lines[0]))
            step = events[-1].get("step", -1) if events[-1]["event"] == "step" else -1
            if stop_rank1_at is not None and not sent and step >= stop_rank1_at:
                procs[1].send_signal(signal.SIGTERM)
                sent = True
    rc0 = procs[0].wait(timeout=120)
    err0 = procs[0].stderr.read()
    procs[0].stderr.close()
    if rc0 not in (0, PREEMPTED_EXIT_CODE):
        procs[1].kill()  # it would wait for its dead peer until the rendezvous timeout
    out1, err1 = procs[1].communicate(timeout=120)
    if rc0 not in (0, PREEMPTED_EXIT_CODE) and "address already in use" in err0.lower():
        raise PortTaken(err0[-500:])
    lines[1] = out1.strip().splitlines()[-1] if out1.strip() else ""
    codes = [rc0, procs[1].returncode]
    assert set(codes) <= {0, PREEMPTED_EXIT_CODE}, (codes, err0[-2000:], err1[-2000:])
    return codes, lines, events


@pytest.fixture(scope="module")
def uninterrupted():
    return run_pair(None)


def test_two_ranks_finish_and_agree(uninterrupted):
    codes, lines, events = uninterrupted
    assert codes == [0, 0]
    assert lines[0].startswith("final_weights_sha256=") and lines[0] == lines[1]
    assert events[-1]["event"] == "done" and events[-1]["step"] == STEPS


@pytest.mark.slow
def test_notice_to_one_rank_stops_both_and_resume_is_bit_identical(uninterrupted, aws_env):
    # Checkpoints in S3 (moto_server): rank 0 alone talks to the bucket.
    import boto3

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="ddp-ckpt")
    ckpt = "s3://ddp-ckpt/job"
    codes, _lines, events = run_pair(ckpt, stop_rank1_at=12)
    assert codes == [PREEMPTED_EXIT_CODE, PREEMPTED_EXIT_CODE]
    preempted = [e for e in events if e["event"] == "preempted"]
    assert preempted and preempted[0]["source"] == "peer"  # rank 0 itself got no signal
    stopped = preempted[0]["step"]
    assert stopped < STEPS

    codes, lines, events = run_pair(ckpt)
    assert codes == [0, 0]
    assert [e["step"] for e in events if e["event"] == "resumed"] == [stopped]
    assert lines[0] == lines[1] == uninterrupted[1][0]
    from launcher.checkpoint import CheckpointStore

    assert CheckpointStore(ckpt).latest(repair=False).metadata == {
        "reason": "final", "epoch": 2, "batch": 0, "world_size": 2}
