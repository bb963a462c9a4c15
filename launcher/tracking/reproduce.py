"""Rebuild what produced a recorded run, or refuse saying what differs.

The code: a clean `git worktree` of the recorded revision (in `$LAUNCHER_HOME/reproduce/`), with
the run's uncommitted changes applied when they were saved at launch and rebuild the recorded
dirty-tree hash exactly. The environment: the lockfile found from the spec must hash as recorded,
and this interpreter must have exactly the distributions the run recorded having (its
`environment` event: what it really ran with, whatever the lockfile says); the refusal carries the
differences package by package (`EnvironmentDiffersError.differences`). A run recorded before
environments were recorded is checked the old way: every exact pin of its lockfile installed.
The data: every file under `launcher.data` must hash as recorded (the refusal names the file).
The spec is the one the run was launched with; its seeds come with it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from launcher import paths
from launcher.errors import BadInputError, NotFoundError, RefusedError
from launcher.provenance import code_dirty_hash, find_lockfiles, lockfile_hash
from launcher.tracking.lineage import LINEAGE_DIR, LINEAGE_EVENT, PATCH_NAME, UNTRACKED_DIR, data_file_hashes, recorded_environment
from launcher.tracking.session import RESULTS_EVENT

_PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;#]+)")


class EnvironmentDiffersError(RefusedError):
    """This interpreter's distributions are not the ones the run had."""

    def __init__(self, run_id: str, diffs: list, **kw) -> None:
        n = len(diffs)
        super().__init__(
            f"this environment differs from the one run {run_id} ran with in {n} package{'s' if n != 1 else ''}",
            hint=kw.pop("hint", f"`launcher reproduce {run_id} --make-env DIR` builds it with the recorded versions and reproduces from there"),
        )
        self.run_id = run_id
        self.differences = diffs


@dataclass(frozen=True)
class ReproSource:
    run: object  # the recorded RunRecord
    worktree: Path
    loaded: object  # LoadedSpec of the recorded spec, resolved inside the worktree
    recorded_weights: str | None
    cloud: str | None  # where the recorded run completed (or last ran)
    moved: tuple = ()  # environment differences that do not block: editable sources at another revision

    def remove(self) -> None:
        remove_worktree(self.worktree)


def recorded_weights(ledger, run_id: str) -> str | None:
    for e in reversed(ledger.events(run_id, kind=RESULTS_EVENT)):
        if e.data.get("final_weights_sha256"):
            return str(e.data["final_weights_sha256"])
    return None


