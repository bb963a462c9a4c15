#!/usr/bin/env python3
"""Benchmark: ranking offers in process, `launcher offers` end to end, and `sky gpus list`.

    .venv/bin/python bench/bench_offers.py [--rows 220000] [--reps 5] [--no-sky]

1. Generates a multi-cloud SkyPilot-format catalog of realistic size (>= 200,000 rows) by
   replicating the real slices (../shared/data/catalog, or the built-in snapshot) over extra
   regions with jittered prices, plus CPU-only instance types, as most real rows are.
2. Times `rank_offers` for one shape (H100:8) in process after the catalog is loaded.
3. Times `launcher --catalog-dir DIR offers --gpus H100:8` from process start to exit (median).
4. Times `sky gpus list H100:8` with the same catalog placed in SkyPilot's cache
   (~/.sky/catalogs/v8/<cloud>/vms.csv under a temporary HOME; usage collection off). The
   SkyPilot CLI talks to its local API server: its start-up is timed separately.
Targets: rank < 50 ms, offers end to end < 1.5 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SLICES = REPO.parent / "shared" / "data" / "catalog"
SNAPSHOT = REPO / "pricing" / "snapshot"
BIN = Path(sys.executable).parent
CLOUD_SHARE = {"aws": 0.45, "gcp": 0.25, "azure": 0.15, "lambda": 0.05, "runpod": 0.10}
CPU_TYPES: dict[str, list[str]] = {
    "aws": [
        f"{fam}.{size}"
        for fam in ("m5", "m6i", "c5", "c6i", "r5", "r6i", "m7i", "c7i")
        for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")
    ],
    "gcp": [
        f"{fam}-{kind}-{n}"
        for fam in ("n1", "n2", "e2")
        for kind in ("standard", "highmem", "highcpu")
        for n in (2, 4, 8, 16, 32, 64)
    ],
    "azure": [f"Standard_D{n}s_v5" for n in (2, 4, 8, 16, 32, 48, 64, 96)]
    + [f"Standard_E{n}s_v5" for n in (2, 4, 8, 16, 32, 48, 64, 96)],
}


def source_frames() -> dict[str, pd.DataFrame]:
    out = {}
    for cloud in ("aws", "gcp", "lambda", "runpod"):
        p = SLICES / f"{cloud}_vms_slice.csv"
        if not p.is_file():
            p = SNAPSHOT / f"{cloud}_vms.csv"
        out[cloud] = pd.read_csv(p, dtype=str, keep_default_na=False)
    # Azure has no slice: derive GPU rows from AWS's (same schema), renamed to Azure-like types.
    az = out["aws"].copy()
    az["InstanceType"] = "Standard_ND" + az["InstanceType"].str.replace(".", "_", regex=False)
    az["Region"] = az["Region"].str.replace("-", "", regex=False)
    az["AvailabilityZone"] = ""
    out["azure"] = az
    return out


def cpu_rows(cloud: str, template: pd.DataFrame, rng: np.random.Generator, n: int) -> pd.DataFrame:
    types = CPU_TYPES.get(cloud)
    if not types or n <= 0:
        return template.iloc[0:0]
    regions = template[["Region", "AvailabilityZone"]].drop_duplicates().to_numpy()
    pick = regions[rng.integers(0, len(regions), n)]
    itype = np.asarray(types)[rng.integers(0, len(types), n)]
    vcpu = rng.choice([2, 4, 8, 16, 32, 64], n).astype(float)
    price = vcpu * rng.uniform(0.03, 0.06, n)
    df = pd.DataFrame({c: [""] * n for c in template.columns})
    df["InstanceType"], df["vCPUs"], df["MemoryGiB"] = itype, vcpu.astype(str), (vcpu * 4).astype(str)
    df["Region"], df["AvailabilityZone"] = pick[:, 0], pick[:, 1]
    df["Price"] = np.round(price, 5).astype(str)
    if "SpotPrice" in df.columns:
        df["SpotPrice"] = np.round(price * rng.uniform(0.2, 0.6, n), 5).astype(str)
    return df


def generate(dest: Path, rows: int, seed: int = 0) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    counts = {}
    for cloud, base in source_frames().items():
        target = int(rows * CLOUD_SHARE[cloud]) + 1
        gpu_target = target // 2 if cloud in CPU_TYPES else target
        parts, k = [], 0
        while sum(map(len, parts)) < gpu_target:
            rep = base.copy()
            if k:
                # a new region (with its zones) per replica; GCP host and GPU rows move together
                rep["Region"] = rep["Region"] + f"-x{k}"
                if "AvailabilityZone" in rep.columns:
                    az = rep["AvailabilityZone"]
                    rep["AvailabilityZone"] = np.where(az != "", az + f"-x{k}", "")
                for col in ("Price", "SpotPrice"):
                    if col in rep.columns:
                        v = pd.to_numeric(rep[col], errors="coerce") * rng.uniform(0.9, 1.1, len(rep))
                        rep[col] = np.where(v.notna(), v.round(5).astype(str), "")
            parts.append(rep)
            k += 1
        parts.append(cpu_rows(cloud, base, rng, target - sum(map(len, parts))))
        df = pd.concat(parts, ignore_index=True)
        (dest / cloud).mkdir(parents=True, exist_ok=True)
        df.to_csv(dest / cloud / "vms.csv", index=False)
        counts[cloud] = len(df)
    return counts


def median_time(fn, reps: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def child_cpu_s() -> float:
    """CPU seconds (user + sys) used so far by finished child processes."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def load_note() -> str:
    try:
        return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    except OSError:
        return ""


