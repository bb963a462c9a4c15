"""Who may run jobs on the server's own machine (`--cloud local`), and as whom.

A job on the local backend runs on the server's machine. In the server's own user it could read
the server's files and its processes' environments (the database URL, cloud credentials), so:

| submitter's role in the run's project | `--local-jobs-user` unset (default) | `--local-jobs-user USER` |
|---|---|---|
| admin | runs as the server's user (admins hold the keys anyway) | same |
| member | local offers are dropped from the plan; a plan of only local offers is refused (403, exit 3) | runs as USER (launcher.executors.job_user) |

Either way the job's environment is the allow-list of launcher.executors.job_env. The check runs
when the run is submitted and again when a replica starts driving it (a run queued before the
setting changed, or a role removed since).
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.server.auth import Principal, principal_of
from launcher.server.errors import ForbiddenError

REFUSAL = (
    "this server does not run `--cloud local` jobs of non-admins: they would run on the server's machine "
    "as its own user, next to its database credentials"
)
HINT = "launch on a cloud or a cluster the project may use, or ask the server's operator for `launcher server --local-jobs-user USER`"


class LocalJobsRefusedError(ForbiddenError):
    """A non-admin's run that can only run on the server's machine (HTTP 403, exit 3)."""


@dataclass(frozen=True)
class LocalJobs:
    run_as: tuple | None = None  # (JobUser, setpriv) from executors.job_user.resolve_job_user

    def decide(self, principal: Principal, project: str) -> tuple[tuple | None, str | None]:
        """(run_as, refusal) for a run of `principal` in `project`: (None, None) runs it as the
        server; (user, None) as that user; (None, reason) refuses local offers."""
        if principal.can("admin", project):
            return None, None
        if self.run_as is not None:
            return self.run_as, None
        return None, REFUSAL

    def decide_for_run(self, ledger, run_id: str) -> tuple[tuple | None, str | None]:
        submitted_by = ledger.lease(run_id).submitted_by
        return self.decide(principal_of(ledger, submitted_by), ledger.get_run(run_id).project)
