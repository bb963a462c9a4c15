"""Logging a training curve to MLflow: the tracker's batches from the job's output against the
usual in-job `MlflowClient.log_metric` per point, into the same kind of store.

    .venv/bin/python bench/bench_tracking.py [--points 3000]

Rows (each into a fresh SQLite tracking store, MLflow's recommended backend):
  log_metric per point       what a job calling mlflow.log_metric after every step pays
  launcher (log -> batches)  parse the job's JSON-lines log and send it with log_batch (ours)
Figures: seconds in total, points per second, ratio against the peer.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=3000)
    args = p.parse_args()
    os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
    from mlflow.tracking import MlflowClient

    from launcher.tracking.metrics import MetricFollower
    from launcher.tracking.mlflow_sink import MlflowSink

    n = args.points
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "rank-0.log"
        log.write_text("".join(json.dumps({"event": "step", "step": s, "loss": 1.0 / s}) + "\n" for s in range(1, n + 1)))

        peer = MlflowClient(tracking_uri=f"sqlite:///{tmp}/peer.db")
        run = peer.create_run(peer.create_experiment("bench"))
        t0 = time.perf_counter()
        for s in range(1, n + 1):
            peer.log_metric(run.info.run_id, "loss", 1.0 / s, step=s)
        peer_s = time.perf_counter() - t0

        sink = MlflowSink(f"sqlite:///{tmp}/ours.db")
        run_id = sink.create_run("bench", "r-bench", {})
        t0 = time.perf_counter()
        points = MetricFollower(log).read_new(0, final=True)
        sink.log_metrics(run_id, points)
        ours_s = time.perf_counter() - t0
        assert len(sink.client.get_metric_history(run_id, "loss")) == n

    print(f"| way ({n} points of one metric) | seconds | points/s | vs peer |")
    print("|---|---|---|---|")
    print(f"| log_metric per point (peer) | {peer_s:.2f} | {n / peer_s:,.0f} | 1.0x |")
    print(f"| launcher: log -> log_batch | {ours_s:.2f} | {n / ours_s:,.0f} | {peer_s / ours_s:.1f}x faster |")


if __name__ == "__main__":
    main()
