"""Containers for real: a rootfs image built offline and imported into the real podman, the
runtime probe, the digest it records, an attempt that cannot start (missing image) ending as one
non-retryable failure, and a real job in a container where this machine lets podman start one.

Where the machine refuses containers (these sandboxes refuse setrlimit inside one), the tests
that need a running container are skipped with the runtime's own reason; the failure path is
still asserted against the real runtime's answer."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from launcher.executors import ExecRequest, Outcome
from launcher.executors.container import (
    ContainerRuntime,
    ContainerRuntimeError,
    bare_ref,
    explain,
    image_digest,
    select_runtime,
    sky_image_id,
)
from launcher.executors.local import LocalExecutor, log_path
from launcher.providers.base import ClusterRequest
from launcher.providers.local import LocalProvider
from tests.executors.container_image import build_rootfs_tar, import_image, remove_image

PODMAN = shutil.which("podman")
needs_podman = pytest.mark.skipif(PODMAN is None, reason="podman is not installed on this machine")


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """docker:localhost/bb-<pid>:1, imported from a rootfs tarball; removed afterwards."""
    if PODMAN is None:
        pytest.skip("podman is not installed on this machine")
    ref = f"localhost/bb-{os.getpid()}:1"
    import_image(PODMAN, build_rootfs_tar(tmp_path_factory.mktemp("img")), ref)
    yield "docker:" + ref
    remove_image(PODMAN, ref)


def _podman_or_skip(image: str):
    """The probed runtime, or a skip that says why podman cannot start containers here."""
    try:
        return select_runtime(image, candidates=[PODMAN])
    except ContainerRuntimeError as e:
        assert "\n" not in e.message and "podman" in e.message, e.message
        pytest.skip(f"podman cannot start containers on this machine: {e.message}")


def _request(tmp_path: Path, *, run: str, image_id: str, **kw) -> ExecRequest:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return ExecRequest(run_id=f"r-ctr-{os.getpid()}", attempt=1, run_dir=run_dir, workdir=kw.pop("workdir", None), setup=None,
                       run=run, num_nodes=kw.pop("num_nodes", 1), gpus_per_node=0, checkpoint_dir=run_dir / "checkpoints",
                       image_id=image_id, **kw)  # fmt: skip


def _start(executor: LocalExecutor, req: ExecRequest):
    provider = LocalProvider()
    handle = provider.provision(ClusterRequest(cluster="c1", offer=provider.offer(), num_nodes=req.num_nodes, tags={}))
    return executor.start(req, handle)


def test_image_references_as_skypilot_spells_them():
    assert bare_ref("docker:localhost/bb:1") == "localhost/bb:1" and bare_ref("localhost/bb:1") == "localhost/bb:1"
    assert sky_image_id("localhost/bb:1") == "docker:localhost/bb:1" == sky_image_id("docker:localhost/bb:1")


# The runtimes' own words, as they answered on these machines.
@pytest.mark.parametrize(
    ("stderr", "says"),
    [
        ("Error: runc: runc create failed: unable to start container process: error during container init: error setting "
         "rlimits for ready process: error setting rlimit type 6: operation not permitted: OCI permission denied",
         "podman cannot set RLIMIT_NPROC here"),
        ("Error: crun: setrlimit `RLIMIT_NPROC`: Operation not permitted: OCI permission denied", "podman cannot set RLIMIT_NPROC here"),
        ('Error: default OCI runtime "runc" not found: invalid argument', "podman: runc is not installed"),
        ("Error: localhost/nope:1: image not known", "podman: image 'localhost/bb:1' is not in its local images"),
        ("Error: invalid reference format", "podman: 'localhost/bb:1' is not a valid image reference"),
    ],
)
def test_runtime_errors_become_one_line_naming_what_failed(stderr, says):
    assert explain(stderr, "podman", "localhost/bb:1").startswith(says)


@needs_podman
def test_the_digest_of_the_imported_image_not_its_tag_is_read(image):
    want = subprocess.run([PODMAN, "image", "inspect", "--format", "{{.Digest}} {{.Id}}", bare_ref(image)],
                          capture_output=True, text=True, timeout=60).stdout.split()  # fmt: skip
    digest, image_id = image_digest(ContainerRuntime("podman", PODMAN, bare_ref(image)))
    assert digest == want[0] and digest.startswith("sha256:") and len(digest) == 71
    assert image_id == "sha256:" + want[1]


@needs_podman
def test_probe_takes_the_prefixed_image_and_keeps_its_digest_or_says_why_not(image):
    rt = _podman_or_skip(image)
    assert rt is not None and rt.name == "podman" and rt.image == bare_ref(image)
    assert rt.digest == image_digest(rt)[0]


@needs_podman
def test_a_missing_image_is_one_error_before_anything_starts_and_never_a_retryable_attempt(tmp_path):
    with pytest.raises(ContainerRuntimeError) as err:
        select_runtime("docker:localhost/launcher-no-such-image:0", candidates=[PODMAN])
    assert "podman: image 'localhost/launcher-no-such-image:0' is not in its local images" in err.value.message
    req = _request(tmp_path, run="echo never", image_id="docker:localhost/launcher-no-such-image:0")
    result = _start(LocalExecutor(podman=PODMAN), req).wait(5)
    assert (result.outcome, result.exit_code, result.retryable) == (Outcome.FAILED, 125, False)
    assert "is not in its local images" in result.detail
    assert not log_path(req.run_dir, 0).exists()  # no rank was started


def test_docker_without_a_daemon_says_so():
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is not installed on this machine")
    if subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0:
        pytest.skip("a Docker daemon is running here")
    with pytest.raises(ContainerRuntimeError) as err:
        select_runtime("docker:localhost/bb:1", candidates=[docker])
    assert "docker:" in err.value.message and "\n" not in err.value.message


@needs_podman
def test_a_real_job_runs_in_the_container_with_its_variables_and_mounts(image, tmp_path):
    _podman_or_skip(image)
    wd = tmp_path / "wd"
    wd.mkdir()
    req = _request(tmp_path, run='echo "rank=$SKYPILOT_NODE_RANK of $SKYPILOT_NUM_NODES v=$MY_VAR home=${HOME:-}" > out-$SKYPILOT_NODE_RANK.txt',
                   image_id=image, workdir=wd, num_nodes=2, envs={"MY_VAR": "x y"})  # fmt: skip
    execution = _start(LocalExecutor(podman=PODMAN), req)
    result = execution.wait(120)
    assert result.outcome is Outcome.SUCCEEDED, (result, log_path(req.run_dir, 0).read_text())
    assert result.image_runtime == "podman" and execution.image_digest.startswith("sha256:")
    assert (wd / "out-1.txt").read_text().startswith("rank=1 of 2 v=x y")


@needs_podman
def test_a_preemption_notice_reaches_the_job_inside_the_container(image, tmp_path):
    _podman_or_skip(image)
    wd = tmp_path / "wd"
    wd.mkdir()
    job = "trap 'echo saved > ckpt.txt; exit 75' TERM; echo up > up.txt; while :; do :; done"
    req = _request(tmp_path, run=job, image_id=image, workdir=wd)
    execution = _start(LocalExecutor(podman=PODMAN), req)
    import time

    deadline = time.monotonic() + 60
    while not (wd / "up.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    execution.notify_preemption(grace_s=20)
    result = execution.wait(60)
    assert result.outcome is Outcome.PREEMPTED and result.exit_code == 75
    assert (wd / "ckpt.txt").read_text().strip() == "saved"


def test_a_container_gets_the_jobs_variables_by_name_and_nothing_of_the_launchers(tmp_path):
    from launcher.executors.local import container_env_names, rank_env

    req = _request(tmp_path, run="x", image_id="docker:localhost/bb:1", envs={"MY_VAR": "1", "HF_TOKEN": "s3cret"})
    host = {"PATH": "/usr/bin", "HOME": "/root", "LAUNCHER_DB_URL": "postgresql://u:pw@db/x", "AWS_SECRET_ACCESS_KEY": "k"}
    env = rank_env(req, 0, phase="run", master_port=1234, base=host)
    names = container_env_names(env, req)
    assert {"MY_VAR", "HF_TOKEN", "SKYPILOT_NODE_RANK", "LAUNCHER_RUN_ID", "MASTER_PORT", "LAUNCHER_CHECKPOINT_DIR"} <= set(names)
    assert not {"PATH", "HOME", "LAUNCHER_DB_URL", "AWS_SECRET_ACCESS_KEY", "LAUNCHER_PYTHON"} & set(names)


def test_the_forwarder_as_pid_1_passes_a_notice_to_the_job_and_returns_its_exit_code(tmp_path):
    """The script that runs the job inside every container, run as PID 1 of a real PID namespace
    (`unshare`, as a container without an init process has it): SIGTERM from outside reaches the
    job, which saves and exits 75, and 75 comes back out. Outside a PID namespace `kill -1` would
    reach every process of the user, so the namespace is checked first."""
    import signal
    import time

    from launcher.executors.container import FORWARDER

    ns = ["unshare", "--pid", "--fork", "--mount-proc"]
    try:
        probe = subprocess.run([*ns, "sh", "-c", 'test "$$" = 1'], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"unshare cannot make a PID namespace here: {e}")
    if probe.returncode != 0:
        pytest.skip(f"unshare cannot make a PID namespace here: {probe.stderr.strip()}")
    up, saved = tmp_path / "up", tmp_path / "saved"
    job = f"trap 'echo saved > {saved}; exit 75' TERM; echo up > {up}; while :; do sleep 0.05; done"
    p = subprocess.Popen([*ns, "sh", "-c", FORWARDER, "launcher-job", job], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not up.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (pid1,) = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
    os.kill(int(pid1), signal.SIGTERM)
    assert p.wait(timeout=30) == 75 and saved.read_text() == "saved\n"
    ok = subprocess.run([*ns, "sh", "-c", FORWARDER, "launcher-job", "exit 3"], timeout=30)
    assert ok.returncode == 3  # the job's own code, untouched
