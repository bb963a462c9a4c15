#!/usr/bin/env python3
"""Benchmark: ranking offers in process, `launcher offers` end to end, and `sky gpus list`.

    .venv/bin/python bench/bench_offers.py [--rows 220000] [--reps 11] [--no-sky]

1. Generates a multi-cloud SkyPilot-format catalog of realistic size (>= 200,000 rows) by
   replicating the real slices (../shared/data/catalog, or the built-in snapshot) over extra
   regions with jittered prices, plus CPU-only instance types, as most real rows are.
2. In process: parsing with pandas (once per change), compiling the offers table, loading it,
   and ranking on it (H100:8, and everything unfiltered).
3. End to end, in interleaved rounds (pass, ours on the snapshot, ours on the big catalog, sky,
   then again): `python -c pass`, `launcher offers --gpus H100:8`, and `sky gpus list H100:8`
   with the same catalog in SkyPilot's cache (~/.sky/catalogs/v8/<cloud>/vms.csv under a private
   HOME, its own API server on a free port, usage collection off; the server start is timed
   once). Ratios are medians of the pair-by-pair ratios within a round.
Targets: rank < 50 ms; offers end to end < 0.3 s and < 8x `python -c pass`.
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


def load_note(before: tuple[float, float, float] | None = None) -> str:
    """The 1-minute load average before the run (when given) and now: other people's work on the
    same cores inflates every wall time here."""
    now = os.getloadavg()
    start = f"{before[0]:.1f} before, " if before else ""
    return f"load average (1 min) {start}{now[0]:.1f} after"


def bench_rank(catalog_dir: Path, home: Path, reps: int) -> dict[str, float]:
    """In process: parse (pandas, once), compile, load the compiled table, rank on it."""
    from pricing.catalog import load_catalog
    from pricing.compiled import clear_process_cache, load_offer_catalog
    from pricing.gpus import parse_gpus
    from pricing.models import OfferQuery
    from pricing.rank import explain_offers

    cache, risk = home / "cache", home / "risk.yaml"
    t0 = time.perf_counter()
    load_catalog(catalog_dir, cache_dir=cache, risk_file=risk, use_parsed_cache=False)
    parse_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    load_offer_catalog(catalog_dir, cache_dir=cache, risk_file=risk)  # parses (cached pickle) and compiles
    compile_s = time.perf_counter() - t0
    clear_process_cache()
    t0 = time.perf_counter()
    cat = load_offer_catalog(catalog_dir, cache_dir=cache, risk_file=risk)
    compiled_load_s = time.perf_counter() - t0
    q = OfferQuery(gpus=parse_gpus("H100:8"))
    explain_offers(cat, q, limit=20)  # warm-up
    top, _ = median_time(lambda: explain_offers(cat, q, limit=20), reps * 4)
    every, _ = median_time(lambda: explain_offers(cat, q), reps * 4)
    anything, _ = median_time(lambda: explain_offers(cat, OfferQuery(), limit=20), reps * 4)
    return {
        "rows": len(cat.table),
        "parse_s": parse_s,
        "compile_s": compile_s,
        "compiled_load_s": compiled_load_s,
        "rank_top20_s": top,
        "rank_all_s": every,
        "rank_any_s": anything,
        "matched": explain_offers(cat, q, limit=1).matched,
    }


def fresh_env(**extra: str) -> dict[str, str]:
    """The user's environment as an installed package sees it: bytecode caches allowed."""
    env = {**os.environ, **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


class SkyServer:
    """SkyPilot's CLI with the same catalog in its cache and its own API server on a free port,
    under a private HOME (usage collection off). Its start-up is timed once."""

    def __init__(self, catalog_dir: Path, timeout_s: float = 300):
        self.sky = BIN / "sky"
        self.timeout_s = timeout_s
        self.home = Path(tempfile.mkdtemp(prefix="bench-sky-home-"))
        self.error: str | None = None
        self.api_start_s: float | None = None
        self.output = ""
        for cloud in CLOUD_SHARE:
            dst = self.home / ".sky" / "catalogs" / "v8" / cloud
            dst.mkdir(parents=True)
            shutil.copyfile(catalog_dir / cloud / "vms.csv", dst / "vms.csv")  # no .meta md5: never overwritten
        # Clouds without a local catalog would make SkyPilot try to download theirs: give them an empty one.
        import sky.catalog as sky_catalog  # only to find the catalog names; not timed

        header = (catalog_dir / "aws" / "vms.csv").read_text().splitlines()[0] + "\n"
        for mod in Path(sky_catalog.__file__).parent.glob("*_catalog.py"):
            dst = self.home / ".sky" / "catalogs" / "v8" / mod.name.removesuffix("_catalog.py") / "vms.csv"
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_text(header)
        import socket

        with socket.socket() as sock:  # our own server on a free port: never anyone else's
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.env = fresh_env(
            HOME=str(self.home), SKYPILOT_DISABLE_USAGE_COLLECTION="1", SKYPILOT_API_SERVER_LOCAL_PORT=str(port)
        )
        self.env.pop("SKYPILOT_API_SERVER_ENDPOINT", None)
        self.env.pop("LAUNCHER_HOME", None)
        self.cmd = [str(self.sky), "gpus", "list", "H100:8"]

    def start(self) -> bool:
        if not self.sky.exists():
            self.error = "sky not installed"
            return False
        t0 = time.perf_counter()
        p = subprocess.run([str(self.sky), "api", "start"], env=self.env, capture_output=True, text=True,
                           timeout=self.timeout_s)  # fmt: skip
        self.api_start_s = time.perf_counter() - t0
        if p.returncode != 0:
            self.error = f"sky api start failed: {p.stderr.strip()[-300:]}"
            return False
        first = subprocess.run(self.cmd, env=self.env, capture_output=True, text=True, timeout=self.timeout_s)
        if first.returncode != 0:
            self.error = f"sky gpus list failed: {(first.stderr or first.stdout).strip()[-300:]}"
            return False
        self.output = first.stdout
        return True

    def stop(self) -> None:
        subprocess.run([str(self.sky), "api", "stop"], env=self.env, capture_output=True, timeout=120)
        shutil.rmtree(self.home, ignore_errors=True)


def timed(cmd: list[str], env: dict[str, str], timeout_s: float = 300) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout_s, check=True)
    return time.perf_counter() - t0


