"""`launcher clusters add|list|remove` through the real entry point; declared clusters in
`launcher offers` and in the plan, ranked by expected cost to finish with the catalog's offers."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.fixture
def cluster_home(tmp_path) -> dict:
    """A HOME whose ~/.slurm/config names cluster `gpu-a` (SkyPilot's Slurm config), and
    nothing for `gpu-b`; no cloud credentials."""
    home = tmp_path / "home"
    (home / ".slurm").mkdir(parents=True)
    (home / ".slurm" / "config").write_text("Host gpu-a\n  HostName 10.0.0.1\n  User me\n")
    return {"HOME": str(home), "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "GOOGLE_APPLICATION_CREDENTIALS": ""}


def test_add_list_remove_round_trip(launcher_home: Path, cluster_home: dict) -> None:
    r = run_cli("clusters", "add", "gpu-a", "--infra", "slurm/gpu-a", "--gpu", "a100-80gb", "--gpus-per-node", "8",
                "--nodes", "4", "--price-usd-per-gpu-hour", "0.5", "--preemptible", env=cluster_home)  # fmt: skip
    assert r.returncode == 0, r.stderr
    path = launcher_home / "clusters.yaml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    r = run_cli("clusters", "list", "--json", env=cluster_home)
    assert r.returncode == 0, r.stderr
    [row] = json.loads(r.stdout)
    assert (row["name"], row["infra"], row["gpu"], row["gpus_per_node"], row["nodes"]) == ("gpu-a", "slurm/gpu-a", "A100-80GB", 8, 4)
    assert (row["price_usd_per_gpu_hour"], row["preemptible"], row["enabled"]) == (0.5, True, True)
    # the same name again is a conflict unless --replace
    r = run_cli("clusters", "add", "gpu-a", "--infra", "slurm/gpu-a", env=cluster_home)
    assert r.returncode == 6 and "already declared" in r.stderr
    r = run_cli("clusters", "remove", "gpu-a", env=cluster_home)
    assert r.returncode == 0, r.stderr
    assert json.loads(run_cli("clusters", "list", "--json", env=cluster_home).stdout) == []
    r = run_cli("clusters", "remove", "gpu-a", env=cluster_home)
    assert r.returncode == 7


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--infra", "slurm"], "infra is slurm/<cluster>"),
        (["--infra", "aws/us-east-1"], "infra is slurm/<cluster>"),
        (["--infra", "slurm/x", "--gpus-per-node", "2"], "gpu"),
        (["--infra", "slurm/x", "--gpu", "A100"], "gpus_per_node"),
        (["--infra", "slurm/x", "--gpu", "A1000", "--gpus-per-node", "1"], "unknown GPU 'A1000'"),
        (["--infra", "slurm/x", "--price-usd-per-gpu-hour", "-1"], "--price-usd-per-gpu-hour -1.0: must be 0"),
        (["--infra", "slurm/x", "--nodes", "0"], "--nodes 0: must be 1 or more"),
        (["--infra", "slurm/x", "--gpus-per-node", "-1"], "--gpus-per-node -1: must be 0 or more"),
    ],
)
def test_bad_entries_exit_2_naming_the_field(args: list[str], needle: str, launcher_home: Path) -> None:
    r = run_cli("clusters", "add", "c1", *args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    # one readable line: no pydantic wording, no link to its docs
    assert len(r.stderr.strip().splitlines()) <= 2 and "Input should be" not in r.stderr and "pydantic" not in r.stderr
    assert not (launcher_home / "clusters.yaml").exists()


def test_hand_edited_file_with_unknown_field_exits_2_with_suggestion(launcher_home: Path) -> None:
    (launcher_home / "clusters.yaml").write_text("clusters:\n- name: c1\n  infra: slurm/c1\n  gpus_per_nod: 2\n")
    r = run_cli("clusters", "list")
    assert r.returncode == 2
    assert "clusters.0.gpus_per_nod" in r.stderr and "gpus_per_node" in r.stderr


def test_offers_rank_clusters_with_the_catalog_and_say_why_one_is_not_enabled(cluster_home: dict) -> None:
    # gpu-a: reachable, A100-80GB:8 at $0.50 per GPU-hour = $4.00 per node-hour, never preempted.
    # gpu-b: same shape, not in ~/.slurm/config.
    for name in ("gpu-a", "gpu-b"):
        r = run_cli("clusters", "add", name, "--infra", f"slurm/{name}", "--gpu", "A100-80GB", "--gpus-per-node", "8",
                    "--price-usd-per-gpu-hour", "0.5", env=cluster_home)  # fmt: skip
        assert r.returncode == 0, r.stderr
    r = run_cli("offers", "--gpus", "A100-80GB:8", "--hours", "10", "--limit", "0", "--json", env=cluster_home)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    mine = {row["region"]: row for row in rows if row["cloud"] == "slurm"}
    assert set(mine) == {"gpu-a", "gpu-b"}
    # Hand-computed: 8 GPUs x $0.50 x 10 h, no interruptions.
    assert mine["gpu-a"]["expected_cost_usd"] == pytest.approx(40.0)
    assert mine["gpu-a"]["expected_hours"] == pytest.approx(10.0)
    assert mine["gpu-a"]["enabled"] is True
    assert mine["gpu-b"]["enabled"] is False and "no `Host gpu-b`" in mine["gpu-b"]["reason"]
    # Ranked by expected cost among the catalog's offers: everything above is cheaper, below dearer.
    costs = [row["expected_cost_usd"] for row in rows]
    assert costs == sorted(costs)
    assert [row["rank"] for row in rows] == list(range(1, len(rows) + 1))
    assert any(row["cloud"] != "slurm" and row["expected_cost_usd"] > 40.0 for row in rows)
    assert any(row["cloud"] != "slurm" for row in rows)


def _spec(tmp_path: Path, resources: str) -> Path:
    p = tmp_path / "task.yaml"
    p.write_text(
        "name: t\nresources:\n" + resources + "run: echo hi\n"
        "launcher:\n  project: p\n  owner: o\n  cost_center: c\n  expected_hours: 2\n"
    )
    return p


def test_cheapest_picks_the_cluster_over_the_cloud_and_the_cloud_when_the_cluster_lacks_the_gpu(tmp_path: Path, cluster_home: dict) -> None:
    env = {**cluster_home, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}
    r = run_cli("clusters", "add", "gpu-a", "--infra", "slurm/gpu-a", "--gpu", "T4", "--gpus-per-node", "1", env=env)
    assert r.returncode == 0, r.stderr
    spec = _spec(tmp_path, "  accelerators: T4:1\n")
    r = run_cli("launch", str(spec), "--cheapest", "--dry-run", env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert "chosen:   slurm/gpu-a cluster:gpu-a" in out
    # The cluster has no A10G: the cloud wins.
    spec = _spec(tmp_path, "  accelerators: A10G:1\n")
    r = run_cli("launch", str(spec), "--cheapest", "--dry-run", env=env)
    assert r.returncode == 0, r.stderr
    assert "chosen:   aws/" in r.stdout + r.stderr


def test_a_spec_naming_an_unreachable_cluster_says_why(tmp_path: Path, cluster_home: dict) -> None:
    r = run_cli("clusters", "add", "gpu-b", "--infra", "slurm/gpu-b", env=cluster_home)
    assert r.returncode == 0, r.stderr
    spec = _spec(tmp_path, "  infra: slurm/gpu-b\n")
    r = run_cli("launch", str(spec), "--yes", env=cluster_home)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "gpu-b not reachable: no `Host gpu-b`" in r.stderr


def test_a_cpu_job_stays_on_this_machine_over_a_free_declared_cluster(tmp_path: Path, cluster_home: dict) -> None:
    # Both cost $0: this machine needs no queue and no provisioning, so it wins the tie.
    r = run_cli("clusters", "add", "gpu-a", "--infra", "slurm/gpu-a", env=cluster_home)
    assert r.returncode == 0, r.stderr
    spec = tmp_path / "cpu.yaml"
    spec.write_text("name: t\nrun: echo hi\nlauncher:\n  project: p\n  owner: o\n  cost_center: c\n")
    r = run_cli("launch", str(spec), "--cheapest", "--dry-run", "--json", env=cluster_home)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["chosen"]["cloud"] == "local", plan["chosen"]
    clouds = [c["scored"]["offer"]["cloud"] for c in plan["plan"]["candidates"]]
    assert clouds[:2] == ["local", "slurm"], clouds  # the cluster is still in the plan, next in line


def test_a_gpu_spec_on_a_cluster_without_gpus_says_the_cluster_has_no_gpu(tmp_path: Path, cluster_home: dict) -> None:
    r = run_cli("clusters", "add", "gpu-a", "--infra", "slurm/gpu-a", env=cluster_home)
    assert r.returncode == 0, r.stderr
    spec = _spec(tmp_path, "  accelerators: {T4: 1, L4: 1}\n  infra: slurm/gpu-a\n")
    r = run_cli("launch", str(spec), "--dry-run", env=cluster_home)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "slurm/gpu-a: it has no GPU (declared without --gpu) and the task asks for T4:1 or L4:1" in r.stderr


def test_declared_clusters_need_skypilot_and_the_refusal_names_the_extra() -> None:
    from launcher.planning.preflight import cloud_preflight
    from launcher.providers.base import CredentialStatus

    statuses = {"slurm": CredentialStatus("slurm", True, "declared clusters: local"), "local": CredentialStatus("local", True, "")}
    p = cloud_preflight(statuses, ssh_cidr=None, sky_found=False)
    assert not p.statuses["slurm"].enabled and p.statuses["local"].enabled
    err = p.refusal(RuntimeError())
    assert err.exit_code == 5 and "slurm needs SkyPilot (pip install -c requirements.lock -e '.[sky]'" in str(err)
    assert cloud_preflight(statuses, ssh_cidr=None, sky_found=True).statuses["slurm"].enabled
