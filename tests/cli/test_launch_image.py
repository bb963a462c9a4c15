"""`launch` of a spec with `image_id: docker:localhost/bb-<pid>:1` (SkyPilot's spelling) through the
real CLI and the real podman, on an image imported offline from a rootfs tarball: the job runs in
the container and `runs show` records the image digest, or, where the machine refuses containers,
the launch fails before any run or attempt with one line naming what failed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.cli.launch_helpers import clean_env, ledger_runs, write_spec  # noqa: F401
from tests.conftest import run_cli
from tests.executors.container_image import build_rootfs_tar, import_image, remove_image

PODMAN = shutil.which("podman")
pytestmark = [pytest.mark.usefixtures("clean_env"), pytest.mark.skipif(PODMAN is None, reason="podman is not installed on this machine")]


@pytest.fixture
def image(tmp_path):
    ref = f"localhost/bb-{os.getpid()}:1"
    import_image(PODMAN, build_rootfs_tar(tmp_path), ref)
    yield ref
    remove_image(PODMAN, ref)


def test_the_docker_prefixed_image_runs_or_fails_before_any_attempt_with_one_line(tmp_path, image):
    spec = write_spec(tmp_path, f"""
        name: boxed
        resources: {{infra: local, image_id: 'docker:{image}'}}
        run: echo "in the box - rank $SKYPILOT_NODE_RANK"
        launcher: {{project: img, expected_hours: 0.01}}
        """)  # fmt: skip
    r = run_cli("launch", str(spec), "--yes", "--cheapest", timeout=300)
    if r.returncode != 0:
        assert r.returncode == 5, r.stderr
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
        assert len(errors) == 1 and f"image {image} cannot run here: podman" in errors[0], r.stderr
        assert ledger_runs() == []  # nothing recorded, nothing started, nothing billed
        reason = errors[0].split("cannot run here: ", 1)[1]
        pytest.skip(f"podman cannot start containers on this machine: {reason}")
    assert "in the box - rank 0" in r.stdout
    (run,) = ledger_runs()
    show = json.loads(run_cli("runs", "show", run.run_id, "--json").stdout)
    want = subprocess.run([PODMAN, "image", "inspect", "--format", "{{.Digest}}", image], capture_output=True, text=True).stdout.strip()
    assert show["image"] == f"docker:{image}" and show["image_digest"] == want and want.startswith("sha256:")
    assert f"image_digest: {want}" in run_cli("runs", "show", run.run_id).stdout
