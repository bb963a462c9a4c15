"""A job's environment comes from an allow-list (launcher.executors.job_env): the launcher's own
settings, server tokens and cloud credentials never reach it; the spec's envs and secrets and the
documented job variables do. Checked on the function, on every executor's job env, and through
the real `launch` CLI on the local backend."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from launcher.executors import ExecRequest, Outcome
from launcher.executors.job_env import job_environment
from launcher.executors.local import LocalExecutor, log_path, rank_env
from launcher.providers.base import ClusterHandle, ClusterRequest
from launcher.providers.local import LocalProvider
from tests.conftest import run_cli

# What a launcher or a server has in its environment and a job must never see.
SERVER_ENV = {
    "LAUNCHER_DB_URL": "postgresql+psycopg://launcher:pw-db-9c1d@db/launcher",
    "LAUNCHER_HOME": "/srv/launcher",
    "LAUNCHER_TOKEN": "lsk_0123456789ab_" + "s" * 43,
    "LAUNCHER_SERVER": "http://replica-1:8470",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY123456",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-8f7e6d5c",
    "AWS_SESSION_TOKEN": "aws-session-tok-1234",
    "GOOGLE_APPLICATION_CREDENTIALS": "/srv/gcp-key.json",
    "MLFLOW_TRACKING_TOKEN": "mlflow-tok-5678",
    "PGPASSWORD": "pg-pass-4321",
    "SOME_OTHER_SETTING": "x",
}
SECRET_VALUES = [v for k, v in SERVER_ENV.items() if k != "SOME_OTHER_SETTING"]


def test_allow_list_order_and_refusals() -> None:
    host = {**SERVER_ENV, "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC"}
    env = job_environment({"MY": "1", "LAUNCHER_RUN_ID": "spec-fake"}, {"LAUNCHER_RUN_ID": "r-1", "SKYPILOT_NODE_RANK": "0"},
                          host_env=host, path_first=["/venv/bin"])  # fmt: skip
    assert env == {
        "PATH": "/venv/bin" + os.pathsep + "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC",
        "MY": "1", "LAUNCHER_RUN_ID": "r-1", "SKYPILOT_NODE_RANK": "0",
    }  # fmt: skip
    # A spec may name a credential under `secrets:`: then (and only then) the job has it.
    assert job_environment({"AWS_ACCESS_KEY_ID": "mine"}, {}, host_env=host)["AWS_ACCESS_KEY_ID"] == "mine"
    for bad in ("LAUNCHER_DB_URL", "LAUNCHER_HOME", "AWS_SECRET_ACCESS_KEY", "LD_PRELOAD"):
        with pytest.raises(ValueError):
            job_environment({}, {bad: "x"}, host_env={})


def _request(tmp_path: Path, run: str, **kw) -> ExecRequest:
    rd = tmp_path / "run"
    rd.mkdir(exist_ok=True)
    return ExecRequest(run_id=f"r-env-{os.getpid()}", attempt=1, run_dir=rd, workdir=None, setup=None, run=run,
                       num_nodes=1, gpus_per_node=0, checkpoint_dir=rd / "checkpoints", **kw)  # fmt: skip


def test_local_job_sees_none_of_the_launchers_environment(tmp_path, monkeypatch) -> None:
    for k, v in SERVER_ENV.items():
        monkeypatch.setenv(k, v)
    req = _request(tmp_path, f'{sys.executable} -c "import json, os; print(json.dumps(dict(os.environ)))"',
                   envs={"PLAIN": "p", "API_TOKEN": "tok-abcdef"}, secrets=("tok-abcdef",))  # fmt: skip
    provider = LocalProvider()
    handle = provider.provision(ClusterRequest(cluster="c1", offer=provider.offer(), num_nodes=1, tags={}))
    result = LocalExecutor(podman=False).start(req, handle).wait(60)
    assert result is not None and result.outcome is Outcome.SUCCEEDED, result
    text = log_path(req.run_dir, 0).read_text()
    seen = json.loads(text.strip().splitlines()[-1].replace("***", "tok-abcdef"))
    assert not set(SERVER_ENV) & set(seen), sorted(set(SERVER_ENV) & set(seen))
    assert not [v for v in SECRET_VALUES if v in text]
    assert seen["PLAIN"] == "p" and seen["API_TOKEN"] == "tok-abcdef" and seen["LAUNCHER_RUN_ID"] == req.run_id
    assert seen["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    # The rank environment the podman path starts from is the same allow-listed one.
    assert not set(SERVER_ENV) & set(rank_env(req, 0, phase="run", master_port=1))


@pytest.mark.parametrize("module", ["sky", "sky_cluster"])
def test_skypilot_task_envs_hold_only_the_spec_and_job_variables(tmp_path, monkeypatch, module) -> None:
    import importlib

    for k, v in SERVER_ENV.items():
        monkeypatch.setenv(k, v)
    mod = importlib.import_module(f"launcher.executors.{module}")
    req = _request(tmp_path, "true", envs={"PLAIN": "p"})
    extra = {"infra": "slurm/local"} if module == "sky_cluster" else {"pool": "p1"}
    handle = ClusterHandle(cluster="c1", provider="aws" if module == "sky" else "slurm", region="r", zone=None, nodes=(), extra=extra)
    cfg = mod.task_config(req, handle)
    assert set(cfg["envs"]) == {"PLAIN", "LAUNCHER_RUN_ID", "LAUNCHER_ATTEMPT", "LAUNCHER_CLOUD"}


@pytest.mark.parametrize("module", ["sky", "sky_cluster"])
def test_skypilot_tasks_carry_the_specs_secrets_as_skypilot_secrets(tmp_path, module) -> None:
    """A name under the spec's `secrets:` goes to the task's `secrets:`, not `envs:`: the real
    SkyPilot Task then holds it as a secret (the job still gets it) and redacts it in the YAML it
    stores and shows."""
    import importlib

    sky = pytest.importorskip("sky")
    mod = importlib.import_module(f"launcher.executors.{module}")
    token = "tok-abcdef-0123"
    req = _request(tmp_path, "true", envs={"PLAIN": "p", "API_TOKEN": token}, secrets=(token,))
    extra = {"infra": "slurm/local"} if module == "sky_cluster" else {"pool": "p1"}
    handle = ClusterHandle(cluster="c1", provider="aws" if module == "sky" else "slurm", region="r", zone=None, nodes=(), extra=extra)
    cfg = mod.task_config(req, handle)
    assert "API_TOKEN" not in cfg["envs"] and cfg["envs"]["PLAIN"] == "p"
    assert cfg["secrets"] == {"API_TOKEN": token}
    task = sky.Task.from_yaml_config(cfg)
    assert task.secrets["API_TOKEN"].get_secret_value() == token and "API_TOKEN" not in task.envs
    assert task.envs_and_secrets["API_TOKEN"].get_secret_value() == token  # the job's environment has it
    shown = str(task.to_yaml_config(use_user_specified_yaml=True))
    assert token not in shown and "API_TOKEN" in shown
    # No secrets: no `secrets:` key (older task YAMLs stay as they were).
    assert "secrets" not in mod.task_config(_request(tmp_path, "true", envs={"PLAIN": "p"}), handle)


def test_launch_cli_job_gets_no_ledger_url_token_or_cloud_credentials(tmp_path, launcher_home) -> None:
    """The real `launch` with a ledger URL, a server token and cloud credentials in its own
    environment: the job's whole environment (printed to its log) holds none of them."""
    spec = tmp_path / "envdump.yaml"
    spec.write_text(
        "name: envdump\nresources: {infra: local}\nenvs: {PLAIN: visible}\n"
        f"run: {sys.executable} -c 'import json, os; print(json.dumps(dict(os.environ)))'\n"
        "launcher: {project: p, owner: ana, expected_hours: 0.01, max_restarts: 0}\n"
    )
    db = tmp_path / "ledger-elsewhere.db"
    # (no LAUNCHER_SERVER: with one set, `launch` would submit to it)
    env = {**SERVER_ENV, "LAUNCHER_DB_URL": f"sqlite:///{db}", "LAUNCHER_HOME": str(launcher_home), "LAUNCHER_SERVER": ""}
    res = run_cli("launch", str(spec), "--yes", "--cheapest", "--cloud", "local", env=env, timeout=180)
    assert res.returncode == 0, res.stderr
    logs = list((launcher_home / "runs").glob("*/logs/rank-0.log"))
    assert len(logs) == 1 and db.exists()  # the launcher itself did use LAUNCHER_DB_URL
    seen = json.loads(logs[0].read_text().strip().splitlines()[-1])
    assert seen["PLAIN"] == "visible" and seen["LAUNCHER_CLOUD"] == "local"
    assert not set(SERVER_ENV) & set(seen), sorted(set(SERVER_ENV) & set(seen))
    assert not [v for v in [*SECRET_VALUES, str(db)] if v in logs[0].read_text()]