def prepare_reproduction(ledger, target: str) -> ReproSource:
    run = ledger.find_run(target)
    lineage = next((e.data for e in reversed(ledger.events(run.run_id, kind=LINEAGE_EVENT))), None)
    if lineage is None:
        raise RefusedError(f"run {run.run_id} has no lineage record (launched by an older launcher); it cannot be reproduced")
    if not run.code_revision or "git_root" not in lineage:
        raise RefusedError(f"run {run.run_id} was not launched from a git repository: there is no code revision to check out")
    rd = paths.runs_dir() / run.run_id
    spec_text = (rd / "spec.yaml").read_text() if (rd / "spec.yaml").is_file() else run.spec_yaml
    if "<redacted>" in spec_text and not (rd / "spec.yaml").is_file():
        raise RefusedError(f"run {run.run_id}: only the redacted spec is left (its secrets are not recorded)")
    root = Path(lineage["git_root"])
    if not root.is_dir():
        raise NotFoundError(f"the repository run {run.run_id} was launched from is gone: {root}")
    worktree = paths.home() / "reproduce" / f"{run.run_id}-{datetime.now(UTC):%Y%m%d-%H%M%S-%f}"
    _add_worktree(root, worktree, run.code_revision)
    try:
        if run.code_dirty_hash:
            _restore_uncommitted(run, rd / LINEAGE_DIR, worktree, saved=bool(lineage.get("uncommitted_saved")))
        loaded = _load_spec(spec_text, worktree, lineage)
        moved = check_environment(run, loaded, worktree, recorded=recorded_environment(ledger, run.run_id), own_source=root)
        check_data(run, loaded, lineage)
    except BaseException:
        remove_worktree(worktree)
        raise
    attempts = ledger.attempts(run.run_id)
    done = [a for a in attempts if a.end_reason == "completed"] or attempts
    return ReproSource(run, worktree, loaded, recorded_weights(ledger, run.run_id), done[-1].cloud if done else None, tuple(moved))


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=300,
                          env={"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "PATH": _path()})  # fmt: skip


def _path() -> str:
    import os

    return os.environ.get("PATH", "/usr/bin:/bin")


def _add_worktree(root: Path, worktree: Path, revision: str) -> None:
    worktree.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    r = _git(root, "worktree", "add", "--detach", str(worktree), revision)
    if r.returncode != 0:
        raise RefusedError(f"cannot check out revision {revision[:12]} of {root}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'git failed'}")


def remove_worktree(worktree: Path) -> None:
    r = _git(worktree, "rev-parse", "--git-common-dir")
    if r.returncode == 0:
        common = (worktree / r.stdout.strip()).resolve()
        _git(common.parent if common.name == ".git" else common, "worktree", "remove", "--force", str(worktree))
    shutil.rmtree(worktree, ignore_errors=True)


def _restore_uncommitted(run, saved_dir: Path, worktree: Path, *, saved: bool) -> None:
    why = f"run {run.run_id} was launched with uncommitted changes (sha256 {run.code_dirty_hash[:12]})"
    patch = saved_dir / PATCH_NAME
    if not saved or not patch.is_file():
        raise RefusedError(f"{why} that were not kept and cannot be recovered",
                           hint="commit your changes before launching runs you want to reproduce")  # fmt: skip
    if patch.stat().st_size:
        r = _git(worktree, "apply", "--binary", "--whitespace=nowarn", str(patch))
        if r.returncode != 0:
            raise RefusedError(f"{why}; the saved patch does not apply to revision {run.code_revision[:12]}: {r.stderr.strip()[:300]}")
    untracked = saved_dir / UNTRACKED_DIR
    if untracked.is_dir():
        shutil.copytree(untracked, worktree, dirs_exist_ok=True, symlinks=True)
    rebuilt = code_dirty_hash(worktree)
    if rebuilt != run.code_dirty_hash:
        raise RefusedError(f"{why} that cannot be recovered: the saved changes rebuild sha256 {str(rebuilt)[:12]}")


def _load_spec(spec_text: str, worktree: Path, lineage: dict):
    from launcher.spec.loader import load_spec_text

    spec_path = worktree / lineage["spec_relpath"] if lineage.get("spec_relpath") else None
    base_dir = (worktree / lineage.get("base_relpath", ".")).resolve()
    return load_spec_text(spec_text, path=spec_path, base_dir=base_dir)


def check_environment(run, loaded, worktree: Path, *, recorded=None, own_source: Path | None = None) -> list:
    """Refuse when the environment is not the run's; returns the differences that do not block
    (an editable install's source at another revision), to be shown."""
    start = loaded.path.parent if loaded.path is not None else Path(loaded.base_dir)
    found = find_lockfiles(start, stop=worktree)
    now = lockfile_hash(start, stop=worktree)
    if now != run.lockfile_hash:
        names = ", ".join(f.name for f in found) or "no lockfile"
        raise RefusedError(
            f"lockfile hash differs from run {run.run_id}: recorded {str(run.lockfile_hash)[:12]}, "
            f"the checkout has {str(now)[:12]} ({names})"
        )
    if recorded is not None:
        from launcher.environment import current, differences

        diffs = differences(recorded, current(), own_source=own_source)
        if any(d.blocking for d in diffs):
            raise EnvironmentDiffersError(run.run_id, diffs)
        return diffs
    drift = environment_drift(found)
    if drift:
        shown = "; ".join(drift[:5]) + (f"; and {len(drift) - 5} more" if len(drift) > 5 else "")
        raise RefusedError(
            f"this environment does not match the lockfile of run {run.run_id}: {shown}",
            hint="install it with `pip install -r <lockfile>` (in a fresh venv) and run reproduce from there",
        )
    return []


def environment_drift(lockfiles: list[Path]) -> list[str]:
    """`name: lock says X, installed Y` for every exact pin this interpreter does not have."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for lock in lockfiles:
        for line in lock.read_text(errors="replace").splitlines():
            m = _PIN_RE.match(line.strip())
            if not m:
                continue
            name, want = m.group(1), m.group(3)
            try:
                have = version(name)
            except PackageNotFoundError:
                have = None
            if have is None or _norm_version(have) != _norm_version(want):
                out.append(f"{name}: {lock.name} says {want}, installed {have or 'nothing'}")
    return out


def _norm_version(v: str) -> str:
    try:
        from packaging.version import Version

        return str(Version(v))
    except Exception:
        return v.strip()


def check_data(run, loaded, lineage: dict) -> None:
    recorded: dict[str, str] = lineage.get("data_files") or {}
    try:
        now = data_file_hashes(loaded)
    except OSError as e:
        raise BadInputError(f"cannot read the run's data: {e}") from None
    changed = [f for f in sorted(recorded) if f in now and now[f] != recorded[f]]
    missing = [f for f in sorted(recorded) if f not in now]
    added = [f for f in sorted(now) if f not in recorded]
    if changed or missing or added:
        parts = [f"{f} changed (recorded sha256 {recorded[f][:12]}, now {now[f][:12]})" for f in changed]
        parts += [f"{f} is missing" for f in missing]
        parts += [f"{f} is new" for f in added]
        raise RefusedError(f"data hash differs from run {run.run_id}: " + "; ".join(parts))
