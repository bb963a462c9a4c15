"""A real SkyPilot (its own API server) runs our jobs on a real one-node Slurm cluster, end to
end through the `launch` CLI. Needs `bash scripts/local-slurm.sh up` (as root; `.ci/run` does
it); skipped with that reason otherwise.

These prove, against the real SkyPilot, the outcome mapping the stand-in SDK tests
(tests/executors/test_sky_sdk.py) can only script: succeeded, setup failed, cancelled
(`launcher down`), preempted (a SIGTERM from Slurm; the job checkpoints, the controller
recovers, the weights are bit-identical). Also: the shipped `task_specs/train-slurm.yaml`
launched exactly as the docs write it (after `up` with a relative LAUNCHER_PYTHON); a `kill -9`
of the launcher mid-job and `launch --resume` (a job that finished meanwhile is adopted, one still
running is torn down and resumed from its checkpoint), leaving no Slurm job and no SkyPilot
cluster; a job queued behind another Slurm job is reported and gives up at `max_wait`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "local-slurm.sh"
TRAIN = REPO / "task_specs" / "train.yaml"
SHIPPED = "task_specs/train-slurm.yaml"  # as the docs write it, from the repository root
SLURM_USER = os.environ.get("LOCAL_SLURM_USER", "skyslurm")
SHA = re.compile(r"final_weights_sha256=([0-9a-f]{64})")

# One Slurm node: these tests share it one at a time (one xdist worker; scripts/test.sh uses
# --dist loadgroup), or a test would see another's Slurm job.
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.xdist_group("local-slurm")]


def _cluster_up() -> str | None:
    if os.geteuid() != 0 or shutil.which("squeue") is None:
        return "no local Slurm cluster (run `bash scripts/local-slurm.sh up` as root; .ci/run does)"
    r = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return "the local Slurm cluster is not up (run `bash scripts/local-slurm.sh up` as root; .ci/run does)"
    return None


@contextlib.contextmanager
def _one_at_a_time(timeout_s: float = 3600.0):
    """An exclusive lock on the one Slurm node for this module's fixture and tests. xdist may
    still hand this module's tests to two workers; the second waits here (bounded) instead of
    sharing the node and the SkyPilot API server the first one stops at its end."""
    with open("/tmp/gpu-launcher-local-slurm-tests.lock", "w") as f:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"waited {timeout_s:.0f}s for the local Slurm cluster held by another test worker")
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory) -> Iterator[dict]:
    why = _cluster_up()
    if why:
        pytest.skip(why)
    with _one_at_a_time():
        yield from _slurm_env(tmp_path_factory)


def _slurm_env(tmp_path_factory) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("slurm-launcher-home")
    env = {
        **os.environ,
        "LAUNCHER_HOME": str(home),
        "LAUNCHER_SKY_HOME": str(home / "sky"),
        "LAUNCHER_PYTHON": sys.executable,
        "SKYPILOT_DISABLE_USAGE_COLLECTION": "1",
    }
    env.pop("LAUNCHER_DB_URL", None)
    # `up` again: idempotent; declares the cluster for this LAUNCHER_HOME and points the job
    # user's `python` at this interpreter, given relative to the repository as the docs write
    # it (`LAUNCHER_PYTHON=.venv/bin/python`). Its last line is the infra string.
    relative = os.path.relpath(sys.executable, REPO)
    r = subprocess.run(["bash", str(SCRIPT), "up"], env={**env, "LAUNCHER_PYTHON": relative}, capture_output=True, text=True,
                       timeout=600, cwd=str(REPO))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "slurm/local"
    shim = (Path(os.path.expanduser(f"~{SLURM_USER}")) / "bin" / "python").read_text()
    assert shim.splitlines()[-1].startswith("exec /"), shim  # the absolute path, runnable from any directory
    yield env
    subprocess.run([sys.executable, "-m", "launcher.executors.sky_server", "stop"], env=env, timeout=120)


def cli(env: dict, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launcher.cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=str(REPO))  # fmt: skip


def spec_variant(tmp: Path, name: str, infra: str, *, step_time_s: float | None = None, spec_name: str | None = None, **changes) -> Path:
    """task_specs/train.yaml with its resources replaced by `infra` (same workdir, setup, run).
    `step_time_s` slows each step (the weights do not depend on it) so a signal lands mid-training
    even though the log reaches us seconds late."""
    d = yaml.safe_load(TRAIN.read_text())
    d["resources"] = {"infra": infra}
    if step_time_s is not None:
        d["envs"] = {**d["envs"], "STEP_TIME_S": step_time_s}
    d["workdir"] = str(TRAIN.parent)
    if spec_name:
        d["name"] = spec_name
    d.update(changes)
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(d, sort_keys=False))
    return p


def show(env: dict, run_id: str) -> dict:
    r = cli(env, "runs", "show", run_id, "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def logs(env: dict, run_id: str) -> str:
    return cli(env, "logs", run_id, timeout=120).stdout


def wait_until(what: str, check, timeout_s: float, every_s: float = 3.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every_s)
    raise AssertionError(f"gave up after {timeout_s:.0f}s waiting for {what}")


def squeue_jobs() -> list[str]:
    r = subprocess.run(["squeue", "-h", "-u", SLURM_USER, "-o", "%i"], capture_output=True, text=True, timeout=30)
    return r.stdout.split()


def sky_clusters(env: dict) -> list[str]:
    """SkyPilot's own view (its API server for this LAUNCHER_HOME)."""
    code = (
        "from launcher.executors.sky_server import ensure_server; ensure_server(); "
        "from sky.client import sdk; print('\\n'.join(r['name'] for r in sdk.get(sdk.status())))"
    )
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def launch_detached(env: dict, spec: Path) -> str:
    r = cli(env, "launch", str(spec), "--yes", "--detach", timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def wait_ended(env: dict, run_id: str, timeout_s: float = 1500) -> dict:
    terminal = {"succeeded", "failed", "cancelled", "budget_stopped"}
    return wait_until(f"run {run_id} to end", lambda: (d := show(env, run_id)) and d["state"] in terminal and d, timeout_s, 10)


@pytest.fixture(scope="module")
def local_sha(slurm_env, tmp_path_factory) -> str:
    spec = spec_variant(tmp_path_factory.mktemp("spec"), "train-local", "local")
    r = cli(slurm_env, "launch", str(spec), "--yes", timeout=900)
    assert r.returncode == 0, r.stderr
    run_id = re.search(r"run (r-\S+)", r.stdout + r.stderr).group(1)
    return SHA.findall(logs(slurm_env, run_id))[-1]


def test_shipped_slurm_spec_as_documented_matches_local_and_is_recorded(slurm_env, local_sha) -> None:
    started = time.monotonic()
    r = cli(slurm_env, "launch", SHIPPED, "--yes", timeout=1500)
    print(f"launch {SHIPPED}: {time.monotonic() - started:.0f}s")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = re.search(r"run (r-\S+)", r.stdout + r.stderr).group(1)
    d = show(slurm_env, run_id)
    assert (d["state"], d["end_reason"]) == ("succeeded", "completed")
    [a] = d["attempt_rows"]
    assert (a["cloud"], a["region"], a["end_reason"], a["exit_code"]) == ("slurm", "local", "completed", 0)
    out = logs(slurm_env, run_id)
    assert '"event": "done"' in out
    assert SHA.findall(out)[-1] == local_sha
    stored = (Path(slurm_env["LAUNCHER_HOME"]) / "runs" / run_id / "logs" / "rank-0.log").read_text()
    assert "\x1b" not in stored and "\x1b" not in out, "SkyPilot's terminal colours are stripped"
    assert squeue_jobs() == []
    assert sky_clusters(slurm_env) == []


def _launch_then_kill_9(env: dict, spec: Path, tmp: Path) -> str:
    """A foreground `launch` killed with SIGKILL once the job trains; returns the run id."""
    out = open(tmp / "launch.out", "w")
    proc = subprocess.Popen([sys.executable, "-m", "launcher.cli.main", "launch", str(spec), "--yes"], env=env, cwd=str(REPO),
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        def newest_run():
            runs = json.loads(cli(env, "runs", "list", "--json", timeout=120).stdout)["runs"]
            return next((x["run_id"] for x in runs if x["name"] == yaml.safe_load(spec.read_text())["name"] and x["state"] != "succeeded"), None)

        run_id = wait_until("the run in the ledger", newest_run, 300, 3)
        wait_until("training steps in the log", lambda: '"event": "step"' in logs(env, run_id), 1200, 3)
    finally:
        proc.send_signal(signal.SIGKILL)  # kill -9: no cleanup of any kind
        proc.wait(timeout=60)
    assert squeue_jobs(), "the killed launcher's SkyPilot cluster still holds its Slurm job"
    return run_id


def sky_job_status(env: dict, name: str) -> str | None:
    code = (
        "import sys; from launcher.executors.sky_server import ensure_server; ensure_server(); "
        "from sky.client import sdk; s = sdk.get(sdk.job_status(sys.argv[1], job_ids=None)); "
        "print(next((getattr(v, 'value', v) for v in s.values() if v is not None), None))"
    )
    r = subprocess.run([sys.executable, "-c", code, name], env=env, capture_output=True, text=True, timeout=300)
    return r.stdout.strip() if r.returncode == 0 else None


def test_kill_9_after_the_job_finished_resume_adopts_it(slurm_env, local_sha, tmp_path) -> None:
    """The controller dies mid-job; the job finishes with nobody watching; `launch --resume`
    asks SkyPilot, adopts the finished job (no second launch), fetches its whole log, tears the
    SkyPilot cluster down."""
    spec = spec_variant(tmp_path, "train-adopt", "slurm/local", step_time_s=0.3, spec_name="train-adopt")
    started = time.monotonic()
    run_id = _launch_then_kill_9(slurm_env, spec, tmp_path)
    cluster = f"gl-{run_id}-c1"
    wait_until("the orphaned SkyPilot job to finish", lambda: sky_job_status(slurm_env, cluster) == "SUCCEEDED", 900, 10)
    r = cli(slurm_env, "launch", "--resume", run_id, "--yes", timeout=900)
    print(f"kill -9, job finished, resume: {time.monotonic() - started:.0f}s")
    assert r.returncode == 0, r.stdout + r.stderr
    d = show(slurm_env, run_id)
    assert (d["state"], d["end_reason"]) == ("succeeded", "completed"), d
    [a] = d["attempt_rows"]  # adopted: not started over
    assert a["end_reason"] == "completed"
    out = logs(slurm_env, run_id)
    assert SHA.findall(out)[-1] == local_sha, "the whole log, fetched from SkyPilot, has the job's last line"
    assert squeue_jobs() == []
    assert sky_clusters(slurm_env) == []


def test_kill_9_mid_job_then_resume_tears_down_and_completes(slurm_env, local_sha, tmp_path) -> None:
    """The issue's case: before, the dead attempt's SkyPilot cluster stayed UP holding the node
    and the resumed attempt queued behind it forever. Now cleanup `sky down`s it (verified) and
    the next attempt resumes from the checkpoint."""
    spec = spec_variant(tmp_path, "train-kill", "slurm/local", step_time_s=1.0, spec_name="train-kill")
    started = time.monotonic()
    run_id = _launch_then_kill_9(slurm_env, spec, tmp_path)
    r = cli(slurm_env, "launch", "--resume", run_id, "--yes", timeout=1500)
    print(f"kill -9 mid-job, resume to the end: {time.monotonic() - started:.0f}s")
    assert r.returncode == 0, r.stdout + r.stderr
    d = show(slurm_env, run_id)
    assert (d["state"], d["end_reason"]) == ("succeeded", "completed"), d
    assert [a["end_reason"] for a in d["attempt_rows"]] == ["abandoned", "completed"]
    out = logs(slurm_env, run_id)
    assert SHA.findall(out)[-1] == local_sha
    assert squeue_jobs() == []
    assert sky_clusters(slurm_env) == []
    # The ledger and SkyPilot agree: nothing for `down` or `doctor` to find.
    r = cli(slurm_env, "down", f"gl-{run_id}-c1", timeout=600)
    assert r.returncode == 0 and "already terminated" in r.stderr, r.stderr
    r = cli(slurm_env, "doctor", "--json", timeout=600)
    sky = [f for f in json.loads(r.stdout) if f["check"] == "sky-clusters"]
    assert [f["status"] for f in sky] == ["ok"], sky


def test_a_job_queued_behind_another_says_so_and_gives_up_at_max_wait(slurm_env, tmp_path) -> None:
    """Another Slurm job holds every CPU: the launch says what it waits for and fails after the
    spec's max_wait (1 min), leaving no job of ours queued and no SkyPilot cluster."""
    blocker = subprocess.run(["sbatch", "--parsable", "-p", "debug", "-N1", "-n1", f"-c{os.cpu_count()}", "-o", "/dev/null",
                              "--wrap", "sleep 900"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert blocker.returncode == 0, blocker.stderr
    job = blocker.stdout.strip().split(";")[0]
    try:
        wait_until("the blocking job to run", lambda: subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                                                                      text=True).stdout.strip() == "RUNNING", 120, 2)  # fmt: skip
        spec = spec_variant(tmp_path, "train-queued", "slurm/local", launcher={**yaml.safe_load(TRAIN.read_text())["launcher"], "max_wait": "1m"})
        started = time.monotonic()
        r = cli(slurm_env, "launch", str(spec), "--yes", timeout=900)
        took = time.monotonic() - started
        print(f"queued launch gave up after {took:.0f}s")
        text = r.stdout + r.stderr
        assert r.returncode != 0, text
        assert "waiting: the Slurm job of SkyPilot cluster gl-" in text and "queued behind other jobs" in text, text
        run_id = re.search(r"run (r-\S+)", text).group(1)
        d = show(slurm_env, run_id)
        assert (d["state"], d["end_reason"]) == ("failed", "provision_failed"), d
        assert "max_wait" in json.dumps(d), d
        assert took < 600, "bounded by max_wait, not by SkyPilot's own timeouts"
        assert squeue_jobs() == [], "our queued job is gone with its SkyPilot cluster"
        assert sky_clusters(slurm_env) == []
    finally:
        subprocess.run(["scancel", job], timeout=60)
    wait_until("the blocker to leave", lambda: job not in subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split(), 120, 2)


def test_down_mid_job_leaves_no_slurm_job_and_no_sky_cluster(slurm_env, tmp_path) -> None:
    spec = spec_variant(tmp_path, "train-down", "slurm/local", step_time_s=1.0)
    run_id = launch_detached(slurm_env, spec)
    wait_until("training steps in the log", lambda: '"event": "step"' in logs(slurm_env, run_id), 1200, 5)
    assert squeue_jobs(), "the SkyPilot cluster should hold a Slurm job while training"
    r = cli(slurm_env, "down", run_id, "--wait", "300", timeout=600)
    assert r.returncode == 0, r.stderr
    d = wait_ended(slurm_env, run_id, 600)
    assert d["state"] == "cancelled"
    assert d["attempt_rows"][-1]["end_reason"] == "cancelled"
    wait_until("squeue to be empty", lambda: squeue_jobs() == [], 120)
    assert sky_clusters(slurm_env) == []


def test_preemption_on_slurm_checkpoints_recovers_and_finishes_identically(slurm_env, local_sha, tmp_path) -> None:
    spec = spec_variant(tmp_path, "train-preempt", "slurm/local", step_time_s=1.0)
    run_id = launch_detached(slurm_env, spec)
    wait_until("training steps in the log", lambda: '"event": "step"' in logs(slurm_env, run_id), 1200, 3)
    [job] = squeue_jobs()
    # Slurm's preemption notice: SIGTERM to every process of the job's steps.
    subprocess.run(["scancel", "--signal=TERM", job], check=True, timeout=30)
    d = wait_ended(slurm_env, run_id)
    assert d["state"] == "succeeded", d
    reasons = [a["end_reason"] for a in d["attempt_rows"]]
    # Slurm's SIGTERM reaches SkyPilot's own processes in the job's steps too, so the job's exit
    # code (75, "checkpointed on a notice") may never reach us: then SkyPilot loses the job and the
    # attempt is recorded as node lost; recovery is the same either way.
    assert reasons[0] in ("preempted", "node_lost") and reasons[-1] == "completed", reasons
    out = logs(slurm_env, run_id)
    resumed = [json.loads(m) for m in re.findall(r'(\{"event": "resumed".*\})', out)]
    assert resumed and resumed[0]["step"] > 0, "the second attempt resumes from the checkpoint the first one saved"
    assert SHA.findall(out)[-1] == local_sha
    assert squeue_jobs() == []
    assert sky_clusters(slurm_env) == []


def test_failed_setup_ends_setup_failed_and_frees_the_allocation(slurm_env, tmp_path) -> None:
    """Also: a spec's `secrets:` reach the job through SkyPilot's own `secrets:` (the job sees the
    value; its log, as we store it, does not)."""
    token = "tok-slurm-secret-0123456789"
    spec = spec_variant(tmp_path, "train-badsetup", "slurm/local", secrets={"API_TOKEN": token},
                        setup='echo setting up; echo "token $API_TOKEN has ${#API_TOKEN} chars"; exit 1')  # fmt: skip
    r = cli(slurm_env, "launch", str(spec), "--yes", timeout=1500)
    assert r.returncode == 1, r.stdout + r.stderr
    run_id = re.search(r"run (r-\S+)", r.stdout + r.stderr).group(1)
    d = show(slurm_env, run_id)
    assert (d["state"], d["end_reason"]) == ("failed", "setup_failed")
    text = logs(slurm_env, run_id)
    assert "setting up" in text and f"has {len(token)} chars" in text
    assert token not in text and token not in r.stdout + r.stderr
    assert squeue_jobs() == []
    assert sky_clusters(slurm_env) == []
