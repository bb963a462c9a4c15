"""Reaper benchmark: mark-then-act over managed instances in several regions on a real
moto_server, against Cloud Custodian (c7n) doing the same with its own mark-then-act
(`mark-for-op` then `marked-for-op` + terminate), both as end-to-end CLI processes.

    .venv/bin/python bench/bench_reap.py [--instances 2000] [--regions 4] [--rounds 3]

Like with like: each tool starts from a freshly seeded, identical moto state (nothing marked;
managed instances a quarter idle, the rest busy by CPUUtilization; unmanaged idle ones that
neither may touch); both look at the same 60-minute window with the same 10% threshold and act on
the second pass (grace 0). Rounds interleave the tools (A B A B ...); the table gives each tool's
median of both passes and the ratio of medians.

Metrics as EC2 delivers them by default (basic monitoring): one statistic set per 5 minutes on the
5-minute grid, over the last 80 minutes. moto_server runs under libfaketime two days behind
(Debian `faketime`), so every instance's LaunchTime is two days old, as on a real nightly pass
(the reaper takes age from LaunchTime and never calls a younger machine idle).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
from botocore.config import Config

REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"]
AMI = "ami-12c6146b"
BIN = Path(sys.executable).parent
WINDOW_MIN = 60
THRESHOLD_PCT = 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1", "/usr/lib/faketime/libfaketimeMT.so.1")
PERIOD_S = 300  # EC2 basic monitoring
SLOW_MOTO = Config(read_timeout=600)  # moto answers thousands of instances slowly
HISTORY_POINTS = 16  # 80 minutes: the window plus the reaper's late-data allowance


def start_moto() -> tuple[subprocess.Popen, str]:
    port = free_port()
    lib = next((p for p in FAKETIME_LIBS if Path(p).exists()), None)
    if lib is None:
        raise SystemExit("bench_reap needs libfaketime (apt-get install faketime): instances must be two days old")
    env = {**os.environ, "LD_PRELOAD": lib, "FAKETIME": "-2d", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    proc = subprocess.Popen([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    raise SystemExit("moto_server did not start")


def seed(url: str, n: int, regions: list[str], unmanaged_per_region: int) -> dict[str, set[str]]:
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST")).read()
    now = datetime.now(UTC)
    sets = {"idle": set(), "busy": set(), "unmanaged": set()}
    per_region = n // len(regions)
    for r in regions:
        ec2 = boto3.client("ec2", region_name=r, endpoint_url=url, config=SLOW_MOTO)
        cw = boto3.client("cloudwatch", region_name=r, endpoint_url=url, config=SLOW_MOTO)
        made: list[tuple[str, str]] = []
        for start in range(0, per_region, 100):
            count = min(100, per_region - start)
            for kind in ("idle", "busy"):
                k = count // 4 if kind == "idle" else count - count // 4
                tags = {"managed-by": "gpu-launcher", "project": "bench", "owner": "ops", "cluster": f"c-{r}-{start}-{kind}"}
                resp = ec2.run_instances(ImageId=AMI, MinCount=k, MaxCount=k, InstanceType="g5.xlarge",
                                         TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": a, "Value": b} for a, b in tags.items()]}])
                made += [(i["InstanceId"], kind) for i in resp["Instances"]]
        resp = ec2.run_instances(ImageId=AMI, MinCount=unmanaged_per_region, MaxCount=unmanaged_per_region, InstanceType="g5.xlarge",
                                 TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "project", "Value": "bench"}]}])
        made += [(i["InstanceId"], "unmanaged") for i in resp["Instances"]]
        data = []
        grid = datetime.fromtimestamp(int(now.timestamp()) // PERIOD_S * PERIOD_S, tz=UTC)
        for iid, kind in made:
            sets[kind].add(iid)
            cpu = 60.0 if kind == "busy" else 1.0
            stat = {"SampleCount": 5.0, "Sum": 5 * cpu, "Minimum": cpu, "Maximum": cpu}
            data += [{"MetricName": "CPUUtilization", "Dimensions": [{"Name": "InstanceId", "Value": iid}],
                      "Timestamp": grid - timedelta(seconds=PERIOD_S * k), "StatisticValues": stat, "Unit": "Percent"}
                     for k in range(1, HISTORY_POINTS + 1)]
        for i in range(0, len(data), 500):
            cw.put_metric_data(Namespace="AWS/EC2", MetricData=data[i : i + 500])
    return sets


def terminated(url: str, regions: list[str]) -> set[str]:
    out = set()
    for r in regions:
        ec2 = boto3.client("ec2", region_name=r, endpoint_url=url, config=SLOW_MOTO)
        for page in ec2.get_paginator("describe_instances").paginate():
            for res in page["Reservations"]:
                out |= {i["InstanceId"] for i in res["Instances"] if i["State"]["Name"] in ("terminated", "shutting-down")}
    return out


def env_for(url: str, regions: list[str], home: str) -> dict[str, str]:
    return {**os.environ, "AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": regions[0], "LAUNCHER_HOME": home, "LAUNCHER_AWS_REGIONS": ",".join(regions)}


def run_ours(url: str, regions: list[str], tmp: Path) -> tuple[float, str]:
    home = tmp / "ours"
    home.mkdir()
    pol = tmp / "reap.yaml"
    pol.write_text(f"providers: [aws]\ndefaults: {{grace_minutes: 0, idle: {{window_minutes: {WINDOW_MIN}, cpu_util_below_pct: {THRESHOLD_PCT}}}}}\n")
    total = 0.0
    for _ in ("mark", "act"):
        t = time.perf_counter()
        res = subprocess.run([str(BIN / "launcher"), "reap", "--policy", str(pol), "--json"], env=env_for(url, regions, str(home)), capture_output=True, text=True)
        total += time.perf_counter() - t
        if res.returncode != 0:
            return total, f"exit {res.returncode}: {res.stderr.strip()[-300:]}"
    return total, "ok"


def run_c7n(url: str, regions: list[str], tmp: Path) -> tuple[float, str]:
    idle = {"type": "metrics", "name": "CPUUtilization", "days": WINDOW_MIN / 1440, "value": THRESHOLD_PCT, "op": "less-than"}
    mark = {"name": "mark-idle-gpu", "resource": "ec2",
            "filters": [{"tag:managed-by": "gpu-launcher"}, idle],
            "actions": [{"type": "mark-for-op", "op": "terminate", "days": 0}]}
    act = {"name": "reap-idle-gpu", "resource": "ec2",
           "filters": [{"tag:managed-by": "gpu-launcher"}, {"type": "marked-for-op", "op": "terminate"}, idle],
           "actions": ["terminate"]}
    total = 0.0
    for step, policy in (("mark", mark), ("act", act)):
        pol = tmp / f"c7n-{step}.yml"
        pol.write_text(json.dumps({"policies": [policy]}))
        args = [str(BIN / "custodian"), "run", "--cache-period", "0", "-s", str(tmp / f"c7n-out-{step}"), str(pol)]
        for r in regions:
            args += ["--region", r]
        t = time.perf_counter()
        res = subprocess.run(args, env=env_for(url, regions, str(tmp / "c7n-home")), capture_output=True, text=True)
        total += time.perf_counter() - t
        if res.returncode != 0:
            return total, f"exit {res.returncode}: {res.stderr.strip()[-300:]}"
    return total, "ok"


def main() -> None:
    import statistics

    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=2000)
    ap.add_argument("--regions", type=int, default=4)
    ap.add_argument("--unmanaged-per-region", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    regions = REGIONS[: a.regions]
    proc, url = start_moto()
    rows: list[dict] = []
    tools = (("gpu-launcher reap", run_ours), ("cloud custodian (c7n)", run_c7n))
    try:
        with tempfile.TemporaryDirectory() as d:
            for rnd in range(a.rounds):
                for name, runner in tools:  # interleaved: A B A B ...
                    sets = seed(url, a.instances, regions, a.unmanaged_per_region)
                    sub = Path(d) / f"{name.split()[0]}-{rnd}"
                    sub.mkdir()
                    secs, status = runner(url, regions, sub)
                    gone = terminated(url, regions)
                    exp = sets["idle"]
                    rows.append({
                        "tool": name, "round": rnd, "seconds": secs, "status": status,
                        "expected": len(exp), "terminated_right": len(gone & exp),
                        "missed": len(exp - gone), "wrong": len(gone - exp),
                        "unmanaged_touched": len(gone & sets["unmanaged"]),
                    })
    finally:
        proc.terminate()
    print(f"\nMark-then-act over {a.instances} managed instances in {len(regions)} regions on moto "
          f"(+{a.unmanaged_per_region * len(regions)} unmanaged), {WINDOW_MIN}-min window, 5-minute datapoints, "
          f"{a.rounds} interleaved rounds\n")
    hdr = f"{'tool':24} {'round':>5} {'wall s':>8} {'expected':>9} {'terminated ok':>14} {'missed':>7} {'wrong':>6} {'unmanaged hit':>14}  status"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['tool']:24} {r['round']:5d} {r['seconds']:8.2f} {r['expected']:9d} {r['terminated_right']:14d} {r['missed']:7d} {r['wrong']:6d} {r['unmanaged_touched']:14d}  {r['status']}")
    med = {name: statistics.median(r["seconds"] for r in rows if r["tool"] == name) for name, _ in tools}
    print()
    for name, m in med.items():
        print(f"median {name:24} {m:8.2f} s")
    ours, theirs = med[tools[0][0]], med[tools[1][0]]
    if ours > 0:
        print(f"ratio of medians c7n / gpu-launcher: {theirs / ours:.2f}x")
    print("(both: two CLI passes, mark then act; ours also reads GPU metrics, the ledger and heartbeats, and writes an audit row per instance)")


if __name__ == "__main__":
    main()