def bench_rank(catalog_dir: Path, home: Path, reps: int) -> dict[str, float]:
    os.environ["LAUNCHER_HOME"] = str(home)
    from pricing.catalog import clear_process_cache, load_catalog
    from pricing.gpus import parse_gpus
    from pricing.models import OfferQuery
    from pricing.rank import explain_offers

    cache = home / "catalogs"  # the launcher's cache folder under this LAUNCHER_HOME
    t0 = time.perf_counter()
    cat = load_catalog(catalog_dir, cache_dir=cache, use_parsed_cache=False)
    parse_s = time.perf_counter() - t0
    clear_process_cache()
    load_catalog(catalog_dir, cache_dir=cache)  # parses again and writes the parsed cache
    clear_process_cache()
    t0 = time.perf_counter()
    cat = load_catalog(catalog_dir, cache_dir=cache)
    cached_s = time.perf_counter() - t0
    q = OfferQuery(gpus=parse_gpus("H100:8"))
    explain_offers(cat, q, limit=20)  # warm-up
    top, _ = median_time(lambda: explain_offers(cat, q, limit=20), reps * 4)
    every, _ = median_time(lambda: explain_offers(cat, q), reps * 4)
    cpu = []
    for _ in range(reps * 4):
        c0 = time.process_time()
        explain_offers(cat, q, limit=20)
        cpu.append(time.process_time() - c0)
    matched = explain_offers(cat, q, limit=1).matched
    return {
        "rows": len(cat.offers),
        "parse_s": parse_s,
        "cached_load_s": cached_s,
        "rank_top20_s": top,
        "rank_top20_cpu_s": statistics.median(cpu),
        "rank_all_s": every,
        "matched": matched,
    }


def bench_offers_cli(catalog_dir: Path, home: Path, reps: int) -> dict[str, float]:
    env = {**os.environ, "LAUNCHER_HOME": str(home)}
    cmd = [str(BIN / "launcher"), "--catalog-dir", str(catalog_dir), "offers", "--gpus", "H100:8"]
    subprocess.run(cmd, env=env, capture_output=True, check=True)  # first run fills the parsed cache

    def once():
        subprocess.run(cmd, env=env, capture_output=True, check=True)

    cpu0 = child_cpu_s()
    med, times = median_time(once, reps)
    return {"median_s": med, "min_s": min(times), "max_s": max(times), "cpu_s": (child_cpu_s() - cpu0) / reps}


