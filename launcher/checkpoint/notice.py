"""Preemption notice for training jobs: SIGTERM, and the AWS / GCP metadata endpoints.

The job calls `install()` once, then checks `requested()` at every step; when it is true, the
job saves a checkpoint and exits with PREEMPTED_EXIT_CODE so the controller can tell "preempted,
resume me" from success (0) and failure (anything else).

Metadata polling runs only when the job knows it is on a cloud: LAUNCHER_CLOUD=aws|gcp, an
injected endpoint (LAUNCHER_AWS_METADATA_URL / LAUNCHER_GCP_METADATA_URL), or SkyPilot's
SKYPILOT_CLUSTER_INFO. It never probes the network to find out, so a laptop never hangs here.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

# EX_TEMPFAIL from sysexits.h: "temporary failure, try again". Not used by shells (126/127),
# signals (128+N) or Python (1, 2), so it cannot be mistaken for an ordinary failure.
PREEMPTED_EXIT_CODE = 75

AWS_DEFAULT_BASE_URL = "http://169.254.169.254"
GCP_DEFAULT_BASE_URL = "http://metadata.google.internal"
AWS_URL_ENV = "LAUNCHER_AWS_METADATA_URL"
GCP_URL_ENV = "LAUNCHER_GCP_METADATA_URL"
CLOUD_ENV = "LAUNCHER_CLOUD"
POLL_INTERVAL_ENV = "LAUNCHER_PREEMPTION_POLL_S"


@dataclass(frozen=True)
class PreemptionNotice:
    source: str  # "signal", "aws", "gcp" or "manual"
    detail: str
    received_at_unix_s: float


_event = threading.Event()
_lock = threading.Lock()
_notice: PreemptionNotice | None = None
_poller: MetadataPoller | None = None


def request(source: str, detail: str = "") -> None:
    """Record a notice (the first one wins). Safe from signal handlers and threads."""
    global _notice
    # A signal handler runs between bytecodes of the main thread; never block on the lock there.
    if _lock.acquire(blocking=False):
        try:
            if _notice is None:
                _notice = PreemptionNotice(source, detail, time.time())
        finally:
            _lock.release()
    _event.set()


def requested() -> bool:
    """True once a notice has arrived."""
    return _event.is_set()


def notice() -> PreemptionNotice | None:
    return _notice if _event.is_set() else None


def wait(timeout_s: float | None = None) -> bool:
    return _event.wait(timeout_s)


def reset() -> None:
    """Forget any notice and stop the poller (tests; a job that handled a notice and goes on)."""
    global _notice, _poller
    if _poller is not None:
        _poller.stop()
        _poller = None
    _notice = None
    _event.clear()


def install(
    signals: Iterable[int] = (signal.SIGTERM,),
    *,
    poll_metadata: bool = True,
    env: Mapping[str, str] | None = None,
) -> MetadataPoller | None:
    """Turn the signals into a notice and, on a known cloud, start the metadata poller.

    Call from the main thread. Returns the poller (None when not on a cloud)."""
    global _poller
    for sig in signals:
        signal.signal(sig, _on_signal)
    if not poll_metadata:
        return None
    env = os.environ if env is None else env
    cloud = detect_cloud(env)
    if cloud is None:
        return None
    if _poller is not None:
        _poller.stop()
    _poller = MetadataPoller(
        cloud,
        base_url=metadata_base_url(cloud, env),
        interval_s=_poll_interval_s(env),
    )
    _poller.start()
    return _poller


def _poll_interval_s(env: Mapping[str, str], default_s: float = 5.0) -> float:
    # A typo in an env var must not crash a training job: fall back to the default.
    try:
        value = float(env.get(POLL_INTERVAL_ENV, default_s))
    except ValueError:
        return default_s
    return value if value > 0 else default_s


def _on_signal(signum, _frame) -> None:
    request("signal", signal.Signals(signum).name)


def detect_cloud(env: Mapping[str, str]) -> str | None:
    """'aws', 'gcp' or None, from configuration only (never a network call)."""
    explicit = env.get(CLOUD_ENV, "").strip().lower()
    if explicit:
        return explicit if explicit in ("aws", "gcp") else None  # e.g. "local", "none"
    if env.get(AWS_URL_ENV):
        return "aws"
    if env.get(GCP_URL_ENV):
        return "gcp"
    info = env.get("SKYPILOT_CLUSTER_INFO")
    if info:
        try:
            cloud = str(json.loads(info).get("cloud", "")).strip().lower()
        except (ValueError, AttributeError):
            return None
        return cloud if cloud in ("aws", "gcp") else None
    return None


def metadata_base_url(cloud: str, env: Mapping[str, str]) -> str:
    if cloud == "aws":
        return env.get(AWS_URL_ENV) or AWS_DEFAULT_BASE_URL
    return env.get(GCP_URL_ENV) or GCP_DEFAULT_BASE_URL


def check_aws(base_url: str, timeout_s: float = 2.0) -> str | None:
    """The spot instance-action document when AWS has scheduled a stop/terminate, else None.

    IMDSv2 first (token via PUT); falls back to IMDSv1 when the token call is refused."""
    import urllib.error  # only where a poller runs: keeps the controller's import light
    import urllib.request

    base = base_url.rstrip("/")
    headers = {}
    try:
        token_req = urllib.request.Request(
            f"{base}/latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"},
        )
        with urllib.request.urlopen(token_req, timeout=timeout_s) as resp:
            headers["X-aws-ec2-metadata-token"] = resp.read().decode().strip()
    except urllib.error.HTTPError:
        pass  # IMDSv1-only endpoint
    req = urllib.request.Request(f"{base}/latest/meta-data/spot/instance-action", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read().decode()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # no action scheduled
            return None
        raise
    try:
        action = json.loads(body).get("action")
    except (ValueError, AttributeError):
        return None
    return body if action in ("terminate", "stop", "hibernate") else None


def check_gcp(base_url: str, timeout_s: float = 2.0) -> str | None:
    """'TRUE' when GCP has preempted this instance, else None."""
    import urllib.request

    req = urllib.request.Request(
        f"{base_url.rstrip('/')}/computeMetadata/v1/instance/preempted",
        headers={"Metadata-Flavor": "Google"},
    )
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        body = resp.read().decode().strip()
    return body if body.upper() == "TRUE" else None


CHECKS: dict[str, Callable[[str, float], str | None]] = {"aws": check_aws, "gcp": check_gcp}


class MetadataPoller:
    """Polls a cloud's metadata endpoint in a daemon thread and calls `request()` on notice.

    Network errors are counted and retried at the next interval; they never raise into the job."""

    def __init__(
        self,
        cloud: str,
        *,
        base_url: str | None = None,
        interval_s: float = 5.0,
        timeout_s: float = 2.0,
        on_notice: Callable[[str, str], None] = request,
    ) -> None:
        if cloud not in CHECKS:
            raise ValueError(f"no metadata check for cloud {cloud!r}")
        self.cloud = cloud
        self.base_url = base_url or metadata_base_url(cloud, {})
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.errors = 0
        self.polls = 0
        self._on_notice = on_notice
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"preemption-poller-{cloud}", daemon=True)

    def start(self) -> MetadataPoller:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def poll_once(self) -> str | None:
        self.polls += 1
        try:
            return CHECKS[self.cloud](self.base_url, self.timeout_s)
        except (OSError, ValueError):  # urllib's URLError and HTTPError are OSErrors
            self.errors += 1
            return None

    def _run(self) -> None:
        while not self._stop.is_set():
            detail = self.poll_once()
            if detail is not None:
                self._on_notice(self.cloud, detail)
                return
            self._stop.wait(self.interval_s)
