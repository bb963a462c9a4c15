"""AWS provider (boto3, imported lazily): credentials, managed instances across regions,
idempotent termination, CloudWatch idle signals. Clusters are provisioned by infra/ (Pulumi).

Endpoints: boto3 honours the standard `AWS_ENDPOINT_URL` (and per-service variants), which is
how tests point it at a real moto_server; `endpoint_url=` overrides it explicitly.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from launcher.errors import CredentialsError, LauncherError, ProviderError
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
from launcher.providers.aws_placement_scores import spot_placement_scores
from launcher.providers.notice import AWS_NOTICE, PreemptionNoticeSource
from pricing.models import Offer

log = logging.getLogger(__name__)

# Regions with broad GPU capacity; scanned when neither `regions=` nor LAUNCHER_AWS_REGIONS is set.
# `regions="all"` asks EC2 DescribeRegions instead.
DEFAULT_GPU_REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-west-2",
    "ca-central-1",
    "eu-west-1",
    "eu-west-2",
    "eu-central-1",
    "eu-north-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "sa-east-1",
)
REGIONS_ENV = "LAUNCHER_AWS_REGIONS"

# EC2 instance states -> our normalized ones. `shutting-down` is on its way out (no more billing).
_STATE = {
    "pending": "pending",
    "running": "running",
    "stopping": "stopping",
    "stopped": "stopped",
    "shutting-down": "terminated",
    "terminated": "terminated",
}
LIVE_EC2_STATES = ["pending", "running", "stopping", "stopped"]
SPOT_RECLAIM_CODE = "Server.SpotInstanceTermination"

# CloudWatch: CPU from the hypervisor; GPU only where the CloudWatch agent publishes nvidia_smi
# metrics (one series per GPU, dimensions InstanceId + index + name + ...).
CPU_NAMESPACE, CPU_METRIC = "AWS/EC2", "CPUUtilization"
GPU_NAMESPACE, GPU_METRIC = "CWAgent", "nvidia_smi_utilization_gpu"
_MAX_QUERIES = 500  # GetMetricData limit per call

# Credential sources as botocore names them -> what we tell the user.
_SOURCES = {
    "env": "environment variables (AWS_ACCESS_KEY_ID)",
    "shared-credentials-file": "shared credentials file",
    "config-file": "AWS config file",
    "iam-role": "instance IAM role (IMDS)",
    "container-role": "container IAM role",
    "assume-role": "assume-role profile",
    "sso": "SSO profile",
}


class AwsProvider(Provider):
    name = "aws"

    def __init__(
        self,
        regions: Sequence[str] | str | None = None,
        *,
        endpoint_url: str | None = None,
        max_workers: int = 8,
        retry_mode: str = "adaptive",
        max_attempts: int = 8,
        page_size: int = 500,
        clock: Callable[[], datetime] | None = None,
        session: Any = None,
    ) -> None:
        self._regions_arg = regions
        self.endpoint_url = endpoint_url
        self.max_workers = max_workers
        self.retry_mode = retry_mode
        self.max_attempts = max_attempts
        self.page_size = page_size  # EC2 MaxResults (5..1000), counted in reservations
        self.max_queries_per_call = _MAX_QUERIES
        self.clock = clock or (lambda: datetime.now(UTC))
        self._session = session
        self._clients: dict[tuple[str, str, bool], Any] = {}
        # boto3 sessions are not thread-safe (clients are): the region scan's threads make
        # their clients one at a time.
        self._clients_lock = threading.Lock()
        self._billing_account: BillingAccountRef | None = None

    # ---- plumbing -----------------------------------------------------------------------------
    def _boto_session(self) -> Any:
        if self._session is None:
            try:
                import boto3
            except ImportError as e:  # pragma: no cover - depends on the install
                raise ProviderError("boto3 is not installed", hint="pip install 'gpu-launcher[aws]'") from e
            self._session = boto3.Session()
        return self._session

    def client(self, service: str, region: str, *, quick: bool = False) -> Any:
        """A cached boto3 client with retries on throttling (botocore retry modes). `quick`: short
        timeouts and two attempts, for calls whose answer is only a hint (a few seconds at most)."""
        key = (service, region, quick)
        with self._clients_lock:
            if key not in self._clients:
                from botocore.config import Config

                if quick:
                    cfg = Config(retries={"mode": "standard", "total_max_attempts": 2}, connect_timeout=3, read_timeout=5)
                else:
                    # GetMetricData over 500 series may answer slower than botocore's 60 s default;
                    # a timed-out call retried would only ask again for the same work.
                    timeout = {"read_timeout": 180} if service == "cloudwatch" else {}
                    cfg = Config(retries={"mode": self.retry_mode, "total_max_attempts": self.max_attempts}, **timeout)
                kwargs: dict[str, Any] = {"region_name": region, "config": cfg}
                if self.endpoint_url:
                    kwargs["endpoint_url"] = self.endpoint_url
                self._clients[key] = self._boto_session().client(service, **kwargs)
            return self._clients[key]

    def regions(self) -> list[str]:
        arg = self._regions_arg
        if arg is None and os.environ.get(REGIONS_ENV):
            arg = os.environ[REGIONS_ENV]
            arg = "all" if arg.strip() == "all" else [r.strip() for r in arg.split(",") if r.strip()]
        if arg == "all":
            resp = self._api(lambda: self.client("ec2", self._home_region()).describe_regions())
            return sorted(r["RegionName"] for r in resp["Regions"])
        if arg is None:
            return list(DEFAULT_GPU_REGIONS)
        return [arg] if isinstance(arg, str) else list(arg)

    def _home_region(self) -> str:
        return self._boto_session().region_name or "us-east-1"

    @staticmethod
    def _api(call: Callable[[], Any], *, ok_codes: tuple[str, ...] = ()) -> Any:
        """Run one API call; botocore already retried throttling. Map failures to ProviderError."""
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
        from botocore.parsers import ResponseParserError

        try:
            return call()
        except NoCredentialsError as e:
            raise CredentialsError("no AWS credentials found", hint="set AWS_PROFILE or AWS_ACCESS_KEY_ID") from e
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in ok_codes:
                return None
            message = e.response["Error"].get("Message", "")
            raise ProviderError(f"AWS {e.operation_name} failed: {code}: {message}") from e
        except BotoCoreError as e:
            raise ProviderError(f"AWS call failed: {e}") from e
        except ResponseParserError as e:  # e.g. an HTML error page from a proxy or an emulator
            raise ProviderError(f"AWS call failed: the endpoint's answer could not be read ({str(e)[:120]})") from e

    # ---- Provider -----------------------------------------------------------------------------
    def credentials(self, *, verify: bool = False) -> CredentialStatus:
        """Where credentials are. Default: files and env only (launcher.providers.detect, no
        boto3, no network). verify=True lets boto3 resolve them (incl. SSO and instance roles)
        and asks STS whose they are."""
        endpoint = self.endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
        suffix = f"; endpoint {endpoint}" if endpoint else ""
        if not verify:
            from launcher.providers.detect import enabled_clouds

            status = enabled_clouds()["aws"]
            source = status.source if endpoint is None or endpoint in status.source else status.source + suffix
            return CredentialStatus(self.name, status.enabled, source)
        try:
            session = self._boto_session()
            creds = session.get_credentials()
        except ProviderError as e:
            return CredentialStatus(self.name, False, e.message)
        if creds is None:
            return CredentialStatus(self.name, False, "no credentials in env, shared file, config or instance role")
        source = _SOURCES.get(creds.method, creds.method)
        if creds.method in ("shared-credentials-file", "config-file", "assume-role", "sso"):
            source += f" (profile {session.profile_name})"
        ident = self._api(lambda: self.client("sts", self._home_region()).get_caller_identity())
        return CredentialStatus(self.name, True, source + suffix, ident["Account"])

    def billing_account(self) -> BillingAccountRef | None:
        """The account of these credentials (STS GetCallerIdentity, which needs no IAM
        permission), asked once per provider."""
        if self._billing_account is None:
            try:
                ident = self._api(lambda: self.client("sts", self._home_region()).get_caller_identity())
            except LauncherError as e:
                log.info("aws: billing account unknown (%s)", e.message)
                return None
            account = str(ident["Account"])
            self._billing_account = BillingAccountRef(id=account, name=f"AWS account {account}")
        return self._billing_account

    def provision(self, request: ClusterRequest) -> ClusterHandle:
        from launcher.providers.stack_backed import provision_stack

        return provision_stack(request)

    def terminate(self, handle: ClusterHandle) -> None:
        if handle.stack:
            from launcher.providers.stack_backed import destroy_stack

            destroy_stack(handle)
            return
        # No stack (an orphan or a half-made cluster): terminate its instances directly.
        for node in handle.nodes:
            self.terminate_instance(handle.region, node.instance_id)

    def list_instances(self, tag_filter: dict[str, str] | None = None) -> list[InstanceInfo]:
        found, errors = self.list_instances_partial(tag_filter)
        if errors:
            detail = "; ".join(f"{region}: {msg}" for region, msg in sorted(errors.items()))
            raise ProviderError(f"listing AWS instances failed in {len(errors)} region(s): {detail}")
        return found

    def list_instances_partial(
        self, tag_filter: dict[str, str] | None = None
    ) -> tuple[list[InstanceInfo], dict[str, str]]:
        """Regions in parallel; a region that fails (after botocore's retries) is reported in the
        second value instead of hiding the others (the reaper acts on what it could see)."""
        regions = self.regions()

        def one(region: str) -> tuple[str, list[InstanceInfo] | None, str | None]:
            try:
                return region, self._list_region(region, tag_filter), None
            except ProviderError as e:
                return region, None, e.message

        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(regions)) or 1) as pool:
            results = list(pool.map(one, regions))
        found = [inst for _r, chunk, _e in results if chunk for inst in chunk]
        return found, {r: err for r, _chunk, err in results if err is not None}

    def _list_region(self, region: str, tag_filter: dict[str, str] | None) -> list[InstanceInfo]:
        want = {MANAGED_BY_TAG: MANAGED_BY_VALUE, **(tag_filter or {})}
        filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in want.items()]
        filters.append({"Name": "instance-state-name", "Values": LIVE_EC2_STATES})
        paginator = self.client("ec2", region).get_paginator("describe_instances")
        out: list[InstanceInfo] = []

        def pages() -> None:
            # Pages count reservations, not instances (moto and EC2 alike); one run_instances
            # call of N instances is one reservation.
            for page in paginator.paginate(Filters=filters, PaginationConfig={"PageSize": self.page_size}):
                for res in page["Reservations"]:
                    out.extend(_to_info(inst, region) for inst in res["Instances"])

        self._api(pages)
        # Tag filters are ANDed by EC2; check again so a lax endpoint cannot widen the set.
        return [i for i in out if all(i.tags.get(k) == v for k, v in want.items())]

    def _describe(self, region: str, instance_id: str) -> dict | None:
        resp = self._api(
            lambda: self.client("ec2", region).describe_instances(InstanceIds=[instance_id]),
            ok_codes=("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"),
        )
        if not resp:
            return None
        for res in resp["Reservations"]:
            for inst in res["Instances"]:
                return inst
        return None

    def instance_state(self, region: str, instance_id: str) -> str | None:
        inst = self._describe(region, instance_id)
        return _STATE.get(inst["State"]["Name"], inst["State"]["Name"]) if inst else None

    def was_preempted(self, region: str, instance_id: str) -> bool:
        inst = self._describe(region, instance_id)
        return bool(inst and inst.get("StateReason", {}).get("Code") == SPOT_RECLAIM_CODE)

    def spot_placement_scores(self, offers: Sequence[Offer], num_nodes: int) -> dict[Offer, int]:
        """EC2 spot placement scores per offer (`aws_placement_scores`); needs ec2:GetSpotPlacementScores
        and ec2:DescribeAvailabilityZones. Quick clients: the scores only order the plan's zones."""
        return spot_placement_scores(offers, num_nodes, client=lambda r: self.client("ec2", r, quick=True), api=self._api,
                                     query_region=self._home_region())  # fmt: skip

    def terminate_instance(self, region: str, instance_id: str) -> None:
        """Idempotent: an unknown or already-terminated instance is success."""
        self._api(
            lambda: self.client("ec2", region).terminate_instances(InstanceIds=[instance_id]),
            ok_codes=("InvalidInstanceID.NotFound",),
        )

    def stop_instance(self, region: str, instance_id: str) -> None:
        self._api(
            lambda: self.client("ec2", region).stop_instances(InstanceIds=[instance_id]),
            ok_codes=("InvalidInstanceID.NotFound", "IncorrectInstanceState"),
        )

    def tag_instance(self, region: str, instance_id: str, tags: dict[str, str]) -> None:
        self._api(
            lambda: self.client("ec2", region).create_tags(
                Resources=[instance_id], Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
            )
        )

    def untag_instance(self, region: str, instance_id: str, keys: list[str]) -> None:
        self._api(
            lambda: self.client("ec2", region).delete_tags(Resources=[instance_id], Tags=[{"Key": k} for k in keys])
        )

    def preemption_notice_source(self) -> PreemptionNoticeSource:
        return AWS_NOTICE

    def preemption_notice(self, handle: ClusterHandle, running_s: float) -> str | None:
        """Seen from outside (one DescribeInstances for the cluster): a node reclaimed by EC2,
        a spot request marked for termination, or a node gone. None while all are healthy."""
        ids = [n.instance_id for n in handle.nodes]
        if not ids:
            return None
        ec2 = self.client("ec2", handle.region)
        resp = self._api(lambda: ec2.describe_instances(InstanceIds=ids), ok_codes=("InvalidInstanceID.NotFound",))
        found = {i["InstanceId"]: i for r in (resp or {}).get("Reservations", []) for i in r["Instances"]}
        for iid in ids:
            inst = found.get(iid)
            if inst is None:
                return f"instance {iid} is gone"
            if inst.get("StateReason", {}).get("Code") == SPOT_RECLAIM_CODE:
                return f"instance {iid} reclaimed by EC2 (spot)"
            if _STATE.get(inst["State"]["Name"]) in ("terminated", "stopping", "stopped"):
                return f"instance {iid} is {inst['State']['Name']}"
        spot_requests = [i["SpotInstanceRequestId"] for i in found.values() if i.get("SpotInstanceRequestId")]
        if spot_requests:
            resp = self._api(
                lambda: ec2.describe_spot_instance_requests(SpotInstanceRequestIds=spot_requests),
                ok_codes=("InvalidSpotInstanceRequestID.NotFound",),
            )
            for req in (resp or {}).get("SpotInstanceRequests", []):
                code = req.get("Status", {}).get("Code", "")
                if code.startswith("marked-for-") or code.startswith("instance-terminated"):
                    return f"spot request {req['SpotInstanceRequestId']}: {code}"
        return None

    # ---- idle signals (CloudWatch) --------------------------------------------------------------
    def idle_signals(self, instance: InstanceInfo, window_minutes: int) -> IdleSignals:
        return self.idle_signals_many([instance], window_minutes)[instance.instance_id]

    def idle_signals_many(self, instances: Sequence[InstanceInfo], window_minutes: int) -> dict[str, IdleSignals]:
        """CPU and GPU utilization over the window, batched per region (500 queries a call).

        Each metric is asked at the period it really has (CPU: 300 s basic monitoring, 60 s
        detailed; the agent's GPU series at 60 s, then taken at the spacing of its points), with
        Average for the level and Maximum for "was it ever busy"; coverage is counted in time
        (launcher.providers.metric_window). GPU: the busiest GPU per period; None where the
        CloudWatch agent publishes no nvidia_smi metrics. A region whose calls fail (after
        botocore's bounded retries) or answer only partly gives its instances `error`: unknown."""
        from launcher.providers.metric_window import LATE_ALLOWANCE

        asked_until = self.clock()
        window = timedelta(minutes=window_minutes)
        start = _floor(asked_until - window - LATE_ALLOWANCE, 300)
        end = _floor(asked_until, 60) + timedelta(seconds=60)
        by_region: dict[str, list[InstanceInfo]] = {}
        for inst in instances:
            by_region.setdefault(inst.region, []).append(inst)
        result: dict[str, IdleSignals] = {}
        for region, insts in by_region.items():
            try:
                result.update(self._idle_region(region, insts, start, end, asked_until, window))
            except ProviderError as e:  # one region's monitoring failing never hides the others
                result.update({i.instance_id: IdleSignals(None, None, error=e.message) for i in insts})
        return result

    def _idle_region(self, region, insts, start, end, asked_until, window) -> dict[str, IdleSignals]:
        from launcher.providers import metric_window as mw

        long_window = window > timedelta(minutes=180)  # 60 s points over days: too many to read
        cw = self.client("cloudwatch", region)
        gpu_series = self._gpu_series(cw, {i.instance_id for i in insts})
        queries: list[dict] = []
        owner: dict[str, tuple[str, str, int]] = {}  # query id prefix -> (instance id, "cpu"|"gpu", period)
        for n, inst in enumerate(insts):
            period = inst.metrics_period_s or 300
            period = max(period, 300) if long_window else period
            series = [("c", CPU_NAMESPACE, CPU_METRIC, [("InstanceId", inst.instance_id)], "cpu", period)]
            gpu_period = 300 if long_window else 60
            series += [(f"g{m}_", GPU_NAMESPACE, GPU_METRIC, dims, "gpu", gpu_period)
                       for m, dims in enumerate(gpu_series.get(inst.instance_id, ()))]
            for prefix, ns, metric, dims, kind, p in series:
                key = f"{prefix}{n}"
                owner[key] = (inst.instance_id, kind, p)
                queries += [_metric_query(f"{key}a", ns, metric, dims, p, "Average"),
                            _metric_query(f"{key}m", ns, metric, dims, p, "Maximum")]
        answers: dict[str, dict[datetime, float]] = {q["Id"]: {} for q in queries}
        status: dict[str, str] = {}
        step = self.max_queries_per_call
        for i in range(0, len(queries), step):
            batch = queries[i : i + step]
            kwargs = {"MetricDataQueries": batch, "StartTime": start, "EndTime": end}
            self._api(lambda: _collect_metric_data(cw, kwargs, answers, status))
        cpu: dict[str, list] = {}
        gpu: dict[str, list[list]] = {}
        failed: dict[str, str] = {}
        for key, (iid, kind, asked_s) in owner.items():
            bad = [f"{status[q]}" for q in (f"{key}a", f"{key}m") if status.get(q, "Complete") != "Complete"]
            if bad:
                failed.setdefault(iid, f"CloudWatch answered {bad[0]} for {CPU_METRIC if kind == 'cpu' else GPU_METRIC}")
                continue
            avg, peak = answers[f"{key}a"], answers[f"{key}m"]
            period = mw.native_period_s(list(avg), asked_s)
            points = [mw.point(ts, period, v, peak.get(ts)) for ts, v in sorted(avg.items())]
            if kind == "cpu":
                cpu[iid] = points
            else:
                gpu.setdefault(iid, []).append(points)
        out: dict[str, IdleSignals] = {}
        for inst in insts:
            iid = inst.instance_id
            if iid in failed:
                out[iid] = IdleSignals(None, None, error=failed[iid])
                continue
            out[iid] = mw.idle_signals([cpu.get(iid, [])], gpu.get(iid, []), asked_until=asked_until, window=window)
        return out

    def _gpu_series(self, cw, instance_ids: set[str]) -> dict[str, list[list[tuple[str, str]]]]:
        """Dimension sets of the agent's GPU series (one per GPU) for these instances: one paged
        ListMetrics per region rather than one call per instance."""
        out: dict[str, list[list[tuple[str, str]]]] = {}

        def pages() -> None:
            kwargs = {"Namespace": GPU_NAMESPACE, "MetricName": GPU_METRIC}
            while True:
                resp = cw.list_metrics(**kwargs)
                for m in resp.get("Metrics", []):
                    dims = [(d["Name"], d["Value"]) for d in m["Dimensions"]]
                    iid = dict(dims).get("InstanceId")
                    if iid in instance_ids:
                        out.setdefault(iid, []).append(dims)
                token = resp.get("NextToken")
                if not token:
                    return
                kwargs["NextToken"] = token

        self._api(pages)
        return out


def _floor(ts: datetime, step_s: int) -> datetime:
    epoch = int(ts.timestamp())
    return datetime.fromtimestamp(epoch - epoch % step_s, tz=UTC)


def _metric_query(qid: str, namespace: str, metric: str, dims: list[tuple[str, str]], period: int, stat: str) -> dict:
    return {
        "Id": qid,
        "MetricStat": {
            "Metric": {
                "Namespace": namespace,
                "MetricName": metric,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dims],
            },
            "Period": period,
            "Stat": stat,
        },
        "ReturnData": True,
    }


