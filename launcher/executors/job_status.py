"""A local job's exit status that outlives its controller.

Each rank runs under a small bash wrapper (`wrap_argv`) that, when the job ends on its own,
writes the job's exit code atomically (temp file + rename) to
`<run dir>/exits/a<attempt>-<phase>-r<rank>`. A controller that died while the job ran thus
leaves enough behind for whoever cleans up (`launch --resume`, `launcher down`, `launcher
doctor`) to record what the job did (`ended_outcome`) instead of guessing.

The wrapper also moves itself into the attempt's cgroup first (when one was made, see
`launcher.executors.job_cgroup`), so everything the job starts, even in a new session, is in it.
It sets a trap on TERM and INT so that a signal to the process group reaches the job and the
wrapper still records the code the job exits with (e.g. 75 after checkpointing on a notice);
a trap with a command is reset to the default in the job, unlike an ignored signal. The
wrapper's own stderr goes nowhere (bash would print "Terminated" into the job's log).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from launcher.atomic import atomic_write_text
from launcher.executors.base import PREEMPTED_EXIT_CODE, Outcome

EXITS_DIR = "exits"

WRAPPER = r"""trap : TERM INT
if [ -n "$1" ]; then { echo 0 >"$1"; } 2>/dev/null; fi
f=$2
shift 2
exec 3>&2 2>/dev/null
"$@" 2>&3 3>&-
rc=$?
printf '%s\n' "$rc" >"$f.tmp" && mv -f "$f.tmp" "$f"
exit "$rc"
"""


def exits_dir(run_dir: Path) -> Path:
    return run_dir / EXITS_DIR


def exit_path(run_dir: Path, attempt: int, phase: str, rank: int) -> Path:
    return exits_dir(run_dir) / f"a{attempt}-{phase}-r{rank}"


def wrap_argv(argv: Sequence[str], *, exit_file: Path, cgroup_procs: Path | None) -> list[str]:
    """`argv` run under the wrapper: joins the cgroup (if any), records the exit code."""
    return ["bash", "-c", WRAPPER, "launcher-rank", str(cgroup_procs or ""), str(exit_file), *argv]


def record_attempt(run_dir: Path, attempt: int, *, num_nodes: int, checkpoint_dir: Path | None) -> None:
    """What cleanup needs to judge the attempt later: its rank count and checkpoint store."""
    d = exits_dir(run_dir)
    d.mkdir(mode=0o700, exist_ok=True)
    data = {"num_nodes": num_nodes, "checkpoint_dir": str(checkpoint_dir) if checkpoint_dir else None}
    atomic_write_text(d / f"a{attempt}.json", json.dumps(data))


def outcome_path(run_dir: Path, attempt: int) -> Path:
    return exits_dir(run_dir) / f"a{attempt}-outcome.json"


def record_outcome(run_dir: Path, attempt: int, job: EndedJob) -> None:
    """The attempt's end as its controller learned it from the executor (atomic). Best effort:
    without it (a full disk) cleanup closes the attempt `abandoned`, as before."""
    data = {"outcome": str(job.outcome), "exit_code": job.exit_code, "detail": job.detail, "ended_at_unix": job.ended_at_unix}
    try:
        exits_dir(run_dir).mkdir(mode=0o700, exist_ok=True)
        atomic_write_text(outcome_path(run_dir, attempt), json.dumps(data))
    except OSError:
        pass


def _recorded_outcome(run_dir: Path, attempt: int) -> EndedJob | None:
    try:
        data = json.loads(outcome_path(run_dir, attempt).read_text())
        ended_at = data.get("ended_at_unix")
        job = EndedJob(Outcome(data["outcome"]), int(data["exit_code"]), str(data.get("detail") or ""),
                       float(ended_at) if ended_at is not None else None, source=RECORDED_BY_CONTROLLER)  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none recorded, or unreadable: judged as if none
    return job if job.outcome in RECORDABLE else None


def attempt_info(run_dir: Path, attempt: int) -> dict:
    try:
        return json.loads((exits_dir(run_dir) / f"a{attempt}.json").read_text())
    except (OSError, ValueError):
        return {}


def _read_code(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _written_at(run_dir: Path, attempt: int, num_nodes: int) -> float | None:
    times = []
    for phase in ("setup", "run"):
        for r in range(num_nodes):
            try:
                times.append(exit_path(run_dir, attempt, phase, r).stat().st_mtime)
            except OSError:
                pass
    return max(times) if times else None


@dataclass(frozen=True)
class EndedJob:
    outcome: Outcome
    exit_code: int
    detail: str
    ended_at_unix: float | None = None  # when the last rank's code was written
    source: str = "the job's exit status file (its controller was gone)"


RECORDED_BY_CONTROLLER = "its controller, before a teardown it did not live to finish"
# What an attempt can be closed as later; a lost node or a cancel leaves nothing to repeat.
RECORDABLE = frozenset({Outcome.SUCCEEDED, Outcome.FAILED, Outcome.SETUP_FAILED, Outcome.PREEMPTED})


def ended_outcome(run_dir: Path, attempt: int, num_nodes: int) -> EndedJob | None:
    """What the attempt's job did, from the exit codes its ranks left; None when they do not say
    (no rank ended on its own, or some ranks ended with 0 while others did not end).

    Any rank of `run` exiting 75 means the job checkpointed on a preemption notice: preempted.
    Another non-zero code in `run` is a failure, in `setup` a setup failure; every rank of `run`
    exiting 0 is a completed job. Without rank codes (a job on a cluster), the outcome its
    controller recorded before the teardown, if any."""
    job = _outcome(run_dir, attempt, num_nodes)
    if job is None:
        return _recorded_outcome(run_dir, attempt)
    return EndedJob(job.outcome, job.exit_code, job.detail, _written_at(run_dir, attempt, num_nodes))


def _outcome(run_dir: Path, attempt: int, num_nodes: int) -> EndedJob | None:
    run = {r: _read_code(exit_path(run_dir, attempt, "run", r)) for r in range(num_nodes)}
    if any(c == PREEMPTED_EXIT_CODE for c in run.values()):
        ranks = sorted(r for r, c in run.items() if c == PREEMPTED_EXIT_CODE)
        return EndedJob(Outcome.PREEMPTED, PREEMPTED_EXIT_CODE, f"rank {ranks[0]} run exited with {PREEMPTED_EXIT_CODE} (checkpointed on a preemption notice)")
    failed = [(r, c) for r, c in sorted(run.items()) if c not in (None, 0)]
    if failed:
        return EndedJob(Outcome.FAILED, failed[0][1], f"rank {failed[0][0]} run exited with {failed[0][1]}")
    if run and all(c == 0 for c in run.values()):
        return EndedJob(Outcome.SUCCEEDED, 0, "every rank's run exited with 0")
    setup = [(r, _read_code(exit_path(run_dir, attempt, "setup", r))) for r in range(num_nodes)]
    setup_failed = [(r, c) for r, c in setup if c not in (None, 0)]
    if setup_failed and not any(c is not None for c in run.values()):
        r, c = setup_failed[0]
        return EndedJob(Outcome.SETUP_FAILED, c, f"rank {r} setup exited with {c}")
    return None
