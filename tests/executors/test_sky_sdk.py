"""The SkyPilot executor against SkyPilot's own objects and SDK.

* Task/Resources: for every example spec in task_specs/, the config we build is turned into
  SkyPilot's `sky.Task` and read back with `task.to_yaml_config()`, field by field.
* SDK: the real `sky.client.sdk` functions (ssh_up, launch, get, job_status, cancel) talk HTTP
  to a stand-in for SkyPilot's API server on 127.0.0.1 (the network boundary). The stand-in
  answers with SkyPilot's own server-side encoders (`sky.server.requests.requests.Request`),
  so decoding on the client is SkyPilot's code; the test asserts what the SDK sent.

What this does not prove: that a real API server deploys the SSH node pool (k3s) on real
machines, or that the job runs there.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from launcher.executors.base import ExecRequest, Outcome
from launcher.executors.sky import CHECKPOINT_MOUNT, SkyExecutor, default_sdk, pool_name
from launcher.providers.base import MANAGED_BY_TAG, MANAGED_BY_VALUE, ClusterHandle, Node
from launcher.providers.fake import FakeProvider

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "task_specs").glob("*.yaml"))

TAGS = {
    "project": "examples",
    "experiment": "digits",
    "owner": "ml-team",
    "cost-center": "research",
    "run-id": "run-1",
    "cluster": "examples-c1",
    MANAGED_BY_TAG: MANAGED_BY_VALUE,
    "created-at": "2026-11-30T08:00:00Z",
    "expires-at": "2026-11-30T20:00:00Z",
}


@pytest.fixture(scope="module")
def sky_sdk(tmp_path_factory):
    # Import sky (seconds, once) with HOME elsewhere: it creates ~/.sky state at import time.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.mktemp("sky-home")))
        mp.setenv("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
        sdk = default_sdk()
    return sdk


def cluster(provider="aws", n=2, ids=None):
    ids = ids or [f"i-{k}" for k in range(n)]
    nodes = tuple(Node(iid, f"203.0.113.{k + 10}", k) for k, iid in enumerate(ids))
    return ClusterHandle("examples-c1", provider, "us-east-1", "us-east-1a", nodes, stack="examples--c1",
                         extra={"ssh_user": "ubuntu", "bucket": "gl-examples-c1-ckpt"})


def request_from_spec(path: Path, tmp_path: Path) -> tuple[ExecRequest, str | None]:
    """What the controller hands the executor for the spec's first cloud alternative."""
    from launcher.spec.loader import load_spec

    loaded = load_spec(path)
    spec = loaded.spec
    alt = next(a for a in spec.resources.alternatives() if not a.placement().is_local)
    gpu = alt.accelerators[0] if alt.accelerators else None
    req = ExecRequest(
        run_id="run-1", attempt=1, run_dir=tmp_path, workdir=loaded.workdir, setup=spec.setup, run=spec.run,
        num_nodes=spec.num_nodes, gpus_per_node=gpu[1] if gpu else 0, envs=spec.env_strings(),
        image_id=alt.image or "nvcr.io/nvidia/pytorch:24.08-py3",
    )
    return req, (gpu[0] if gpu else None)


@pytest.mark.parametrize("spec_path", SPECS, ids=[p.stem for p in SPECS])
def test_example_specs_become_equivalent_sky_tasks(spec_path, tmp_path, sky_sdk):
    req, gpu = request_from_spec(spec_path, tmp_path)
    h = cluster(n=req.num_nodes)
    ex = SkyExecutor(accelerator=gpu, tags=TAGS, sdk=sky_sdk)

    got = ex.task(req, h).to_yaml_config()  # SkyPilot parses, validates and dumps it back

    res = got["resources"]
    assert res["infra"] == f"ssh/{pool_name(h)}"
    if gpu:
        assert res["accelerators"] == {gpu: req.gpus_per_node}
    else:
        assert "accelerators" not in res
    # SkyPilot keys a docker image by the pool's region name.
    assert set(res["image_id"].values()) == {f"docker:{req.image_id}"}
    assert res["labels"]["project"] == "examples" and res["labels"]["managed-by"] == "gpu-launcher"
    assert res["labels"]["created-at"] == "2026-11-30t08-00-00z"  # k8s label rules: no ':'
    assert got["num_nodes"] == req.num_nodes
    assert got.get("run") == req.run and got.get("setup") == req.setup
    assert got.get("workdir") == (str(req.workdir) if req.workdir else None)
    for k, v in req.envs.items():
        assert got["envs"][k] == v
    assert got["envs"]["LAUNCHER_RUN_ID"] == "run-1" and got["envs"]["LAUNCHER_CHECKPOINT_DIR"] == CHECKPOINT_MOUNT
    mount = got["file_mounts"][CHECKPOINT_MOUNT]
    assert mount["source"] == "s3://gl-examples-c1-ckpt" and mount["mode"] == "MOUNT_CACHED"


