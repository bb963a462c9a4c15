"""`launcher catalog refresh|status` end to end against a local HTTP server on 127.0.0.1."""

import json

from tests.conftest import run_cli
from tests.pricing.conftest import data_dir  # noqa: F401  (fixture)
from tests.pricing.helpers import SLICE_CLOUDS, StaticServer, serve_layout


def test_refresh_status_and_network_failure(data_dir, tmp_path, launcher_home):  # noqa: F811
    root = serve_layout(data_dir, tmp_path / "www")
    with StaticServer(root) as srv:
        p = run_cli(
            "catalog",
            "refresh",
            "--url",
            srv.url + "/catalogs",
            "--clouds",
            ",".join(SLICE_CLOUDS),
            "--advisor-url",
            srv.url + "/spot-advisor-data.json",
            "--json",
        )
    assert p.returncode == 0, p.stderr
    res = {r["name"]: r for r in json.loads(p.stdout)}
    assert all(res[c]["ok"] for c in (*SLICE_CLOUDS, "aws-spot-advisor"))
    for c in SLICE_CLOUDS:
        assert (launcher_home / "catalogs" / c / "vms.csv").read_bytes() == (
            root / "catalogs" / "v8" / c / "vms.csv"
        ).read_bytes()
    assert list((launcher_home / "catalogs" / ".parsed").glob("*.pkl"))  # pre-parsed for the next `offers`
    st = {s["cloud"]: s for s in json.loads(run_cli("catalog", "status", "--json").stdout)}
    assert {c: st[c]["kind"] for c in SLICE_CLOUDS} == dict.fromkeys(SLICE_CLOUDS, "cache")
    assert all(st[c]["age_hours"] is not None and st[c]["age_hours"] < 1 for c in SLICE_CLOUDS)
    assert st["aws"]["origin"] == f"{srv.url}/catalogs/v8/aws/vms.csv"

    # network down: exit 5, which clouds failed, cache kept
    down = run_cli(
        "catalog", "refresh", "--url", "http://127.0.0.1:9/x", "--clouds", "aws", "--no-advisor", "--timeout", "2"
    )
    assert down.returncode == 5
    assert "refresh failed for aws (cached copy kept)" in down.stderr
    assert (launcher_home / "catalogs" / "aws" / "vms.csv").read_bytes() == (
        root / "catalogs" / "v8" / "aws" / "vms.csv"
    ).read_bytes()


def test_status_with_catalog_dir_and_snapshot(tmp_path):
    st = json.loads(run_cli("catalog", "status", "--json").stdout)
    assert {s["cloud"]: s["kind"] for s in st} == dict.fromkeys(("aws", "gcp", "lambda", "runpod"), "snapshot")
    assert all(s["as_of"] for s in st)
    (tmp_path / "cat" / "aws").mkdir(parents=True)
    (tmp_path / "cat" / "aws" / "vms.csv").write_text("InstanceType,AcceleratorName,AcceleratorCount,Price,Region\n")
    st2 = json.loads(run_cli("--catalog-dir", str(tmp_path / "cat"), "catalog", "status", "--json").stdout)
    assert [(s["cloud"], s["kind"]) for s in st2] == [("aws", "catalog-dir")]


def test_refresh_bad_input(capsys):
    from tests.cli_child import run

    assert run(["catalog", "refresh", "--schema", "v3"]) == 2
    assert "unsupported catalog schema 'v3'" in capsys.readouterr().err
    assert run(["catalog", "refresh", "--clouds", "awz"]) == 2
    assert "did you mean 'aws'" in capsys.readouterr().err
    assert run(["--catalog-dir", "/nonexistent/dir", "catalog", "status"]) == 2
    assert "does not exist" in capsys.readouterr().err
