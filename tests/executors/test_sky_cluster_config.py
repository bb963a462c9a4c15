"""The SkyPilot task we hand over for a declared cluster, and the run wrapper that reports the
job's exit code (SkyPilot reports only a status). The wrapper is run for real with bash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from launcher.executors.base import ExecRequest
from launcher.executors.sky_cluster import EXIT_MARKER, sky_cluster_name, task_config, wrap_run
from launcher.providers.base import ClusterHandle, Node


def _handle(**extra: str) -> ClusterHandle:
    return ClusterHandle(
        cluster="r-20261201-120000-abcdef-c2", provider="slurm", region="team", zone=None,
        nodes=(Node("team/x/0", None, 0),), extra={"infra": "slurm/team", **extra},
    )  # fmt: skip


def _request(tmp_path: Path, **kw) -> ExecRequest:
    base = dict(run_id="r-1", attempt=2, run_dir=tmp_path, workdir=tmp_path / "wd", setup="pip list", run="python train.py",
                num_nodes=2, gpus_per_node=4, envs={"EPOCHS": "3"}, file_mounts={"/data": "s3://b/data"})  # fmt: skip
    base.update(kw)
    return ExecRequest(**base)


def test_task_config_carries_infra_spec_fields_and_checkpoint_dir(tmp_path: Path) -> None:
    cfg = task_config(_request(tmp_path), _handle(accelerator="A100-80GB", checkpoint_dir="/shared/ckpt", job_prefix="module load cuda"))
    assert cfg["resources"] == {"infra": "slurm/team", "accelerators": {"A100-80GB": 4}}
    assert cfg["num_nodes"] == 2
    assert cfg["workdir"] == str(tmp_path / "wd")
    assert cfg["file_mounts"] == {"/data": "s3://b/data"}
    assert cfg["envs"] == {"EPOCHS": "3", "LAUNCHER_RUN_ID": "r-1", "LAUNCHER_ATTEMPT": "2", "LAUNCHER_CLOUD": "slurm"}
    assert cfg["setup"] == "module load cuda\nexport LAUNCHER_CHECKPOINT_DIR=/shared/ckpt/r-1\nmkdir -p \"$LAUNCHER_CHECKPOINT_DIR\"\npip list"
    assert cfg["run"].startswith("module load cuda\nexport LAUNCHER_CHECKPOINT_DIR=/shared/ckpt/r-1\n")
    assert "bash -c 'python train.py'" in cfg["run"]
    assert sky_cluster_name(_handle()) == "gl-r-20261201-120000-abcdef-c2"


def test_sky_accepts_the_task(tmp_path: Path) -> None:
    """SkyPilot's own Task parser (offline) accepts what we build."""
    import sky

    (tmp_path / "wd").mkdir()
    task = sky.Task.from_yaml_config(task_config(_request(tmp_path, file_mounts={}), _handle()))
    assert task.num_nodes == 2
    assert task.envs["LAUNCHER_RUN_ID"] == "r-1"


def _run_wrapped(script: str, tmp_path: Path, **popen) -> subprocess.Popen:
    body = wrap_run(script, 'export LAUNCHER_CHECKPOINT_DIR="$(getent passwd "$(id -un)" | cut -d: -f6)"/ck\n')
    return subprocess.Popen(["bash", "-c", body], stdout=subprocess.PIPE, text=True, cwd=tmp_path, **popen)


def test_wrapper_reports_the_exit_code(tmp_path: Path) -> None:
    p = _run_wrapped('echo "ck=$LAUNCHER_CHECKPOINT_DIR"; exit 3', tmp_path)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 3
    assert f"ck={Path(os.path.expanduser('~'))}/ck" in out  # ~ = the passwd home, whatever $HOME says
    assert EXIT_MARKER.findall(out) == [("0", "3")]


def test_wrapper_survives_sigterm_and_reports_the_jobs_own_code(tmp_path: Path) -> None:
    """Slurm signals every process of the step; the wrapper must outlive the job to report 75."""
    job = (
        f"{sys.executable} -c \"import signal, sys, time; "
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(75)); print('ready', flush=True); time.sleep(60)\""
    )
    p = _run_wrapped(job, tmp_path, start_new_session=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    os.killpg(p.pid, signal.SIGTERM)  # the whole group, as scancel --signal=TERM does
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 75
    assert EXIT_MARKER.findall(out) == [("0", "75")]


def test_the_controller_gets_the_cluster_executor_for_declared_clusters():
    # The controller hands every executor_for call its provider lookup; only SkyPilot on our own
    # (cloud) clusters takes it, so declared clusters must still get their executor.
    from launcher.executors import executor_for
    from launcher.executors.local import LocalExecutor
    from launcher.executors.sky_cluster import SkyClusterExecutor

    def lookup(cloud):
        raise AssertionError("not asked at construction")

    for kind in ("slurm", "kubernetes", "ssh"):
        assert isinstance(executor_for(kind, provider_for=lookup), SkyClusterExecutor)
    assert isinstance(executor_for("local", provider_for=lookup), LocalExecutor)