def test_sky_rejects_what_it_would_reject(tmp_path, sky_sdk):
    # The Task step is a real validation: a bad accelerator count is refused by SkyPilot itself.
    req, _ = request_from_spec(SPECS[0], tmp_path)
    ex = SkyExecutor(accelerator="L4", sdk=sky_sdk)
    with pytest.raises(Exception, match="(?i)accelerator|count"):
        ex.task(ExecRequest(**{**req.__dict__, "gpus_per_node": -1}), cluster())


# ---- a stand-in for SkyPilot's API server ---------------------------------------------------------
class FakeSkyApi:
    """Speaks the API server's HTTP protocol for the calls the executor makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object]] = []
        self.job_statuses: list[object] = ["RUNNING", "SUCCEEDED"]
        self.log_lines = ["(head, rank=0, pid=1) epoch 1/3 loss 0.91", "(head, rank=0, pid=1) epoch 2/3 loss 0.42"]
        self.results: dict[str, tuple[str, object]] = {}
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _reply(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urlparse(self.path)
                if url.path == "/api/health":
                    return self._reply(200, *api.health())
                if url.path == "/api/get":
                    rid = parse_qs(url.query)["request_id"][0]
                    return self._reply(200, api.encoded(rid), api.version_headers())
                return self._reply(404, {"detail": f"no {url.path}"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = urlparse(self.path).path
                ctype = self.headers.get("Content-Type", "")
                parsed = json.loads(body) if body and "json" in ctype else body.decode(errors="replace")
                with api._lock:
                    api.calls.append(("POST", path, parsed))
                if path == "/validate" or path == "/ssh_node_pools":
                    return self._reply(200, {}, api.version_headers())
                if path == "/logs":  # the job's output, streamed as the real server does (text lines)
                    rid = api.new_request(path, parsed)
                    data = "".join(f"{line}\n" for line in api.log_lines).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in {**api.version_headers(), "X-Skypilot-Request-ID": rid}.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                if path == "/ssh_node_pools/keys":
                    return self._reply(200, {"key_path": "/api-server/keys/uploaded"}, api.version_headers())
                rid = api.new_request(path, parsed)
                return self._reply(200, {}, {**api.version_headers(), "X-Skypilot-Request-ID": rid})

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self):
        self._httpd.shutdown()
        self._httpd.server_close()

    @staticmethod
    def version_headers():
        import sky
        from sky.server import constants

        return {constants.API_VERSION_HEADER: str(constants.API_VERSION), constants.VERSION_HEADER: sky.__version__}

    def health(self):
        import sky
        from sky.server import constants

        body = {
            "status": "healthy", "api_version": str(constants.API_VERSION), "version": sky.__version__,
            "version_on_disk": sky.__version__, "commit": sky.__commit__, "basic_auth_enabled": False,
            "user": {"name": "tester", "id": "abcd1234"},
        }
        return body, self.version_headers()

    def new_request(self, path: str, body) -> str:
        """Decide each request's result as a server would (job statuses come from a script)."""
        import sky

        rid = uuid.uuid4().hex
        if path == "/launch":
            self.results[rid] = ("launch", (7, None))
        elif path == "/logs":
            self.results[rid] = ("logs", 0)
        elif path == "/job_status":
            nxt = self.job_statuses.pop(0) if len(self.job_statuses) > 1 else self.job_statuses[0]
            if isinstance(nxt, Exception):
                self.results[rid] = ("job_status", nxt)
            else:
                self.results[rid] = ("job_status", {jid: sky.JobStatus(nxt) for jid in body["job_ids"]})
        else:  # ssh_up deploy, cancel, down, ...
            self.results[rid] = (path.strip("/").replace("/", "."), None)
        return rid

    def encoded(self, rid: str) -> dict:
        from sky.server.requests import payloads
        from sky.server.requests import requests as requests_lib

        from sky.server import constants

        name, value = self.results[rid]
        name = constants.REQUEST_NAME_PREFIX + name  # how the server names requests ("sky.launch")
        req = requests_lib.Request(
            request_id=rid, name=name, entrypoint=len, request_body=payloads.RequestBody(),
            status=requests_lib.RequestStatus.SUCCEEDED, created_at=time.time(), user_id="abcd1234",
        )
        if isinstance(value, Exception):
            req.status = requests_lib.RequestStatus.FAILED
            req.set_error(value)
        else:
            req.set_return_value(value)
        return json.loads(req.encode().model_dump_json())

    def posted(self, path: str) -> list:
        return [b for (_m, p, b) in self.calls if p == path]