def bench_sky(catalog_dir: Path, reps: int, timeout_s: float = 300) -> dict[str, float | str]:
    sky = BIN / "sky"
    if not sky.exists():
        return {"error": "sky not installed"}
    home = Path(tempfile.mkdtemp(prefix="bench-sky-home-"))
    for cloud in CLOUD_SHARE:
        dst = home / ".sky" / "catalogs" / "v8" / cloud
        dst.mkdir(parents=True)
        shutil.copyfile(catalog_dir / cloud / "vms.csv", dst / "vms.csv")  # no .meta md5: never overwritten
    # SkyPilot lists every cloud it knows when none is enabled; with no internet here, clouds
    # without a local catalog would make it try to download theirs. Give them an empty one.
    import sky.catalog as sky_catalog  # only to find the catalog names; not timed

    header = (catalog_dir / "aws" / "vms.csv").read_text().splitlines()[0] + "\n"
    for mod in Path(sky_catalog.__file__).parent.glob("*_catalog.py"):
        dst = home / ".sky" / "catalogs" / "v8" / mod.name.removesuffix("_catalog.py") / "vms.csv"
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(header)
    import socket

    with socket.socket() as sock:  # our own server on a free port: never touch anyone else's
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "HOME": str(home),
        "SKYPILOT_DISABLE_USAGE_COLLECTION": "1",
        "SKYPILOT_API_SERVER_LOCAL_PORT": str(port),
    }
    env.pop("SKYPILOT_API_SERVER_ENDPOINT", None)
    env.pop("LAUNCHER_HOME", None)
    out: dict[str, float | str] = {}
    try:
        t0 = time.perf_counter()
        p = subprocess.run([str(sky), "api", "start"], env=env, capture_output=True, text=True, timeout=timeout_s)
        out["api_start_s"] = time.perf_counter() - t0
        if p.returncode != 0:
            out["error"] = f"sky api start failed: {p.stderr.strip()[-300:]}"
            return out
        cmd = [str(sky), "gpus", "list", "H100:8"]
        first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        if first.returncode != 0:
            out["error"] = f"sky gpus list failed: {(first.stderr or first.stdout).strip()[-300:]}"
            return out
        out["output"] = first.stdout

        def once():
            subprocess.run(cmd, env=env, capture_output=True, timeout=timeout_s, check=True)

        cpu0 = child_cpu_s()
        med, times = median_time(once, reps)
        # the CLI's own CPU; the API server does the catalog work in another process
        out.update(median_s=med, min_s=min(times), max_s=max(times), cpu_s=(child_cpu_s() - cpu0) / reps)
    except subprocess.TimeoutExpired as e:
        out["error"] = f"timed out: {e.cmd}"
    finally:
        subprocess.run([str(sky), "api", "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(home, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=220_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-sky", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-offers-"))
    try:
        t0 = time.perf_counter()
        counts = generate(work / "catalog", args.rows)
        print(f"generated {sum(counts.values()):,} catalog rows in {time.perf_counter() - t0:.1f}s: {counts}")
        r = bench_rank(work / "catalog", work / "home-inproc", args.reps)
        c = bench_offers_cli(work / "catalog", work / "home-cli", args.reps)
        s = {} if args.no_sky else bench_sky(work / "catalog", args.reps)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    from rich.console import Console
    from rich.table import Table

    t = Table(
        title=f"offers benchmark ({os.cpu_count()} CPUs, {sum(counts.values()):,} vms.csv rows, {r['rows']:,} offers)"
    )
    for col in ("what", "time", "target", "note"):
        t.add_column(col)
    t.add_row("parse catalog (cold, in process)", f"{r['parse_s'] * 1000:.0f} ms", "", "once per change of the files")
    t.add_row("load parsed catalog (cached)", f"{r['cached_load_s'] * 1000:.0f} ms", "", "")
    t.add_row(
        "rank H100:8, top 20 (median)",
        f"{r['rank_top20_s'] * 1000:.1f} ms",
        "< 50 ms",
        f"{r['matched']:,} matching offers; CPU {r['rank_top20_cpu_s'] * 1000:.1f} ms",
    )
    t.add_row("rank H100:8, all as ScoredOffer", f"{r['rank_all_s'] * 1000:.1f} ms", "", "")
    t.add_row(
        "launcher offers --gpus H100:8 (median)",
        f"{c['median_s']:.3f} s",
        "< 1.5 s",
        f"min {c['min_s']:.3f}, max {c['max_s']:.3f}; CPU {c['cpu_s']:.3f} s per run",
    )
    if s.get("median_s"):
        t.add_row("sky api start (once)", f"{s['api_start_s']:.1f} s", "", "SkyPilot's local API server")
        t.add_row(
            "sky gpus list H100:8 (median, server up)",
            f"{s['median_s']:.3f} s",
            "",
            f"min {s['min_s']:.3f}, max {s['max_s']:.3f}; CLI CPU {s['cpu_s']:.3f} s",
        )
        t.add_row("ratio sky / launcher", f"{s['median_s'] / c['median_s']:.1f}x", "", "end to end, same catalog")
        t.add_row(
            "ratio (sky incl. api start) / launcher",
            f"{(s['median_s'] + s['api_start_s']) / c['median_s']:.1f}x",
            "",
            "first use",
        )
    elif s:
        t.add_row("sky gpus list H100:8", "-", "", str(s.get("error")))
    Console(width=140).print(t)
    print(load_note(), "(wall times on a shared machine grow with its load; CPU time does not)")
    if s.get("output"):
        print("sky gpus list H100:8 printed:")
        print("\n".join("  " + line for line in str(s["output"]).splitlines()[:12]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
