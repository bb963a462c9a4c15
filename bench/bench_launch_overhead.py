"""The launcher's own overhead for a trivial local job, against `bash -c` running the same
command.

    .venv/bin/python bench/bench_launch_overhead.py [--repeat 5]

For each way of running `echo ready` it measures, from process start: the time until the
job's first output line reaches our stdout pipe, and the time until the process exits.
Rows:
  bash -c                        the floor: fork/exec bash, run echo
  python -c pass                 interpreter start alone (what any Python CLI pays)
  import CLI                     interpreter + `import launcher.cli.main` (typer, command modules)
  launcher --help                interpreter + CLI import + typer building the help
  launch SPEC --dry-run          + parse the spec, plan (no ledger, nothing runs)
  launch SPEC --yes              + ledger, controller, local executor, the job, done: the
                                 ledger exists (every launch after a user's first)
  launch --yes, first            the same in a fresh LAUNCHER_HOME: also creates the ledger
                                 (Alembic migrations)
  launch --yes, daemon           the same through the console scripts' entry point with a command
                                 daemon running (`launcher daemon start`): a warm worker forked
                                 per command runs it; this process only hands it over and waits
Then the breakdown by phase (differences of the medians above) and where the import time of
one `launch --yes` goes, by package (python -X importtime; it inflates what it measures a
little, so read it as shares). Bytecode caches are allowed, as for an installed package. The
load average is printed before and after: 4 other engineers share these 2 cores.

`--instructions` adds the instructions the python process executes (valgrind's callgrind, about two
minutes): unlike wall and CPU time they do not move with the machine's load or speed, so two
revisions compare within about 0.5%; the job's own processes are not counted. It also counts what
importing each library a launch uses costs alone, and what a launch would be without SQLAlchemy's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = """\
name: bench
resources: {cpus: 1}
run: echo ready
launcher: {project: bench, expected_hours: 0.01}
"""


def measure(argv: list[str], env: dict[str, str], first_line: str | None) -> tuple[float | None, float, float]:
    """(time to the first line, wall time, CPU time user+sys of the child: what the load inflates least)."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(REPO))
    t_first = None
    assert proc.stdout is not None
    for raw in proc.stdout:
        if first_line is not None and t_first is None and raw.decode().strip() == first_line:
            t_first = time.perf_counter() - t0
    proc.wait()
    total = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited with {proc.returncode}")
    return t_first, total, (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--instructions", action="store_true", help="also count instructions under valgrind (callgrind)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    py = sys.executable
    base_env = {**os.environ, "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}
    base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "GOOGLE_APPLICATION_CREDENTIALS"):
        base_env.pop(v, None)
    tmp = Path(tempfile.mkdtemp(prefix="bench-launch-"))
    spec = tmp / "bench.yaml"
    spec.write_text(SPEC)
    home_n = [0]

    def env(fresh: bool = False) -> dict[str, str]:
        """A new LAUNCHER_HOME when fresh (no ledger yet), else the one every warm case shares."""
        if fresh:
            home_n[0] += 1
        return {**base_env, "LAUNCHER_HOME": str(tmp / (f"home{home_n[0]}" if fresh else "home")), "HOME": str(tmp)}

    cases = [
        ("bash -c 'echo ready'", lambda: ["bash", "-c", "echo ready"], "ready"),
        ("python -c pass", lambda: [py, "-c", "pass"], None),
        ("import CLI", lambda: [py, "-c", "import launcher.cli.main"], None),
        ("launcher --help", lambda: [py, "-m", "launcher.cli.main", "--help"], None),
        ("launch --dry-run", lambda: [py, "-m", "launcher.cli.main", "launch", str(spec), "--dry-run"], None),
        ("launch --yes", lambda: [py, "-m", "launcher.cli.main", "launch", str(spec), "--yes"], "ready"),
        ("launch --yes, first", lambda: [py, "-m", "launcher.cli.main", "launch", str(spec), "--yes"], "ready"),
        ("launch --yes, daemon", lambda: [py, "-m", "launcher.cli.entry", "launch", str(spec), "--yes"], "ready"),
    ]
    daemon = subprocess.run([py, "-m", "launcher.cli.main", "daemon", "start"], env=env(), cwd=str(REPO),
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    if daemon.returncode != 0:
        raise SystemExit(f"launcher daemon start failed: {daemon.stderr}")
    try:
        results, load_before = run_cases(cases, args.repeat, env)
        served = json.loads(subprocess.run([py, "-m", "launcher.cli.main", "daemon", "status", "--json"], env=env(),
                                           cwd=str(REPO), capture_output=True, text=True, timeout=60).stdout)["served"]  # fmt: skip
    finally:
        subprocess.run([py, "-m", "launcher.cli.main", "daemon", "stop"], env=env(), cwd=str(REPO), capture_output=True, timeout=60)
    if served != args.repeat + 1:  # + the warm-up: every daemon case went through the daemon
        raise SystemExit(f"the daemon served {served} launches, not {args.repeat + 1}: the daemon row is not what it says")
    floor_first = statistics.median(results[cases[0][0]][0])
    floor_total = statistics.median(results[cases[0][0]][1])
    print(f"median of {args.repeat} interleaved runs, {os.cpu_count()} CPUs")
    print(f"{'command':<24} {'first line s':>13} {'x bash':>8} {'total s':>9} {'x bash':>8} {'cpu s':>7}")
    for name, _, _ in cases:
        firsts, totals, cpus = results[name]
        f = statistics.median(firsts) if firsts else None
        t = statistics.median(totals)
        f_s = f"{f:13.3f} {f / floor_first:8.1f}" if f is not None else f"{'-':>13} {'-':>8}"
        print(f"{name:<24} {f_s} {t:9.3f} {t / floor_total:8.1f} {statistics.median(cpus):7.3f}")
    print("(cpu s counts this process's children: for the daemon row, the client alone; its worker is the daemon's child)")
    med = {name: statistics.median(results[name][1]) for name, _, _ in cases}
    phases = [
        ("interpreter start", med["python -c pass"]),
        ("CLI imports (typer, commands)", med["import CLI"] - med["python -c pass"]),
        ("spec + plan (--dry-run)", med["launch --dry-run"] - med["import CLI"]),
        ("ledger + controller + job", med["launch --yes"] - med["launch --dry-run"]),
    ]
    first_extra = med["launch --yes, first"] - med["launch --yes"]
    print(f"\nlaunch --yes by phase (differences of medians; total {med['launch --yes']:.3f} s, target < 0.5 s)")
    for name, v in phases:
        print(f"  {name:<32} {v:7.3f} s  {100 * v / med['launch --yes']:5.1f}%")
    print(f"  (a user's first launch also creates the ledger: + {first_extra:.3f} s)")
    d = med["launch --yes, daemon"]
    print(f"launch --yes through the command daemon: {d:.3f} s, {d / med['launch --yes']:.2f}x the launch in its own process, "
          f"{d / med['python -c pass']:.1f}x python -c pass (target < 0.5 s: {'met' if d < 0.5 else 'NOT met'})")  # fmt: skip
    print("\nimport time of one `launch --yes` by package (python -X importtime)")
    for name, us in import_breakdown([py, "-X", "importtime", "-m", "launcher.cli.main", "launch", str(spec), "--yes"],
                                     env()):  # fmt: skip
        print(f"  {name:<32} {us / 1e6:7.3f} s")
    if args.instructions:
        print("\ninstructions executed by the python process (valgrind --tool=callgrind)")
        counted = {}
        for name, argv in (("python -c pass", [py, "-c", "pass"]),
                           ("launch --yes", [py, "-m", "launcher.cli.main", "launch", str(spec), "--yes"])):  # fmt: skip
            counted[name] = instructions(argv, env())
            print(f"  {name:<32} {counted[name] / 1e6:9,.0f} M")
        print(f"  launch --yes / python -c pass    {counted['launch --yes'] / counted['python -c pass']:9.1f}x")
        print("  importing a library alone, over `python -c pass` (they overlap: typer imports part of pydantic)")
        base = counted["python -c pass"]
        for name, code in LIBRARY_IMPORTS:
            n = instructions([py, "-c", code], env()) - base
            counted[name] = n
            print(f"    {name:<30} {n / 1e6:9,.0f} M  {100 * n / counted['launch --yes']:5.1f}% of the launch")
        without = counted["launch --yes"] - counted[SQLALCHEMY]
        print(f"  launch --yes less SQLAlchemy's import {without / 1e6:,.0f} M = {without / base:.1f}x python -c pass")
    after = os.getloadavg()
    print(f"load average (1 min) {load_before[0]:.1f} before, {after[0]:.1f} after "
          "(wall times on a shared machine grow with its load)")  # fmt: skip


# What a launch imports from each library: pydantic's model machinery loads with the first model.
SQLALCHEMY = "sqlalchemy (+ SQLite dialect)"
LIBRARY_IMPORTS = (
    ("typer", "import typer"),
    ("yaml", "import yaml"),
    ("pydantic (one model built)", "import pydantic\nclass M(pydantic.BaseModel):\n    x: int"),
    (SQLALCHEMY, "import sqlalchemy.dialects.sqlite"),
)
GROUPS = ("sqlalchemy", "alembic", "sky", "pulumi", "boto3", "torch", "pydantic", "pydantic_core", "typer", "yaml", "numpy", "pandas", "rich", "launcher.ledger",
          "launcher.controller", "launcher.planning", "launcher.spec", "launcher", "pricing")  # fmt: skip


def run_cases(cases, repeat: int, env) -> tuple[dict[str, tuple[list[float], list[float], list[float]]], tuple]:
    """Each case once to warm up (bytecode caches written, as an install would have them), then
    `repeat` rounds, interleaved so machine load hits all cases alike."""
    load_before = os.getloadavg()
    for name, argv, first in cases:
        measure(argv(), env(fresh=name.endswith("first")), first)
    results: dict[str, tuple[list[float], list[float], list[float]]] = {}
    for _ in range(repeat):
        for name, argv, first in cases:
            f, t, cpu = measure(argv(), env(fresh=name.endswith("first")), first)
            firsts, totals, cpus = results.setdefault(name, ([], [], []))
            if f is not None:
                firsts.append(f)
            totals.append(t)
            cpus.append(cpu)
    return results, load_before


def instructions(argv: list[str], env: dict[str, str]) -> int:
    """Instructions the process executes (not its children), from callgrind's summary line."""
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO), timeout=600)  # fmt: skip
    m = re.search(r"Collected : (\d+)", p.stderr)
    if p.returncode != 0 or m is None:
        raise SystemExit(f"valgrind {argv[1:3]} failed (exit {p.returncode}): {p.stderr[-500:]}")
    return int(m.group(1))


def import_breakdown(argv: list[str], env: dict[str, str]) -> list[tuple[str, int]]:
    """Self import time (us) summed per package group, largest first."""

    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO))
    totals: dict[str, int] = {}
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \| \s*(\S+)", line)
        if not m:
            continue
        mod = m.group(2)
        group = next((g for g in GROUPS if mod == g or mod.startswith(g + ".")), "other (stdlib, ...)")
        totals[group] = totals.get(group, 0) + int(m.group(1))
    return sorted(totals.items(), key=lambda kv: -kv[1])


if __name__ == "__main__":
    main()
