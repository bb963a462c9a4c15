"""`launcher offers` without pandas, its messages when nothing can be offered, the age of its
prices, the words for interruption risk, and `launcher --version` (real subprocesses)."""

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from tests.conftest import REPO, run_cli
from tests.pricing.helpers import AWS_V7_HEADER, layout_slices, write_csv


@pytest.fixture(scope="module")
def slices(shared_data, tmp_path_factory):
    return layout_slices(shared_data, tmp_path_factory.mktemp("catalog"))


IMPORTS = (
    "import sys\n"
    "from launcher.cli.main import run\n"
    "rc = run(sys.argv[1:])\n"
    "mods = sorted(m for m in ('pandas', 'pyarrow', 'sky', 'pulumi', 'boto3', 'torch') if m in sys.modules)\n"
    "print('IMPORTED', mods, 'RC', rc, file=sys.stderr)\n"
)


@pytest.mark.parametrize("catalog", ["snapshot", "catalog-dir"])
@pytest.mark.parametrize("output", [["--json"], []], ids=["json", "table"])
def test_offers_process_imports_neither_pandas_nor_pyarrow(slices, tmp_path, catalog, output):
    env = {**os.environ, "LAUNCHER_HOME": str(tmp_path / "home")}
    where = [] if catalog == "snapshot" else ["--catalog-dir", str(slices)]
    args = [*where, "offers", "--gpus", "H100:8", *output]
    # the first call after a change of the sources compiles the table (with pandas), once
    first = run_cli(*args, env=env)
    assert first.returncode == 0, first.stderr
    assert list((tmp_path / "home").rglob(".compiled/*.offers"))
    p = subprocess.run([sys.executable, "-c", IMPORTS, *args], capture_output=True, text=True, env=env, cwd=REPO,
                       timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert "IMPORTED [] RC 0" in p.stderr
    assert p.stdout == first.stdout  # the compiled table gives the same answer as the first parse


def test_gpu_listed_but_no_host_row_says_so(shared_data, tmp_path):
    # GCP's slice alone has T4 accelerator rows but no N1 host rows to attach them to
    d = tmp_path / "cat" / "gcp"
    d.mkdir(parents=True)
    shutil.copyfile(shared_data / "catalog" / "gcp_vms_slice.csv", d / "vms.csv")
    p = run_cli("--catalog-dir", str(d.parent), "offers", "--gpus", "T4:1")
    assert p.returncode == 2 and p.stdout == ""
    err = p.stderr.splitlines()
    assert err[0] == (
        "error: no offer matches (T4:1): the gcp catalog lists T4:1 in 49 zones but cannot price a machine for "
        "them: no N1 host VM row (n1-standard/highmem/highcpu) that can carry them in the same zone"
    )
    assert "launcher catalog refresh --clouds gcp" in err[1]
    assert "relax a filter" not in p.stderr


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        # A100:8 is sold on aws, gcp and lambda in the slices; none on runpod
        (["--gpus", "A100:8", "--cloud", "runpod"], "none with --cloud runpod", "--cloud with offers of that shape: aws, gcp, lambda"),
        (["--gpus", "A100:8", "--cloud", "lambda", "--spot"], "none with spot", "every such offer is on-demand: try --any"),
        (["--gpus", "H100:3"], "no offer of that shape in the catalog", "H100 comes in counts 1, 2, 4, 8"),
        (["--gpus", "A100:8", "--min-vcpus", "500"], "none with vCPUs >= 500", "the most vCPUs among them is 124"),
    ],
)
def test_no_offer_says_which_filter(slices, args, message, hint):
    p = run_cli("--catalog-dir", str(slices), "offers", *args)
    assert p.returncode == 2 and p.stdout == ""
    first, second = p.stderr.splitlines()
    assert first.startswith("error: no offer matches (") and message in first
    assert second.strip() == hint


def test_price_as_of_and_stale_footer(tmp_path):
    d = tmp_path / "cat"
    row = ["p5.48xlarge", "H100", "8", "192", "2048", "", "98.32", "30.1", "us-east-1", "use1-az1"]
    f = write_csv(d / "aws" / "vms.csv", list(AWS_V7_HEADER), [row])
    ten_days_ago = time.time() - 10 * 86400
    os.utime(f, (ten_days_ago, ten_days_ago))
    as_of = datetime.fromtimestamp(int(ten_days_ago), UTC).isoformat(timespec="seconds")
    j = run_cli("--catalog-dir", str(d), "offers", "--json")
    assert j.returncode == 0, j.stderr
    assert [o["price_as_of"] for o in json.loads(j.stdout)] == [as_of, as_of]
    t = run_cli("--catalog-dir", str(d), "offers")
    assert f"prices older than a week: aws ({as_of[:10]}, 10 days)" in t.stderr
    os.utime(f, None)  # fresh prices: no footer
    fresh = run_cli("--catalog-dir", str(d), "offers")
    assert fresh.returncode == 0 and "older than a week" not in fresh.stderr


def test_interruption_risk_says_where_it_comes_from(slices):
    p = run_cli("--catalog-dir", str(slices), "offers", "--gpus", "A100:8", "--limit", "0", "--json")
    got = json.loads(p.stdout)
    by_source = {(o["cloud"], o["spot"], o["interruption_band"], o["interruption_source"]) for o in got}
    assert ("gcp", True, "default", "estimate") in by_source
    assert ("lambda", False, "on-demand", "none") in by_source
    assert any(c == "aws" and s and src == "aws-spot-advisor" for c, s, _, src in by_source)
    t = run_cli("--catalog-dir", str(slices), "offers", "--gpus", "A100:8", "--limit", "0")
    lines = t.stdout.splitlines()
    assert "interruption risk (source)" in lines[0]
    aws_spot = [ln for ln in lines if " aws " in ln and " spot " in ln]
    gcp_spot = [ln for ln in lines if " gcp " in ln and " spot " in ln]
    on_demand = [ln for ln in lines if " on-demand " in ln]
    assert aws_spot and all("/month, AWS Spot Advisor" in ln for ln in aws_spot)
    # GCP's default: 10% of spot VMs preempted per day (pricing.risk), named as our estimate
    assert gcp_spot and all("~10%/day, estimate (gcp publishes no rate)" in ln for ln in gcp_spot)
    assert on_demand and all("none (on-demand)" in ln for ln in on_demand)


def test_version():
    from importlib.metadata import version

    p = run_cli("--version")
    assert p.returncode == 0 and p.stdout == f"launcher {version('gpu-launcher')}\n"


def test_offers_process_skips_the_provider_interface(tmp_path):
    """Credential detection is all `offers` needs from the providers: not their interface."""
    env = {**os.environ, "LAUNCHER_HOME": str(tmp_path / "home")}
    probe = IMPORTS.replace("('pandas', 'pyarrow', 'sky', 'pulumi', 'boto3', 'torch')", "('launcher.providers.base', 'infra.tags')")
    assert probe != IMPORTS
    first = run_cli("offers", "--gpus", "H100:8", env=env)
    assert first.returncode == 0, first.stderr
    p = subprocess.run([sys.executable, "-c", probe, "offers", "--gpus", "H100:8"], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert "IMPORTED [] RC 0" in p.stderr
    assert p.stdout == first.stdout and "H100:8" in p.stdout
