#!/usr/bin/env python3
"""Build the built-in price snapshot (pricing/snapshot/) from a SkyPilot-format catalog.

    python scripts/build_snapshot.py --catalog-dir DIR            # DIR/<cloud>/vms.csv
    python scripts/build_snapshot.py --file aws=aws_vms_slice.csv --file gcp=gcp_vms_slice.csv \
        --file gcp=gcp_n1_hosts_slice.csv ...     # files of one cloud are appended, in order
        [--spot-advisor spot-advisor-data.json] [--as-of 2026-11-30] [--origin TEXT] [--out DIR]

Keeps GPU rows only (rows naming an accelerator, plus the GCP host VMs that accelerator rows
price against: GPU-only families such as a2/a3/g2, and the general-purpose N1 VMs that T4, V100,
P100, P4 and K80 attach to), copied unchanged apart from LF line endings; the loader offers the
N1 rows of the snapshot only as GPU hosts. Writes
`<cloud>_vms.csv` per cloud and `snapshot.json` (as-of date, origin, rows and sha256 per file).
With --spot-advisor it also writes `aws_spot_advisor.csv` (region, instance_type, band) for GPU
instance types, derived from the AWS Spot Instance Advisor feed, and its `aws_spot_advisor.json`.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pricing.gcp_split import GPU_ONLY_HOST_PREFIXES, N1_FAMILIES  # noqa: E402
from pricing.risk import derive_advisor_table  # noqa: E402
from pricing.sources import SUPPORTED_CLOUDS  # noqa: E402


def gpu_rows(cloud: str, text: str) -> tuple[list[str], list[list[str]]]:
    reader = csv.reader(io.StringIO(text.replace("\r\n", "\n")))
    header = next(reader)
    idx = {name.strip(): i for i, name in enumerate(header)}
    acc_i, type_i = idx["AcceleratorName"], idx["InstanceType"]
    keep = []
    for row in reader:
        if not row:
            continue
        acc, itype = row[acc_i].strip(), row[type_i].strip()
        if acc or (cloud == "gcp" and itype.startswith(GPU_ONLY_HOST_PREFIXES + N1_FAMILIES)):
            keep.append(row)
    return header, keep


def cloud_rows(cloud: str, paths: list[Path]) -> tuple[list[str], list[list[str]]]:
    """GPU rows of one cloud's files, appended in order; later files' columns are matched by name."""
    header, rows = gpu_rows(cloud, paths[0].read_text(encoding="utf-8"))
    for path in paths[1:]:
        more_header, more = gpu_rows(cloud, path.read_text(encoding="utf-8"))
        names = [h.strip() for h in more_header]
        if sorted(names) != sorted(h.strip() for h in header):
            raise SystemExit(f"{path}: columns {names} differ from {paths[0]}'s")
        order = [names.index(h.strip()) for h in header]
        rows += [[r[i] for i in order] for r in more]
    return header, rows


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    data = buf.getvalue().encode()
    path.write_bytes(data)
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--catalog-dir", type=Path, help="folder with <cloud>/vms.csv")
    ap.add_argument("--file", action="append", default=[], metavar="CLOUD=PATH", help="one cloud's vms.csv")
    ap.add_argument("--spot-advisor", type=Path, help="AWS spot-advisor-data.json")
    ap.add_argument("--as-of", default=None, help="date the prices were read (default: today, UTC)")
    ap.add_argument("--origin", default="https://github.com/skypilot-org/skypilot-catalog (catalogs/v7)")
    ap.add_argument("--out", type=Path, default=REPO / "pricing" / "snapshot")
    args = ap.parse_args(argv)

    files: dict[str, list[Path]] = {}
    if args.catalog_dir:
        for cloud in SUPPORTED_CLOUDS:
            p = args.catalog_dir / cloud / "vms.csv"
            if p.is_file():
                files[cloud] = [p]
    for item in args.file:
        cloud, _, path = item.partition("=")
        if not path:
            ap.error(f"--file wants CLOUD=PATH, got {item!r}")
        files.setdefault(cloud.strip().lower(), []).append(Path(path))
    if not files and not args.spot_advisor:
        ap.error("nothing to do: give --catalog-dir, --file or --spot-advisor")

    as_of = args.as_of or datetime.now(UTC).date().isoformat()
    args.out.mkdir(parents=True, exist_ok=True)
    meta_path = args.out / "snapshot.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if files:
        meta = {"as_of": as_of, "origin": args.origin, "built_by": "scripts/build_snapshot.py", "clouds": {}}
        for old in args.out.glob("*_vms.csv"):
            old.unlink()
        for cloud, paths in sorted(files.items()):
            header, rows = cloud_rows(cloud, paths)
            data = write_csv(args.out / f"{cloud}_vms.csv", header, rows)
            meta["clouds"][cloud] = {
                "file": f"{cloud}_vms.csv",
                "rows": len(rows),
                "sha256": hashlib.sha256(data).hexdigest(),
                "source_file": " + ".join(p.name for p in paths),
            }
            print(f"{cloud}: {len(rows)} GPU rows")
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    if args.spot_advisor:
        feed = json.loads(args.spot_advisor.read_text())
        table = derive_advisor_table(feed)
        data = table.to_csv(index=False, lineterminator="\n").encode()
        (args.out / "aws_spot_advisor.csv").write_bytes(data)
        (args.out / "aws_spot_advisor.json").write_text(
            json.dumps(
                {
                    "as_of": args.as_of or as_of,
                    "origin": "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json",
                    "source_file": args.spot_advisor.name,
                    "rows": len(table),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "bands": [r["label"] for r in feed.get("ranges", [])],
                },
                indent=2,
            )
            + "\n"
        )
        print(f"aws spot advisor: {len(table)} GPU rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