def bench_end_to_end(catalog_dir: Path, home: Path, reps: int, sky: SkyServer | None) -> dict[str, list[float]]:
    """Interleaved rounds (A B C D, A B C D, ...) so load on the machine hits every case alike."""
    env = fresh_env(LAUNCHER_HOME=str(home))
    py = sys.executable
    cases = {
        "python -c pass": [py, "-c", "pass"],
        "offers (snapshot)": [py, "-m", "launcher.cli.main", "offers", "--gpus", "H100:8"],
        "offers (big catalog)": [py, "-m", "launcher.cli.main", "--catalog-dir", str(catalog_dir), "offers",
                               "--gpus", "H100:8"],
    }  # fmt: skip
    if sky is not None:
        cases["sky gpus list"] = sky.cmd
    for name, cmd in cases.items():  # first runs compile the tables and write bytecode caches
        if name != "sky gpus list":
            timed(cmd, env)
    out: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(reps):
        for name, cmd in cases.items():
            out[name].append(timed(cmd, sky.env if name == "sky gpus list" else env))
    return out


def ratios(a: list[float], b: list[float]) -> float:
    """Median of the pair-by-pair ratios a[i] / b[i] (pairs from the same round)."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=220_000)
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--no-sky", action="store_true")
    args = ap.parse_args()
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-offers-"))
    sky = None
    try:
        t0 = time.perf_counter()
        counts = generate(work / "catalog", args.rows)
        print(f"generated {sum(counts.values()):,} catalog rows in {time.perf_counter() - t0:.1f}s: {counts}")
        r = bench_rank(work / "catalog", work / "home-inproc", args.reps)
        if not args.no_sky:
            sky = SkyServer(work / "catalog")
            if not sky.start():
                print(f"sky gpus list: {sky.error}")
        e = bench_end_to_end(work / "catalog", work / "home-cli", args.reps, sky if sky and not sky.error else None)
    finally:
        if sky is not None:
            sky.stop()
        shutil.rmtree(work, ignore_errors=True)

    from rich.console import Console
    from rich.table import Table

    ms = lambda v: f"{v * 1000:.1f} ms"  # noqa: E731
    t = Table(title=f"offers benchmark ({os.cpu_count()} CPUs, {sum(counts.values()):,} vms.csv rows, "
                    f"{r['rows']:,} offers; {args.reps} interleaved rounds)")  # fmt: skip
    for col in ("what", "median", "target", "note"):
        t.add_column(col)
    t.add_row("parse catalog with pandas (cold)", ms(r["parse_s"]), "", "once per change of the source files")
    t.add_row("compile the offers table", ms(r["compile_s"]), "", "at refresh, or the first run after a change")
    t.add_row("load the compiled table (sha256 checked)", ms(r["compiled_load_s"]), "", "every run")
    t.add_row("rank H100:8, top 20", ms(r["rank_top20_s"]), "< 50 ms", f"{r['matched']:,} matching offers")
    t.add_row("rank H100:8, all as ScoredOffer", ms(r["rank_all_s"]), "", "")
    t.add_row("rank everything (no filter), top 20", ms(r["rank_any_s"]), "< 50 ms", f"{r['rows']:,} offers")
    base = e["python -c pass"]
    t.add_row("python -c pass", f"{statistics.median(base):.3f} s", "", "interpreter start, the floor")
    for name in ("offers (snapshot)", "offers (big catalog)"):
        v = e[name]
        t.add_row(f"launcher {name} --gpus H100:8", f"{statistics.median(v):.3f} s", "< 0.3 s",
                  f"min {min(v):.3f}, max {max(v):.3f}")  # fmt: skip
        t.add_row("  ratio to python -c pass", f"{ratios(v, base):.1f}x", "< 8x", "median of pair-by-pair ratios")
    if "sky gpus list" in e:
        v = e["sky gpus list"]
        t.add_row("sky api start (once)", f"{sky.api_start_s:.1f} s", "", "SkyPilot's local API server")
        t.add_row("sky gpus list H100:8 (server up)", f"{statistics.median(v):.3f} s", "",
                  f"min {min(v):.3f}, max {max(v):.3f}")  # fmt: skip
        t.add_row("  ratio sky / launcher (big catalog)", f"{ratios(v, e['offers (big catalog)']):.1f}x", "",
                  "median of pair-by-pair ratios, same catalog")  # fmt: skip
    Console(width=150).print(t)
    print(load_note(load_before), "(wall times on a shared machine grow with its load)")
    if sky is not None and sky.output:
        print("sky gpus list H100:8 printed:")
        print("\n".join("  " + line for line in sky.output.splitlines()[:12]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
