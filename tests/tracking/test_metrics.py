"""Metric lines from a job's output, and the follower that keeps each (metric, step) once across
attempts appended to one log (expected values written out by hand)."""

from __future__ import annotations

import json

from launcher.tracking.metrics import MetricFollower, MetricPoint, parse_metric_line, parse_weights_line


def test_metric_lines_as_train_py_prints_them():
    line = json.dumps({"event": "step", "step": 40, "epoch": 1, "loss": 0.25, "lr": 0.002})
    assert parse_metric_line(line, 7) == [
        MetricPoint("epoch", 1.0, 40, 7), MetricPoint("loss", 0.25, 40, 7), MetricPoint("lr", 0.002, 40, 7),
    ]  # fmt: skip
    assert parse_metric_line('{"event": "eval", "epoch": 0, "step": 35, "test_accuracy": 0.9}', 1) == [
        MetricPoint("epoch", 0.0, 35, 1), MetricPoint("test_accuracy", 0.9, 35, 1),
    ]  # fmt: skip
    # lifecycle lines, no step, bad step, non-JSON, booleans, NaN: nothing
    for text in ('{"event": "checkpoint", "step": 40, "save_s": 0.1}', '{"event": "resumed", "step": 40}',
                 '{"loss": 0.3}', '{"step": "4", "loss": 1}', '{"step": -1, "loss": 1}', "loss=0.3 step=4",
                 '{"step": 3, "ok": true}', '{"step": 3, "loss": NaN}', "[1, 2]", "{not json"):  # fmt: skip
        assert parse_metric_line(text, 0) == [], text
    assert parse_weights_line("final_weights_sha256=" + "a" * 64) == "a" * 64
    assert parse_weights_line("final_weights_sha256=abc") is None


def _step(s: int, loss: float) -> str:
    return json.dumps({"event": "step", "step": s, "loss": loss}) + "\n"


def test_follower_keeps_each_step_once_across_a_replay_and_partial_lines(tmp_path):
    log = tmp_path / "rank-0.log"
    log.write_text("attempt 1\n" + _step(1, 0.9) + _step(2, 0.8) + _step(3, 0.7) + '{"event": "step", "st')
    f = MetricFollower(log)
    assert [(p.step, p.value) for p in f.read_new(0)] == [(1, 0.9), (2, 0.8), (3, 0.7)]
    # the rest of the partial line, then a preemption and a resume from step 2 replaying step 3
    with open(log, "a") as fh:
        fh.write('ep": 4, "loss": 0.6}\n' + "attempt 2\n" + _step(3, 0.7) + _step(4, 0.6) + _step(5, 0.5))
    assert [(p.step, p.value) for p in f.read_new(0)] == [(4, 0.6), (5, 0.5)]
    assert f.read_new(0) == []
    # a new controller that already sent up to step 4 re-reads from the top
    g = MetricFollower(log, {"loss": 4})
    assert [(p.step, p.value) for p in g.read_new(0)] == [(5, 0.5)]
    with open(log, "a") as fh:
        fh.write("final_weights_sha256=" + "b" * 64)  # no newline: only a final read takes it
    assert g.read_new(0) == [] and g.final_weights_sha256 is None
    g.read_new(0, final=True)
    assert g.final_weights_sha256 == "b" * 64


def test_lines_split_across_read_blocks_are_whole(tmp_path, monkeypatch):
    from launcher.tracking import metrics

    monkeypatch.setattr(metrics, "READ_BLOCK_BYTES", 7)  # every line spans several blocks
    log = tmp_path / "rank-0.log"
    log.write_text("".join(_step(s, 1.0 / s) for s in range(1, 6)))
    assert [(p.step, p.value) for p in MetricFollower(log).read_new(0)] == [(s, 1.0 / s) for s in range(1, 6)]
