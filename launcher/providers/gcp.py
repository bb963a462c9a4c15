"""GCP provider (google-cloud-compute, imported lazily): credentials, managed instances across
all zones (one paginated aggregatedList), idempotent delete that waits on the zone operation,
labels for the reaper's marks. Clusters are provisioned by infra/ (Pulumi).

Our tags become GCP labels through `infra.tags` (same mapping as the stacks use), so a tag
filter here matches what a stack wrote. Idle signals come from Cloud Monitoring (see
gcp_monitoring.py): CPU always, GPU where the Ops Agent publishes it.

Endpoint overrides (tests, private endpoints): `api_endpoint=` or LAUNCHER_GCP_COMPUTE_ENDPOINT,
`monitoring_endpoint=` or LAUNCHER_GCP_MONITORING_ENDPOINT. An `http://` endpoint uses anonymous
credentials unless credentials are passed in.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from launcher.errors import CredentialsError, ProviderError
from launcher.providers.base import (
    MANAGED_BY_TAG,
    MANAGED_BY_VALUE,
    BillingAccountRef,
    ClusterHandle,
    ClusterRequest,
    CredentialStatus,
    IdleSignals,
    InstanceInfo,
    Provider,
)
from launcher.providers.gcp_project import PROJECT_ENVS
from launcher.providers.notice import GCP_NOTICE, PreemptionNoticeSource

ENDPOINT_ENV = "LAUNCHER_GCP_COMPUTE_ENDPOINT"
MONITORING_ENDPOINT_ENV = "LAUNCHER_GCP_MONITORING_ENDPOINT"
PREEMPTED_OP = "compute.instances.preempted"

# GCE statuses -> our normalized ones. GCE's TERMINATED is a stopped VM (disk kept, can restart).
_STATE = {
    "PROVISIONING": "pending",
    "STAGING": "pending",
    "REPAIRING": "pending",
    "RUNNING": "running",
    "STOPPING": "stopping",
    "SUSPENDING": "stopping",
    "SUSPENDED": "stopped",
    "TERMINATED": "stopped",
}
LIVE_STATUSES = tuple(_STATE)


class GcpProvider(Provider):
    name = "gcp"

    def __init__(
        self,
        project: str | None = None,
        *,
        api_endpoint: str | None = None,
        monitoring_endpoint: str | None = None,
        credentials: Any = None,
        page_size: int = 500,
        retry_initial_s: float = 1.0,
        retry_timeout_s: float = 120.0,
        operation_timeout_s: float = 600.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self._env = os.environ if env is None else env
        self._project = project
        self.api_endpoint = api_endpoint or self._env.get(ENDPOINT_ENV) or None
        self.monitoring_endpoint = monitoring_endpoint or self._env.get(MONITORING_ENDPOINT_ENV) or None
        self.clock = lambda: datetime.now(UTC)
        self._numeric_ids: dict[tuple[str, str], str] = {}  # (zone, name) -> GCE numeric id
        self._http = None
        self._credentials = credentials
        self.page_size = page_size
        self.retry_initial_s = retry_initial_s
        self.retry_timeout_s = retry_timeout_s
        self.operation_timeout_s = operation_timeout_s
        self._instances_client = None
        self._ops_client = None
        # A launch for a move runs on a thread of its own (controller/attempt.py) while the watch asks
        # about the running cluster: the lazily made clients and session are made once, under a lock.
        self._lazy_lock = threading.Lock()

    # ---- plumbing -----------------------------------------------------------------------------
    @property
    def project(self) -> str:
        project = self._project or _detect_project(self._env)
        if not project:
            raise CredentialsError(
                "no GCP project configured",
                hint="set GOOGLE_CLOUD_PROJECT or `gcloud config set project <id>`",
            )
        return project

    def _client_kwargs(self) -> dict[str, Any]:
        from google.api_core.client_options import ClientOptions

        creds = self._credentials
        if creds is None and self.api_endpoint and self.api_endpoint.startswith("http://"):
            from google.auth.credentials import AnonymousCredentials

            creds = AnonymousCredentials()
        kwargs: dict[str, Any] = {"transport": "rest", "credentials": creds}
        if self.api_endpoint:
            kwargs["client_options"] = ClientOptions(api_endpoint=self.api_endpoint)
        return kwargs

    def _compute(self):
        try:
            from google.cloud import compute_v1
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ProviderError("google-cloud-compute is not installed", hint="pip install 'gpu-launcher[gcp]'") from e
        return compute_v1

    def instances_client(self):
        with self._lazy_lock:
            if self._instances_client is None:
                self._instances_client = self._call(lambda: self._compute().InstancesClient(**self._client_kwargs()))
            return self._instances_client

    def operations_client(self):
        # Our own client: the one behind ExtendedOperation.result() ignores client_options.
        with self._lazy_lock:
            if self._ops_client is None:
                self._ops_client = self._call(lambda: self._compute().ZoneOperationsClient(**self._client_kwargs()))
            return self._ops_client

    def _retry(self):
        """Backoff on throttling and transient server errors (429, 500, 503)."""
        from google.api_core import exceptions as gexc
        from google.api_core import retry as gretry

        return gretry.Retry(
            predicate=gretry.if_exception_type(gexc.TooManyRequests, gexc.ServiceUnavailable, gexc.InternalServerError),
            initial=self.retry_initial_s,
            maximum=30.0,
            multiplier=2.0,
            timeout=self.retry_timeout_s,
        )

    @staticmethod
    def _call(fn: Callable[[], Any], *, not_found_ok: bool = False) -> Any:
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as aexc

        try:
            return fn()
        except gexc.NotFound:
            if not_found_ok:
                return None
            raise
        except aexc.DefaultCredentialsError as e:
            hint = "run `gcloud auth application-default login`"
            raise CredentialsError("no GCP credentials found", hint=hint) from e
        except gexc.GoogleAPICallError as e:
            raise ProviderError(f"GCP compute call failed: {e.code} {e.message}") from e
        except gexc.RetryError as e:
            raise ProviderError(f"GCP compute call kept failing until the retry deadline: {e.cause}") from e

    # ---- Provider -----------------------------------------------------------------------------
    def billing_account(self) -> BillingAccountRef | None:
        """The project machines are created in: the configured one, else the one of the
        credentials (environment, credentials file, gcloud configuration: where google-auth's
        default() looks, without its metadata-server probe). Charges bill to the project."""
        project = self._project or _detect_project(self._env)
        return BillingAccountRef(id=project, name=f"GCP project {project}") if project else None

    def credentials(self) -> CredentialStatus:
        """Where credentials were found (files and env only; no network)."""
        project = self._project or _detect_project(self._env)
        if self._credentials is not None:
            status = CredentialStatus(self.name, True, "credentials passed in")
        elif self.api_endpoint and self.api_endpoint.startswith("http://"):
            status = CredentialStatus(self.name, True, "anonymous credentials")
        else:
            from launcher.providers.detect import enabled_clouds

            status = enabled_clouds(self._env)["gcp"]
        source = status.source
        if self.api_endpoint:
            source += f"; endpoint {self.api_endpoint}"
        if status.enabled and not project:
            return CredentialStatus(self.name, False, source + "; but no project (set GOOGLE_CLOUD_PROJECT)")
        return CredentialStatus(self.name, status.enabled, source, project)

    def provision(self, request: ClusterRequest) -> ClusterHandle:
        from launcher.providers.stack_backed import provision_stack

        extra = {"gcp_project": self._project or _detect_project(self._env)}
        return provision_stack(request, **{k: v for k, v in extra.items() if v})

    def terminate(self, handle: ClusterHandle) -> None:
        if handle.stack:
            from launcher.providers.stack_backed import destroy_stack

            destroy_stack(handle)
            return
        for node in handle.nodes:
            self.terminate_instance(handle.zone or handle.region, node.instance_id)

    def list_instances(self, tag_filter: dict[str, str] | None = None) -> list[InstanceInfo]:
        from infra.tags import gcp_label_filter

        want = gcp_label_filter({MANAGED_BY_TAG: MANAGED_BY_VALUE, **(tag_filter or {})})
        labels = " AND ".join(f'(labels.{k} = "{v}")' for k, v in want.items())
        statuses = " OR ".join(f"(status = {s})" for s in LIVE_STATUSES)
        found = self._aggregated(f"({labels}) AND ({statuses})")
        out = []
        for inst in found:
            # Check again client-side so a lax filter cannot widen the set to unmanaged instances.
            if all(inst.labels.get(k) == v for k, v in want.items()) and inst.status in LIVE_STATUSES:
                info = _to_info(inst)
                self._numeric_ids[(info.zone, info.instance_id)] = str(inst.id)
                out.append(info)
        return out

    def list_instances_partial(
        self, tag_filter: dict[str, str] | None = None
    ) -> tuple[list[InstanceInfo], dict[str, str]]:
        """Same shape as aws's: one aggregated listing covers every zone, so it is all or nothing."""
        try:
            return self.list_instances(tag_filter), {}
        except ProviderError as e:
            return [], {"all-zones": e.message}

    def _aggregated(self, filter_expr: str) -> list:
        compute_v1 = self._compute()
        request = compute_v1.AggregatedListInstancesRequest(
            project=self.project, filter=filter_expr, max_results=self.page_size
        )

        def collect() -> list:
            out = []
            # The pager follows nextPageToken; every zone of every region comes back in one listing.
            for _zone_key, scoped in self.instances_client().aggregated_list(request=request, retry=self._retry()):
                out.extend(scoped.instances)
            return out

        return self._call(collect)

    def _zone_of(self, where: str, name: str) -> str | None:
        """`where` is a zone (us-central1-a) or a region (us-central1); find the instance's zone."""
        if _is_zone(where):
            return where
        for inst in self._aggregated(f'(name = "{name}")'):
            zone = inst.zone.rsplit("/", 1)[-1]
            if zone.rsplit("-", 1)[0] == where:
                return zone
        return None

    def _get(self, zone: str, name: str):
        return self._call(
            lambda: self.instances_client().get(project=self.project, zone=zone, instance=name, retry=self._retry()),
            not_found_ok=True,
        )

    def instance_state(self, region: str, instance_id: str) -> str | None:
        zone = self._zone_of(region, instance_id)
        inst = self._get(zone, instance_id) if zone else None
        return _STATE.get(inst.status, inst.status.lower()) if inst else None

    def terminate_instance(self, region: str, instance_id: str) -> None:
        """Idempotent: a missing instance (404) is success. Waits for the delete operation."""
        zone = self._zone_of(region, instance_id)
        if zone is None:
            return
        op = self._call(
            lambda: self.instances_client().delete_unary(
                project=self.project, zone=zone, instance=instance_id, retry=self._retry()
            ),
            not_found_ok=True,
        )
        if op is not None:
            self._wait(zone, op)

    def stop_instance(self, region: str, instance_id: str) -> None:
        zone = self._zone_of(region, instance_id)
        if zone is None:
            return
        op = self._call(
            lambda: self.instances_client().stop_unary(
                project=self.project, zone=zone, instance=instance_id, retry=self._retry()
            ),
            not_found_ok=True,
        )
        if op is not None:
            self._wait(zone, op)

    def tag_instance(self, region: str, instance_id: str, tags: dict[str, str]) -> None:
        from infra.tags import to_gcp_labels

        self._set_labels(region, instance_id, lambda labels: {**labels, **to_gcp_labels(tags)})

    def untag_instance(self, region: str, instance_id: str, keys: list[str]) -> None:
        from infra.tags import gcp_label_key

        drop = {gcp_label_key(k) for k in keys}
        self._set_labels(region, instance_id, lambda labels: {k: v for k, v in labels.items() if k not in drop})

    def _set_labels(self, region: str, instance_id: str, change: Callable[[dict], dict]) -> None:
        from google.api_core import exceptions as gexc

        compute_v1 = self._compute()
        zone = self._zone_of(region, instance_id)
        for _ in range(3):  # the fingerprint guards against a concurrent writer; re-read and retry
            inst = self._get(zone, instance_id) if zone else None
            if inst is None:
                raise ProviderError(f"GCP instance {instance_id} not found in {region}")
            body = compute_v1.InstancesSetLabelsRequest(
                label_fingerprint=inst.label_fingerprint, labels=change(dict(inst.labels))
            )
            try:
                op = self.instances_client().set_labels_unary(
                    project=self.project,
                    zone=zone,
                    instance=instance_id,
                    instances_set_labels_request_resource=body,
                    retry=self._retry(),
                )
            except gexc.PreconditionFailed:
                continue
            except gexc.GoogleAPICallError as e:
                raise ProviderError(f"GCP setLabels failed: {e.code} {e.message}") from e
            self._wait(zone, op)
            return
        raise ProviderError(f"GCP labels of {instance_id} kept changing underneath us")

    def _wait(self, zone: str, op) -> None:
        import time

        compute_v1 = self._compute()
        deadline = time.monotonic() + self.operation_timeout_s
        while op.status != compute_v1.Operation.Status.DONE:
            if time.monotonic() > deadline:
                raise ProviderError(f"GCP operation {op.name} not done after {self.operation_timeout_s:.0f}s")
            # wait returns when the operation is done or after ~2 minutes, whichever comes first.
            op = self._call(
                lambda: self.operations_client().wait(
                    project=self.project, zone=zone, operation=op.name, retry=self._retry()
                )
            )
        if op.error and op.error.errors:
            errs = "; ".join(f"{e.code}: {e.message}" for e in op.error.errors)
            raise ProviderError(f"GCP operation {op.operation_type} on {op.target_link} failed: {errs}")

    # ---- idle signals (Cloud Monitoring) ---------------------------------------------------------
    def idle_signals(self, instance: InstanceInfo, window_minutes: int) -> IdleSignals:
        return self.idle_signals_many([instance], window_minutes)[instance.instance_id]

    def idle_signals_many(self, instances, window_minutes: int) -> dict[str, IdleSignals]:
        """CPU and busiest-GPU utilization per instance over the window, aligned by Cloud
        Monitoring at 60 s (ALIGN_MEAN for the level, ALIGN_MAX for "was it ever busy"); coverage
        counted in time (launcher.providers.metric_window). None = no data. A failing query
        (after api_core's bounded retries) leaves every instance's signals unknown (`error`)."""
        from launcher.providers import gcp_monitoring as mon
        from launcher.providers import metric_window as mw

        asked_until = self.clock()
        window = timedelta(minutes=window_minutes)
        period = 60 if window_minutes <= 180 else 300
        # Alignment periods end at the interval's end: a whole minute keeps them on the minute.
        until = datetime.fromtimestamp(int(asked_until.timestamp()) // period * period, tz=UTC)
        start = until - window - mw.LATE_ALLOWANCE
        endpoint = self.monitoring_endpoint or mon.DEFAULT_ENDPOINT
        retry = self._retry()

        def query(metric: str, aligner: str):
            project = self.project
            return self._call(
                retry(lambda: mon.aligned_series(self._get_json, endpoint, project, metric, start, until, period, aligner))
            )

        def points(metric: str, scale: float) -> dict[str, list[list]]:
            mean, peak = query(metric, "ALIGN_MEAN"), query(metric, "ALIGN_MAX")
            out: dict[str, list[list]] = {}
            for (nid, labels), values in mean.items():
                highs = peak.get((nid, labels), {})
                out.setdefault(nid, []).append([
                    mw.point(end - timedelta(seconds=period), period, v * scale, highs.get(end, v) * scale)
                    for end, v in sorted(values.items())
                ])
            return out

        try:
            cpu, gpu = points(mon.CPU_METRIC, 100.0), points(mon.GPU_METRIC, 1.0)  # CPU is a fraction
        except ProviderError as e:
            return {i.instance_id: IdleSignals(None, None, error=e.message) for i in instances}
        out: dict[str, IdleSignals] = {}
        for inst in instances:
            nid = self._numeric_id(inst)
            out[inst.instance_id] = mw.idle_signals(cpu.get(nid, []), gpu.get(nid, []), asked_until=asked_until, window=window)
        return out

    def _numeric_id(self, inst: InstanceInfo) -> str | None:
        key = (inst.zone, inst.instance_id)
        if key not in self._numeric_ids and inst.zone:
            got = self._get(inst.zone, inst.instance_id)
            if got is not None:
                self._numeric_ids[key] = str(got.id)
        return self._numeric_ids.get(key)

    def _get_json(self, url: str, params: dict) -> dict:
        """GET with the provider's credentials (anonymous for a local http:// endpoint)."""
        from google.api_core import exceptions as gexc

        with self._lazy_lock:
            if self._http is None:
                self._http = self._http_session()
        resp = self._http.get(url, params=params, timeout=60)
        if resp.status_code != 200:
            raise gexc.from_http_response(resp)
        return resp.json()

    def _http_session(self):
        """Anonymous for a local http:// monitoring endpoint without credentials, else authorized."""
        import requests

        local = bool(self.monitoring_endpoint and self.monitoring_endpoint.startswith("http://"))
        if local and self._credentials is None:
            return requests.Session()
        from google.auth.transport.requests import AuthorizedSession

        creds = self._credentials
        if creds is None:
            import google.auth

            from launcher.providers.gcp_monitoring import READ_SCOPE

            creds, _ = google.auth.default(scopes=[READ_SCOPE])
        return AuthorizedSession(creds)

    def was_preempted(self, region: str, instance_id: str) -> bool:
        """True when the zone has a `compute.instances.preempted` operation for this instance."""
        if not _is_zone(region):
            raise ValueError(f"was_preempted needs the instance's zone, got {region!r}")
        ops = self._call(
            lambda: list(
                self.operations_client().list(
                    request=self._compute().ListZoneOperationsRequest(
                        project=self.project, zone=region, filter=f'(operationType = "{PREEMPTED_OP}")'
                    ),
                    retry=self._retry(),
                )
            )
        )
        return any(op.target_link.rsplit("/", 1)[-1] == instance_id for op in ops)

    def preemption_notice_source(self) -> PreemptionNoticeSource:
        return GCP_NOTICE

    def preemption_notice(self, handle: ClusterHandle, running_s: float) -> str | None:
        """Seen from outside: a node's zone recorded `compute.instances.preempted`, or the node
        is gone or stopped. None while all are running."""
        where = handle.zone or handle.region
        for node in handle.nodes:
            state = self.instance_state(where, node.instance_id)
            if state in (None, "stopping", "stopped"):
                if _is_zone(where) and self.was_preempted(where, node.instance_id):
                    return f"instance {node.instance_id} preempted by GCE"
                return f"instance {node.instance_id} is {state or 'gone'}"
        return None


def _is_zone(where: str) -> bool:
    # Zones end with a letter suffix: us-central1-a; regions end with a digit: us-central1.
    return bool(where) and where.rsplit("-", 1)[-1].isalpha() and where.count("-") >= 2


def _to_info(inst) -> InstanceInfo:
    from infra.tags import from_gcp_labels

    zone = inst.zone.rsplit("/", 1)[-1]
    sched = inst.scheduling
    launched = None
    if inst.creation_timestamp:
        launched = datetime.fromisoformat(inst.creation_timestamp).astimezone(UTC)
    return InstanceInfo(
        provider="gcp",
        region=zone.rsplit("-", 1)[0],
        zone=zone,
        instance_id=inst.name,
        instance_type=inst.machine_type.rsplit("/", 1)[-1],
        state=_STATE.get(inst.status, inst.status.lower()),
        spot=sched.provisioning_model == "SPOT" or bool(sched.preemptible),
        tags=from_gcp_labels(dict(inst.labels)),
        launched_at=launched,
    )


def _detect_project(env) -> str | None:
    """Project from env, the credentials file, or the active gcloud configuration."""
    for var in PROJECT_ENVS:
        if env.get(var):
            return env[var]
    gcloud = Path(env.get("CLOUDSDK_CONFIG") or Path(env.get("HOME") or Path.home()) / ".config" / "gcloud")
    creds_file = env.get("GOOGLE_APPLICATION_CREDENTIALS") or str(gcloud / "application_default_credentials.json")
    try:
        data = json.loads(Path(creds_file).read_text())
        if data.get("project_id") or data.get("quota_project_id"):
            return data.get("project_id") or data.get("quota_project_id")
    except (OSError, ValueError):
        pass
    import configparser

    try:
        active = (gcloud / "active_config").read_text().strip() or "default"
    except OSError:
        active = "default"
    parser = configparser.RawConfigParser()
    try:
        parser.read(gcloud / "configurations" / f"config_{active}")
    except configparser.Error:
        return None
    return parser.get("core", "project", fallback=None)