@pytest.fixture
def sky_api(sky_sdk, monkeypatch, tmp_path):
    """Point SkyPilot's client at the stand-in (as its *local* API server, so no file upload)."""
    from sky.server import common as server_common

    api = FakeSkyApi()
    monkeypatch.setenv("SKYPILOT_API_SERVER_LOCAL_PORT", str(api.port))
    monkeypatch.setenv("SKYPILOT_DISABLE_LOCAL_API_SERVER", "1")  # never start a real one
    monkeypatch.delenv("SKYPILOT_API_SERVER_ENDPOINT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    for cached in (server_common.get_server_url, server_common.is_api_server_local):
        cached.cache_clear()
    server_common.get_api_server_status_response.cache.clear()
    yield api
    api.stop()
    for cached in (server_common.get_server_url, server_common.is_api_server_local):
        cached.cache_clear()
    server_common.get_api_server_status_response.cache.clear()


def _key(tmp_path) -> str:
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----\n")
    return str(key)


def test_sdk_deploys_the_pool_launches_the_task_and_reads_status(sky_api, sky_sdk, tmp_path):
    req, gpu = request_from_spec(REPO / "task_specs" / "train.yaml", tmp_path)
    h = cluster(n=1)
    ex = SkyExecutor(accelerator=gpu, tags=TAGS, sdk=sky_sdk, pools_file=tmp_path / "pools.yaml",
                     identity_file=_key(tmp_path), poll_interval_s=0)
    execution = ex.start(req, h)
    result = execution.wait(timeout_s=60)

    assert result is not None and result.outcome is Outcome.SUCCEEDED, result
    # 1. the pool's hosts went to the API server (with the key uploaded there)
    (pools,) = sky_api.posted("/ssh_node_pools")
    assert pools == {pool_name(h): {"hosts": [{"ip": "203.0.113.10", "user": "ubuntu",
                                               "identity_file": "/api-server/keys/uploaded", "password": "",
                                               "use_ssh_config": False}]}}
    assert sky_api.posted(f"/ssh_node_pools/{pool_name(h)}/deploy")
    # 2. the launch carried our task, as SkyPilot serializes it
    (launch,) = sky_api.posted("/launch")
    assert launch["cluster_name"] == "gl-examples-c1-job"
    assert launch["retry_until_up"] is False
    task = [d for d in yaml.safe_load_all(launch["task"]) if d and "run" in d][0]
    assert task["run"] == req.run and task["setup"] == req.setup
    assert task["resources"]["infra"] == f"ssh/{pool_name(h)}"
    assert task["resources"]["accelerators"] == {gpu: 1}
    assert task["file_mounts"][CHECKPOINT_MOUNT]["source"] == "s3://gl-examples-c1-ckpt"
    assert task["envs"]["EPOCHS"] == "3" and task["envs"]["LAUNCHER_CLOUD"] == "aws"
    # 3. the job was polled by the id the launch returned
    assert all(b["job_ids"] == [7] and b["cluster_name"] == "gl-examples-c1-job" for b in sky_api.posted("/job_status"))
    assert len(sky_api.posted("/job_status")) == 2  # RUNNING, then SUCCEEDED
    # 4. the job's output was followed into the run's log, where `launcher logs` reads it
    log = tmp_path / "logs" / "rank-0.log"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "epoch 2/3" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.05)
    assert "epoch 1/3 loss 0.91" in log.read_text() and "epoch 2/3 loss 0.42" in log.read_text()
    (logs,) = sky_api.posted("/logs")
    assert logs["cluster_name"] == "gl-examples-c1-job" and logs["job_id"] == 7 and logs["follow"] is True


def test_sdk_unreachable_cluster_after_spot_reclaim_is_preempted(sky_api, sky_sdk, tmp_path):
    from sky import exceptions as sky_exc

    fake = FakeProvider(regions=("us-east-1",))
    ids = [fake.add_instance("us-east-1", tags={MANAGED_BY_TAG: MANAGED_BY_VALUE}, spot=True) for _ in range(2)]
    req, gpu = request_from_spec(REPO / "task_specs" / "multinode.yaml", tmp_path)
    down = sky_exc.ClusterNotUpError("cluster gl-examples-c1-job is not up")
    sky_api.job_statuses = ["RUNNING", down]
    ex = SkyExecutor(accelerator=gpu, sdk=sky_sdk, provider=fake, pools_file=tmp_path / "pools.yaml",
                     identity_file=_key(tmp_path), poll_interval_s=0, unreachable_polls=2)
    execution = ex.start(req, cluster(n=2, ids=ids))
    deadline = time.monotonic() + 60
    while execution.phase != "run" and time.monotonic() < deadline:
        assert execution.poll() is None
        time.sleep(0.05)
    assert execution.poll() is None  # RUNNING
    fake.preempt(ids[0])
    result = execution.wait(timeout_s=30)
    assert result.outcome is Outcome.PREEMPTED and ids[0] in result.detail


def test_sdk_stop_sends_cancel_for_the_job(sky_api, sky_sdk, tmp_path):
    req, gpu = request_from_spec(REPO / "task_specs" / "quickstart.yaml", tmp_path)
    sky_api.job_statuses = ["RUNNING"]
    ex = SkyExecutor(accelerator=gpu, sdk=sky_sdk, pools_file=tmp_path / "pools.yaml",
                     identity_file=_key(tmp_path), poll_interval_s=0)
    execution = ex.start(req, cluster(n=1))
    deadline = time.monotonic() + 60
    while execution.phase != "run" and time.monotonic() < deadline:
        time.sleep(0.05)
    result = execution.stop()
    assert result.outcome is Outcome.CANCELLED
    (cancel,) = sky_api.posted("/cancel")
    assert cancel["cluster_name"] == "gl-examples-c1-job" and cancel["job_ids"] == [7]
