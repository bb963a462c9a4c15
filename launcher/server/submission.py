"""What `launch SPEC --submit` sends to the server, and how the server records it.

The client plans and budget-checks as a local launch does, then sends the spec text, the plan,
the launch options, the provenance it collected and a gzipped tar of the spec's workdir. The
server lays out the run directory exactly as `launch` would (controller.runner.prepare_run),
records the run PENDING and puts it in the lease queue; a replica picks it up.
"""

from __future__ import annotations

import base64
import io
import shutil
import tarfile
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from launcher.errors import BadInputError
from launcher.spec.loader import LoadedSpec

MAX_WORKDIR_BYTES = 64 * 1024 * 1024  # the compressed tar; bigger workdirs belong in a bucket


class Submission(BaseModel):
    """The request body of POST /api/v1/runs."""

    model_config = ConfigDict(extra="forbid")

    spec_yaml: str
    spec_name: str | None = None
    plan: dict[str, Any]
    options: dict[str, Any]
    provenance: dict[str, Any]
    workdir_tgz_b64: str | None = None


@dataclass(frozen=True)
class _SubmittedSpec(LoadedSpec):
    """A LoadedSpec whose workdir is the unpacked copy the client sent."""

    unpacked_workdir: Path | None = None

    @property
    def workdir(self) -> Path | None:  # type: ignore[override]
        return self.unpacked_workdir


def _tar_workdir(workdir: Path) -> bytes:
    """The workdir as `launch` would copy it (same rules: no links followed, no special files,
    never LAUNCHER_HOME), as a gzipped tar."""
    from launcher import paths
    from launcher.spec.workdir import walk_workdir

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:

        def add(rel: str, kind: str) -> None:
            tar.add(workdir / rel, arcname=rel, recursive=False)

        walk_workdir(workdir, excluded=[paths.home()], on_entry=add)
    data = buf.getvalue()
    if len(data) > MAX_WORKDIR_BYTES:
        raise BadInputError(
            f"workdir {workdir} is {len(data) / 2**20:.0f} MiB compressed; the server takes at most {MAX_WORKDIR_BYTES // 2**20} MiB",
            hint="put data in a bucket and mount it (file_mounts)",
        )
    return data


def make_submission(loaded: LoadedSpec, plan, options, prov) -> Submission:
    from launcher.planning.plan import plan_to_dict

    wd = loaded.workdir
    return Submission(
        spec_yaml=loaded.text,
        spec_name=loaded.path.name if loaded.path else None,
        plan=plan_to_dict(plan),
        options=asdict(options),
        provenance={k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in asdict(prov).items()},
        workdir_tgz_b64=base64.b64encode(_tar_workdir(wd)).decode() if wd is not None else None,
    )


def parse_submission(body: Any) -> Submission:
    try:
        return Submission.model_validate(body)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        raise BadInputError(f"bad submission: {where}: {err['msg']}") from None


def record_submission(sub: Submission, ledger, *, submitted_by: str, refuse_local: str | None = None) -> str:
    """Validate, lay out the run directory, record the run and queue it. Returns the run id.
    `ledger` is a LeaseLedger. Bad input raises BadInputError before anything is written.
    `refuse_local` (a reason): the plan's local offers are dropped; a plan of nothing else is
    refused (LocalJobsRefusedError) before anything is written."""
    from launcher.controller.runner import LaunchOptions, prepare_run, run_dir
    from launcher.planning.plan import plan_from_dict
    from launcher.provenance import Provenance
    from launcher.spec.loader import load_spec_text

    known = {f.name for f in fields(LaunchOptions)}
    unknown = sorted(set(sub.options) - known)
    if unknown:
        raise BadInputError(f"bad submission: unknown launch option {unknown[0]!r}")
    try:
        prov_data = dict(sub.provenance)
        prov_data["created_at"] = datetime.fromisoformat(prov_data["created_at"])
        prov = Provenance(**prov_data)
        plan = plan_from_dict(sub.plan)
        options = LaunchOptions(**{**sub.options, "spec_path": None, "base_dir": None})
    except (KeyError, TypeError, ValueError) as e:
        raise BadInputError(f"bad submission: {type(e).__name__}: {e}") from None
    if refuse_local:
        plan = _without_local(plan, refuse_local)
    if not prov.run_id.startswith("r-") or "/" in prov.run_id or ".." in prov.run_id:
        raise BadInputError(f"bad submission: run id {prov.run_id!r}")
    rd = run_dir(prov.run_id)
    if rd.exists():
        raise BadInputError(f"run {prov.run_id} was already submitted")
    unpacked: Path | None = None
    rd.mkdir(parents=True, mode=0o700)
    try:
        if sub.workdir_tgz_b64 is not None:
            unpacked = rd / ".submitted-workdir"
            _unpack(sub.workdir_tgz_b64, unpacked)
        base = load_spec_text(sub.spec_yaml, base_dir=rd)
        loaded = _SubmittedSpec(base.spec, base.text, None, rd, unpacked_workdir=unpacked if base.spec.workdir else None)
        run_id = prepare_run(loaded, plan, options, ledger, prov)
    except BaseException as e:
        shutil.rmtree(rd, ignore_errors=True)
        _fail_recorded(ledger, prov.run_id, e)
        raise
    finally:
        if unpacked is not None:
            shutil.rmtree(unpacked, ignore_errors=True)
    ledger.submit_lease(run_id, submitted_by=submitted_by)
    return run_id


def _fail_recorded(ledger, run_id: str, e: BaseException) -> None:
    """A run recorded before its directory could be laid out (e.g. a full disk) is never queued:
    end it FAILED with the reason instead of leaving it pending forever. Best effort."""
    from launcher.controller.disk_space import as_disk_full
    from launcher.ledger.records import EndReason, RunState

    try:
        if ledger.get_run(run_id).state != RunState.PENDING:
            return
        reason = EndReason.DISK_FULL if as_disk_full(e) is not None else EndReason.PROVISION_FAILED
        with ledger.transaction():
            ledger.add_event(run_id, "submission_failed", {"error": str(getattr(e, "message", e))[:500]})
            ledger.set_run_state(run_id, RunState.FAILED, reason=reason, expected_from=RunState.PENDING)
    except Exception:
        pass


def _without_local(plan, reason: str):
    from dataclasses import replace

    from launcher.server.local_jobs import HINT, LocalJobsRefusedError

    kept = tuple(c for c in plan.candidates if c.scored.offer.cloud != "local")
    if not kept:
        raise LocalJobsRefusedError(reason, hint=HINT)
    return replace(plan, candidates=kept)


def _unpack(b64: str, dest: Path) -> None:
    try:
        data = base64.b64decode(b64, validate=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(dest, filter="data")  # refuses absolute paths, .. and odd members
    except (ValueError, tarfile.TarError) as e:
        raise BadInputError(f"bad submission: workdir archive: {e}") from None


def submit_to_server(settings, loaded: LoadedSpec, plan, options, prov) -> str:
    """`launch --submit`: send the planned run to the server; its run id. `settings` is
    server.settings.ServerSettings (None: no server configured)."""
    from launcher.server.client import ServerClient

    if settings is None:
        raise BadInputError("--submit needs a server", hint="pass --server URL, set LAUNCHER_SERVER or `server:` in ~/.launcher/config.yaml")
    sub = make_submission(loaded, plan, options, prov)
    return ServerClient(settings.urls, settings.token).submit(sub.model_dump())
