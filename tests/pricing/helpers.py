"""Helpers shared by the pricing and CLI tests: lay out the real catalog slices, read raw rows."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

SLICE_CLOUDS = ("aws", "gcp", "lambda", "runpod")

# The AWS vms.csv header of SkyPilot catalog v7 (also the generic column set).
AWS_V7_HEADER = (
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "vCPUs",
    "MemoryGiB",
    "GpuInfo",
    "Price",
    "SpotPrice",
    "Region",
    "AvailabilityZone",
)


def layout_slices(shared_data: Path, dest: Path, clouds=SLICE_CLOUDS) -> Path:
    """Copy ../shared/data/catalog/<cloud>_vms_slice.csv to dest/<cloud>/vms.csv (bytes unchanged)."""
    for cloud in clouds:
        (dest / cloud).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared_data / "catalog" / f"{cloud}_vms_slice.csv", dest / cloud / "vms.csv")
    return dest


def raw_rows(path: Path) -> list[dict[str, str]]:
    """The CSV rows as dicts, read with the csv module only (independent of the code under test)."""
    with open(path, newline="", encoding="utf-8") as f:
        return [{k.strip(): (v or "").strip() for k, v in r.items()} for r in csv.DictReader(f)]


def fnum(v: str) -> float | None:
    return float(v) if v not in ("", None) else None


def write_csv(path: Path, header: list[str], rows: list[list], newline: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator=newline)
        w.writerow(header)
        w.writerows(rows)
    return path


class StaticServer:
    """A real HTTP server on 127.0.0.1 serving a folder; `delay_s` makes every answer slow."""

    def __init__(self, root: Path, delay_s: float = 0.0):
        import functools
        import threading
        import time
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                if delay_s:
                    time.sleep(delay_s)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.requests = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_layout(shared_data: Path, root: Path, schema: str = "v8") -> Path:
    """root/catalogs/<schema>/<cloud>/vms.csv from the real slices, plus the advisor feed."""
    layout_slices(shared_data, root / "catalogs" / schema)
    shutil.copyfile(shared_data / "spot-advisor-data.json", root / "spot-advisor-data.json")
    return root


def small_data(dest: Path) -> Path:
    """A tiny stand-in for ../shared/data (same file names and formats), for clones without it."""
    head = list(AWS_V7_HEADER)
    cat = dest / "catalog"
    write_csv(
        cat / "aws_vms_slice.csv",
        head,
        [["p5.48xlarge", "H100", "8.0", "192.0", "2048.0", "", "98.32", "30.1", "us-east-1", "use1-az1"]],
    )
    write_csv(cat / "gcp_vms_slice.csv", head, [
        ["a2-highgpu-8g", "", "", "96.0", "680.0", "", "5.91582", "2.36604", "us-central1", "us-central1-a"],
        ["", "A100", "8", "", "", "", "23.47126", "9.1776", "us-central1", "us-central1-a"],
    ])  # fmt: skip
    write_csv(
        cat / "lambda_vms_slice.csv",
        head[:8] + ["Region"],
        [["gpu_8x_a100", "A100", "8.0", "124.0", "1800.0", "", "10.32", "", "us-east-1"]],
        newline="\r\n",
    )
    write_csv(
        cat / "runpod_vms_slice.csv",
        head,
        [["8x_H100_SECURE", "H100", "8.0", "128.0", "640.0", "H100", "19.12", "", "CA", "CA-MTL-1"]],
        newline="\r\n",
    )
    feed = {"ranges": [], "spot_advisor": {"us-east-1": {"Linux": {"p5.48xlarge": {"r": 2, "s": 60}}}}}
    (dest / "spot-advisor-data.json").write_text(__import__("json").dumps(feed))
    return dest


def snapshot_hourly_price(cloud: str, region: str, instance_type: str, *, spot: bool) -> float | None:
    """$/h of an instance type in the cheapest zone of a region, from the shipped snapshot's raw
    rows (csv module only). GCP GPU hosts add the accelerator row of the same zone (the host's
    GPUs: a2-highgpu-Ng = A100 xN, g2-standard-{4..32} = L4 x1, and so on, as written here)."""
    snap = Path(__file__).resolve().parents[2] / "pricing" / "snapshot" / f"{cloud}_vms.csv"
    rows = raw_rows(snap)
    col = "SpotPrice" if spot else "Price"
    prices = []
    if cloud == "gcp":
        gpus = {"g2-standard-4": ("L4", 1), "g2-standard-8": ("L4", 1), "a2-highgpu-8g": ("A100", 8)}
        acc_name, acc_count = gpus.get(instance_type, (None, 0))
        acc = {
            r["AvailabilityZone"]: fnum(r[col])
            for r in rows
            if not r["InstanceType"] and r["AcceleratorName"] == acc_name and fnum(r["AcceleratorCount"]) == acc_count
        }
        for r in rows:
            if r["InstanceType"] == instance_type and r["Region"] == region and fnum(r[col]) is not None:
                extra = acc.get(r["AvailabilityZone"]) if acc_name else 0.0
                if extra is not None:
                    prices.append(fnum(r[col]) + extra)
    else:
        prices = [
            fnum(r[col])
            for r in rows
            if r["InstanceType"] == instance_type and r["Region"] == region and fnum(r[col]) is not None
        ]
    return min(prices) if prices else None
