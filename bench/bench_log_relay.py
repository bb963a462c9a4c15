"""What keeping secrets out of the log costs a job: its output through the log relay against the
same output written straight to the file (what a task without `secrets:` does).

    .venv/bin/python bench/bench_log_relay.py [--mib 64] [--lines 200]

Rows:
  straight to the file (peer)   the job's stdout is the log file
  relay, 1 secret               one 40-character token (6 patterns with its encodings)
  relay, 3 secrets + a PEM key  three tokens and a 1.7 KB private key (its escaped form too)
Figures: throughput of a job printing log lines as fast as it can (until the last byte is in the
file), and the median / p99 time from one printed line to that line being in the file (what
`launcher logs -f` can show at best).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from launcher.executors.log_relay import job_output, wait_relays

LINE = "step {i:>8} loss 0.{i:06d} lr 3.0e-4 tokens/s 123456 grad_norm 1.2345 throughput ok\n"

WRITER = r"""
import os, sys
mib, line = int(sys.argv[1]), sys.argv[2]
chunk = "".join(line.format(i=i) for i in range(100)).encode()
left = mib << 20
while left > 0:
    os.write(1, chunk[:left]); left -= len(chunk)
"""

PINGER = r"""
import os, sys, time
n, log = int(sys.argv[1]), sys.argv[2]
out = []
for i in range(n):
    msg = f"ping {i:06d}\n".encode()
    t0 = time.perf_counter(); os.write(1, msg)
    while not open(log, "rb").read().endswith(msg):
        time.sleep(0.0002)
    out.append(time.perf_counter() - t0)
    time.sleep(0.002)
sys.stderr.write(" ".join(f"{x:.6f}" for x in out))
"""


def _run(code: str, args: list[str], log: Path, secrets: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    with job_output(log, secrets) as (fd, relay):
        p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=fd, stderr=subprocess.PIPE)
    err = p.communicate()[1].decode()
    if relay is not None:
        assert wait_relays([relay], 60)
    return time.perf_counter() - t0, err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--lines", type=int, default=200)
    args = ap.parse_args()
    pem = "-----BEGIN PRIVATE KEY-----\n" + "\n".join("A" * 64 for _ in range(26)) + "\n-----END PRIVATE KEY-----\n"
    cases = [
        ("straight to the file (peer)", []),
        ("relay, 1 secret", ["sk-" + "x7" * 18 + "zz"]),
        ("relay, 3 secrets + a PEM key", ["sk-" + "x7" * 18 + "zz", "ghp_" + "Q" * 36, "hunter2-passw0rd", pem]),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, secrets in cases:
            log = Path(tmp) / f"{len(rows)}.log"
            wall, _ = _run(WRITER, [str(args.mib), LINE], log, secrets)
            assert log.stat().st_size == args.mib << 20
            lat_log = Path(tmp) / f"{len(rows)}-lat.log"
            lat_log.touch()
            _, err = _run(PINGER, [str(args.lines), str(lat_log)], lat_log, secrets)
            lat = sorted(float(x) for x in err.split())
            rows.append((name, args.mib / wall, statistics.median(lat) * 1e3, lat[int(0.99 * (len(lat) - 1))] * 1e3))
    peer = rows[0][1]
    print(f"| output path ({args.mib} MiB of log lines; {args.lines} single lines) | MiB/s | vs peer | line latency median ms | p99 ms |")
    print("|---|---|---|---|---|")
    for name, mibs, med, p99 in rows:
        print(f"| {name} | {mibs:,.0f} | {mibs / peer:.2f}x | {med:.2f} | {p99:.2f} |")
    print(f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