def _collect_metric_data(cw, kwargs: dict, answers: dict[str, dict[datetime, float]], status: dict[str, str]) -> None:
    """All pages of one GetMetricData call. A result's StatusCode is PartialData while more pages
    follow; what is not Complete once the pages end (InternalError, Forbidden, PartialData
    without a next page) is recorded, and that instance's signals are unknown."""
    token = None
    while True:
        resp = cw.get_metric_data(**kwargs, **({"NextToken": token} if token else {}))
        for r in resp["MetricDataResults"]:
            got = answers[r["Id"]]
            for ts, v in zip(r.get("Timestamps", []), r.get("Values", []), strict=False):
                got[ts.astimezone(UTC)] = float(v)
            status[r["Id"]] = r.get("StatusCode", "Complete")
        token = resp.get("NextToken")
        if not token:
            return


def _to_info(inst: dict, region: str) -> InstanceInfo:
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
    placement = inst.get("Placement", {})
    return InstanceInfo(
        provider="aws",
        region=region,
        zone=placement.get("AvailabilityZone"),
        instance_id=inst["InstanceId"],
        instance_type=inst.get("InstanceType", ""),
        state=_STATE.get(inst["State"]["Name"], inst["State"]["Name"]),
        # The `instance-lifecycle` filter is not supported everywhere (moto); the field is.
        spot=inst.get("InstanceLifecycle") == "spot",
        tags=tags,
        launched_at=inst.get("LaunchTime"),
        metrics_period_s=60 if inst.get("Monitoring", {}).get("State") == "enabled" else 300,
    )
