"""Every output format read back by its own reader, and the HTML drawn by headless Chromium."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from launcher.report import ReportQuery, build_report
from launcher.report.build import HTML_KEYS
from launcher.report.formats import render, write

from .conftest import NOW

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def result(hand_ledger):
    return build_report(hand_ledger, ReportQuery(by=("experiment",)), now=NOW, extra_keys=HTML_KEYS)


def test_csv_reads_back_with_pandas(result):
    df = pd.read_csv(io.BytesIO(render(result, "csv")), parse_dates=["ChargePeriodStart", "ChargePeriodEnd"])
    assert list(df.columns) == list(result.frame.columns)
    a = df[df["x_ExperimentId"] == "exp-a"].iloc[0]
    assert a["x_ComputeCost"] == pytest.approx(10.0)
    assert a["x_SpotSavings"] == pytest.approx(17.0)
    assert str(a["ChargePeriodStart"]) == "2026-11-03 00:00:00+00:00"
    assert set(df["BillingCurrency"]) == {"USD"}


def test_parquet_reads_back_with_pyarrow(result, tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "r.parquet"
    write(result, "parquet", out)
    table = pq.read_table(out)
    assert str(table.schema.field("ChargePeriodStart").type) == "timestamp[us, tz=UTC]" or "tz=UTC" in str(
        table.schema.field("ChargePeriodStart").type
    )
    assert table.schema.metadata[b"launcher.report.by"] == b"experiment"
    rows = {r["x_ExperimentId"]: r for r in table.to_pylist()}
    assert rows["exp-b"]["BilledCost"] == pytest.approx(8.0)
    assert rows["exp-a"]["x_Preemptions"] == 1


def test_json_document(result):
    doc = json.loads(render(result, "json"))
    assert doc["by"] == ["experiment"]
    assert doc["currency"] == "USD"
    assert doc["window"]["until"] == "2026-11-03T06:00:00Z"
    rows = {r["x_ExperimentId"]: r for r in doc["rows"]}
    assert rows["exp-c"]["BilledCost"] == pytest.approx(2.0)
    assert rows["exp-a"]["ChargePeriodStart"] == "2026-11-03T00:00:00Z"
    assert doc["totals"]["x_ComputeCost"] == pytest.approx(20.0)


def test_html_is_self_contained(result):
    html = render(result, "html").decode()
    assert html.count("<svg") == 4
    for chart in ("cost-over-time", "cost-per-experiment", "spot-savings", "waste"):
        assert f'data-chart="{chart}"' in html
    # nothing fetched from anywhere: no external URLs in src/href, no CDN
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert "<link" not in html


def _chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
    ]  # fmt: skip
    return subprocess.run([str(CHROMIUM), *flags, *args], capture_output=True, text=True, timeout=90)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed")
def test_html_charts_are_drawn_in_chromium(result, tmp_path):
    page = tmp_path / "report.html"
    write(result, "html", page)
    proc = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import html as htmllib
    import re

    m = re.search(r'data-rendered-bars="([^"]*)"', proc.stdout)
    assert m, "the page's script did not run"
    drawn = json.loads(htmllib.unescape(m.group(1)))
    # bars laid out with a non-zero size by the browser, per chart:
    # cost over time: nlp on Nov 2, nlp + vision on Nov 3; per experiment: 3 compute + 1 storage;
    # savings: vision billed + saved, nlp billed; waste: vision's three kinds
    assert drawn == {"cost-over-time": 3, "cost-per-experiment": 4, "spot-savings": 3, "waste": 3}


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed")
def test_html_screenshot_has_chart_pixels(result, tmp_path):
    """The first chart (cost over time: vision blue, nlp orange) is painted: its bar colours
    cover real areas of the screenshot (a small window keeps the pure-Python PNG decode fast)."""
    page = tmp_path / "report.html"
    write(result, "html", page)
    shot = tmp_path / "shot.png"
    proc = _chromium(["--window-size=800,440", f"--screenshot={shot}", page.as_uri()], tmp_path)
    assert shot.exists(), proc.stderr[-2000:]
    pixels = _png_pixels(shot.read_bytes())
    blue = sum(1 for p in pixels if abs(p[0] - 0x4E) < 6 and abs(p[1] - 0x79) < 6 and abs(p[2] - 0xA7) < 6)
    orange = sum(1 for p in pixels if abs(p[0] - 0xF2) < 6 and abs(p[1] - 0x8E) < 6 and abs(p[2] - 0x2B) < 6)
    assert blue > 1500 and orange > 1500, (blue, orange)


def _png_pixels(data: bytes) -> list[tuple[int, int, int]]:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) with the standard library."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    out = []
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        out.extend(tuple(line[x * bpp : x * bpp + 3]) for x in range(width))
        prev = line
    return out
