"""What SkyPilot knows about our clusters on declared infra, asked with a bound on every call.

Used where no attempt is being watched: the teardown of an attempt (`sky down`, then `sky status`
to see it gone), the cleanup after a controller died (what did its job do, is its cluster still
up), `launcher down gl-...` and `launcher doctor` (SkyPilot clusters the ledger thinks are gone).

SkyPilot's `get(request)` waits without a limit, so each call runs in a helper thread that is
given up on after its bound (the request itself is cancelled on the API server where that makes
sense). A job's end is read from SkyPilot's job table and from the exit line our run wrapper
prints (`[launcher] rank R exit_code=N`); the attempt's SkyPilot job id is kept in the run
directory when the launch returns, so a later process asks about the right job.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from launcher.errors import ProviderError

T = TypeVar("T")

CALL_TIMEOUT_S = 180.0  # one status / job-status / log request, API server start included
DOWN_TIMEOUT_S = 600.0  # `sky down` of one cluster (6-10 s seen; a busy Slurm controller is slower)
JOB_FILE = "a{attempt}-sky.json"  # in the run's exits/ folder, beside the local executor's records


def bounded(call: Callable[[], T], timeout_s: float, what: str, *, on_timeout: Callable[[], object] | None = None) -> T:
    """`call()` with a bound: ProviderError naming `what` when it has not returned in time
    (`on_timeout` runs first, e.g. to cancel the request)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, name=f"sky-{what}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        if on_timeout is not None:
            try:
                on_timeout()
            except Exception:  # noqa: BLE001 - the timeout is what we report
                pass
        raise ProviderError(f"SkyPilot did not answer {what} within {timeout_s:.0f}s", hint="is its API server overloaded? `launcher doctor` retries")
    if "error" in box:
        raise box["error"]
    return box.get("value")  # type: ignore[return-value]


def _gone(e: BaseException) -> bool:
    text = f"{type(e).__name__}: {e}".lower()
    return "does not exist" in text or "not found" in text or "clusterdoesnotexist" in text


def listed(sdk, names: Iterable[str] | None = None, *, timeout_s: float = CALL_TIMEOUT_S) -> dict[str, str]:
    """SkyPilot's clusters (only `names`, when given): name -> status (UP, INIT, STOPPED)."""
    wanted = None if names is None else sorted(set(names))
    if wanted == []:
        return {}
    rows = bounded(lambda: sdk.get(sdk.status(cluster_names=wanted)), timeout_s, "sky status")
    out = {}
    for r in rows or []:
        status = r["status"]
        out[str(r["name"])] = str(getattr(status, "value", status))
    return out


def launch_detail(sdk, name: str, *, timeout_s: float = CALL_TIMEOUT_S) -> str | None:
    """What a launching cluster waits for, as SkyPilot says it (e.g. `Launching (pending:
    Resources; partition: debug)` while its Slurm job is queued); None when it says nothing."""
    rows = bounded(lambda: sdk.get(sdk.status(cluster_names=[name])), timeout_s, "sky status")
    for r in rows or []:
        for key in ("init_status_reason", "last_event"):
            try:
                text = r[key]
            except (KeyError, TypeError):
                text = None
            if text:
                return str(text)
    return None


def down_verified(sdk, names: Sequence[str], *, only_listed: bool = False, timeout_s: float = DOWN_TIMEOUT_S) -> list[str]:
    """`sky down` each cluster, then ask SkyPilot whether any is still there. Returns the names
    it took down. `only_listed`: ask first and down only the clusters SkyPilot lists (sweeps);
    otherwise down each (an attempt's own cluster may be between launch and SkyPilot's record).
    ProviderError when a down fails or SkyPilot still lists a cluster afterwards."""
    targets = list(listed(sdk, names)) if only_listed else list(dict.fromkeys(names))
    downed, errors = [], []
    for name in targets:
        request: dict[str, Any] = {}

        def down(name=name, request=request):
            request["id"] = sdk.down(name)
            return sdk.get(request["id"])

        try:
            bounded(down, timeout_s, f"sky down {name}", on_timeout=lambda request=request: request.get("id") and sdk.api_cancel(request["id"]))
            downed.append(name)
        except Exception as e:  # noqa: BLE001 - judged below, by asking SkyPilot
            if not _gone(e):
                from launcher.executors.sky_server import request_log_tail

                tail = request_log_tail(request.get("id"))
                errors.append(f"sky down {name} failed: {e}" + (f"\n{tail}" if tail else ""))
    left = listed(sdk, targets) if targets else {}
    if left:
        shown = ", ".join(f"{n} ({s})" for n, s in sorted(left.items()))
        raise ProviderError(
            f"SkyPilot still lists {shown} after `sky down`" + ("".join(f"\n{e}" for e in errors)),
            hint=f"`launcher down {sorted(left)[0]}` retries; `launcher doctor` finds what is left",
        )
    return downed


# ---- the attempt's SkyPilot job, kept for whoever looks after a crash ---------------------------
def job_file(run_dir: Path, attempt: int) -> Path:
    from launcher.executors.job_status import exits_dir

    return exits_dir(run_dir) / JOB_FILE.format(attempt=attempt)


def record_job(run_dir: Path, attempt: int, cluster: str, job_id: int | None) -> None:
    from launcher.atomic import atomic_write_text

    path = job_file(run_dir, attempt)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"cluster": cluster, "job_id": job_id}))
    except OSError:
        pass  # best effort: without it cleanup asks for the cluster's latest job


def recorded_job_id(run_dir: Path, attempt: int) -> int | None:
    try:
        value = json.loads(job_file(run_dir, attempt).read_text()).get("job_id")
        return int(value) if value is not None else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def job_status(sdk, name: str, job_id: int | None, *, timeout_s: float = CALL_TIMEOUT_S) -> tuple[int | None, str | None]:
    """(job id, SkyPilot's status name) of the attempt's job; (None, None) when the cluster or
    the job does not exist. `job_id` None: the cluster's latest job."""
    try:
        statuses = bounded(lambda: sdk.get(sdk.job_status(name, job_ids=None if job_id is None else [job_id])), timeout_s,
                           f"sky job status of {name}")  # fmt: skip
    except ProviderError:
        raise
    except Exception as e:  # noqa: BLE001
        if _gone(e) or "not up" in str(e).lower():
            return None, None
        raise ProviderError(f"SkyPilot cannot tell the job status on {name}: {type(e).__name__}: {e}") from None
    for jid, status in (statuses or {}).items():
        if status is None:
            continue
        return (jid if jid is not None else job_id), str(getattr(status, "value", status))
    return None, None


def fetch_log(sdk, name: str, job_id: int | None, log: Path, secrets: Sequence[str], *, timeout_s: float = CALL_TIMEOUT_S) -> bool:
    """Replace `log` with the job's whole output as SkyPilot kept it (redacted, terminal escapes
    removed): what the dead controller's stream missed. False (log untouched) when it fails."""
    from launcher.executors.redaction import stream_into_log

    tmp = log.with_name(log.name + ".fetch")
    tmp.unlink(missing_ok=True)
    failed: list[BaseException] = []

    def produce(out):
        try:
            sdk.tail_logs(name, job_id, follow=False, output_stream=out)
        except BaseException as e:  # noqa: BLE001
            failed.append(e)

    try:
        bounded(lambda: stream_into_log(tmp, secrets, produce), timeout_s, f"sky logs of {name}")
    except ProviderError:
        return False
    if failed or not tmp.exists() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        return False
    tmp.replace(log)
    return True
