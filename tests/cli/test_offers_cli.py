"""`launcher offers` end to end (real subprocess), against the real catalog slices."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, run_cli
from tests.pricing.helpers import fnum, layout_slices, raw_rows

NO_CREDS = {
    "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    "AWS_CONFIG_FILE": "/nonexistent", "GOOGLE_APPLICATION_CREDENTIALS": "", "LAMBDA_API_KEY": "", "RUNPOD_API_KEY": "",
    "AZURE_CLIENT_ID": "",
}  # fmt: skip


@pytest.fixture(scope="module")
def slices(shared_data, tmp_path_factory):
    return layout_slices(shared_data, tmp_path_factory.mktemp("catalog"))


def independent_a100x8_on_demand(catalog_dir):
    """Every on-demand A100:8 offer priced straight from the CSVs (GCP: host + accelerator rows)."""
    offers = {}
    for cloud in ("aws", "lambda", "runpod"):
        for r in raw_rows(catalog_dir / cloud / "vms.csv"):
            if r["AcceleratorName"] == "A100" and fnum(r["AcceleratorCount"]) == 8 and fnum(r["Price"]):
                offers[(cloud, r["Region"], r.get("AvailabilityZone") or None, r["InstanceType"])] = float(r["Price"])
    gcp = raw_rows(catalog_dir / "gcp" / "vms.csv")
    hosts = {
        r["AvailabilityZone"]: float(r["Price"]) for r in gcp if r["InstanceType"] == "a2-highgpu-8g" and r["Price"]
    }
    for r in gcp:
        if not r["InstanceType"] and r["AcceleratorName"] == "A100" and r["AcceleratorCount"] == "8" and r["Price"]:
            if r["AvailabilityZone"] in hosts:
                offers[("gcp", r["Region"], r["AvailabilityZone"], "a2-highgpu-8g")] = hosts[
                    r["AvailabilityZone"]
                ] + float(r["Price"])
    return offers


def test_cheapest_a100x8_on_demand_is_first(slices):
    p = run_cli("--catalog-dir", str(slices), "offers", "--gpus", "A100:8", "--on-demand", "--json", "--limit", "0")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    want = independent_a100x8_on_demand(slices)
    cheapest = min(want.values())
    best = {k for k, v in want.items() if v == pytest.approx(cheapest)}
    first = got[0]
    assert (first["cloud"], first["region"], first["zone"], first["instance_type"]) in best
    assert first["price_usd_per_hour"] == pytest.approx(cheapest)
    assert first["expected_cost_usd"] == pytest.approx(cheapest)  # 1 h, on-demand: no interruptions
    # the whole list is exactly the independent set, best first
    assert {
        (o["cloud"], o["region"], o["zone"], o["instance_type"]): o["price_usd_per_hour"] for o in got
    } == pytest.approx(want)
    costs = [o["expected_cost_usd"] for o in got]
    assert costs == sorted(costs)
    assert {"gcp", "aws", "lambda"} <= {o["cloud"] for o in got}
    for o in got:
        assert o["spot"] is False and o["hazard_per_hour"] == 0 and o["expected_hours"] == pytest.approx(1.0)
        assert o["accelerator"] == "A100" and o["accelerator_count"] == 8
        for field in ("cloud", "region", "zone", "instance_type", "enabled", "rank", "parts"):
            assert field in o


def test_no_heavy_imports_on_offers_path(slices):
    code = (
        "import sys\n"
        "from launcher.cli.main import run\n"
        f"rc = run(['--catalog-dir', {str(slices)!r}, 'offers', '--gpus', 'H100:8', '--json'])\n"
        "heavy = sorted(m for m in ('sky', 'pulumi', 'boto3', 'botocore', 'torch', 'google.cloud') if m in sys.modules)\n"
        "print('HEAVY', heavy, 'RC', rc, file=sys.stderr)\n"
        "sys.exit(1 if heavy or rc else 0)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "HEAVY [] RC 0" in p.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "H1000:8"], "unknown GPU 'H1000'"),
        (["--gpus", "A100:0"], "at least 1"),
        (["--gpus", "A100:-2"], "at least 1"),
        (["--gpus", "A100:eight"], "malformed GPU count"),
        (["--gpus", "A100::8"], "malformed GPU shape"),
        (["--gpus", "A100", "--cloud", "awz"], "unknown cloud 'awz'"),
        (["--gpus", "A100:8", "--region", "us-east-9"], "unknown region 'us-east-9'"),
        (["--gpus", "A100:3"], "no offer matches"),
        (["--gpus", "A100:8", "--spot", "--on-demand"], "at most one of"),
        (["--gpus", "A100:8", "--hours", "0"], "--hours must be positive"),
    ],
)
def test_bad_input_exit_2(slices, args, message, capsys):
    # In process through the same entry point as the console script (fast); one real subprocess below.
    from tests.cli_child import run

    rc = run(["--catalog-dir", str(slices), "offers", *args])
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert out == ""
    assert err.startswith("error: ") and message in err
    assert "Traceback" not in err


def test_did_you_mean_hint_subprocess(slices):
    p = run_cli("--catalog-dir", str(slices), "offers", "--gpus", "H1000:8")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == ["error: unknown GPU 'H1000'", "  did you mean 'H100' or 'H200' or 'B200'?"] or (
        "did you mean 'H100'" in p.stderr and len(p.stderr.splitlines()) == 2
    )


def test_table_and_enabled_mark(slices, tmp_path):
    env = {**NO_CREDS, "HOME": str(tmp_path), "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    p = run_cli("--catalog-dir", str(slices), "offers", "--gpus", "H100:8", "--spot", "--limit", "3", env=env)
    assert p.returncode == 0, p.stderr
    for col in ("cloud", "region", "zone", "instance type", "GPUs", "market", "$/h", "interrupt", "exp. $", "exp. h"):
        assert col in p.stdout
    assert "* aws" in p.stdout and "H100:8" in p.stdout
    j = run_cli("--catalog-dir", str(slices), "offers", "--gpus", "A100:8", "--json", "--limit", "0", env=env)
    enabled = {o["cloud"]: o["enabled"] for o in json.loads(j.stdout)}
    assert enabled["aws"] is True and enabled["lambda"] is False and enabled["gcp"] is False


def test_snapshot_works_offline_without_catalog_dir():
    # no --catalog-dir, empty LAUNCHER_HOME: the built-in snapshot answers
    p = run_cli("offers", "--gpus", "H100:8", "--json", "--limit", "5")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert len(got) == 5 and all(o["accelerator_count"] == 8 for o in got)


def test_global_options_after_the_subcommand(slices, capsys):
    """`--catalog-dir` and `--debug` work after the subcommand too (same answer as before it)."""
    from launcher.cli.main import run

    before = run(["--catalog-dir", str(slices), "offers", "--gpus", "A100:8", "--on-demand", "--json", "--limit", "3"])
    first = json.loads(capsys.readouterr().out)
    after = run(["offers", "--gpus", "A100:8", "--on-demand", "--json", "--limit", "3", "--catalog-dir", str(slices), "--debug"])
    second = json.loads(capsys.readouterr().out)
    assert (before, after) == (0, 0)
    assert second == first and len(first) == 3
    assert run(["offers", "--gpus", "A100:8", "--on-demand", f"--catalog-dir={slices}", "--json", "--limit", "1"]) == 0
    assert json.loads(capsys.readouterr().out) == first[:1]
