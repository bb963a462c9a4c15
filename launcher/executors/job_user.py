"""Running a local job as another, unprivileged user (`launcher server --local-jobs-user USER`).

The rank's wrapper (exit status file, cgroup) stays the launcher's; only the job's own command
runs under `setpriv` as USER, with USER's groups and HOME. So the job cannot signal or trace the
launcher's processes, read their `/proc/<pid>/environ`, nor open the ledger and other state
(files 0600, directories 0700 of the launcher's user).

What USER gets (`grant`): its run's `workdir/` and default `checkpoints/` become USER's; the
directories above them inside LAUNCHER_HOME (the home, `runs/`, the run's directory) become
searchable by USER's primary group only (mode 0710, group USER's group), never listable or
readable. Logs are written through descriptors the launcher opened, so USER needs no access to
them. Every job of this kind runs as the same USER: they are kept from the server, not from
each other (give each project its own cluster when that matters).
"""

from __future__ import annotations

import os
import pwd
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from launcher.errors import BadInputError, RefusedError, ToolMissingError


@dataclass(frozen=True)
class JobUser:
    name: str
    uid: int
    gid: int
    home: str

    def argv(self, command: Sequence[str], setpriv: str) -> list[str]:
        """`command` run as this user (its uid, gid and supplementary groups)."""
        return [setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--", *command]


def resolve_job_user(name: str, *, home: Path) -> tuple[JobUser, str]:
    """The user named by `--local-jobs-user`, checked before the server starts: it exists, is not
    root nor the server's own user, this process may switch to it (it runs as root) and it can
    reach `home` (LAUNCHER_HOME). Returns the user and the `setpriv` binary."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise BadInputError(f"--local-jobs-user: no user {name!r} on this machine", hint="create one, e.g. `useradd --system launcher-jobs`") from None
    if pw.pw_uid == 0 or pw.pw_uid == os.geteuid():
        raise BadInputError(f"--local-jobs-user {name!r} is root or the server's own user: jobs would hold the server's keys", hint="name an unprivileged user of its own")
    if os.geteuid() != 0:
        raise RefusedError(f"--local-jobs-user {name!r}: the server must run as root to start jobs as another user")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise ToolMissingError("--local-jobs-user needs `setpriv` (util-linux)")
    gids = {pw.pw_gid, *os.getgrouplist(name, pw.pw_gid)}
    blocked = _unreachable_ancestor(home.resolve(), pw.pw_uid, pw.pw_gid, gids)
    if blocked is not None:
        raise BadInputError(
            f"--local-jobs-user {name!r} cannot reach LAUNCHER_HOME {home}: {blocked} is not searchable by it",
            hint="put LAUNCHER_HOME where every directory above it is searchable (e.g. /srv/launcher)",
        )
    python = Path(sys.executable).resolve()  # the `python` first on a job's PATH
    blocked = _unreachable_ancestor(python / "x", pw.pw_uid, pw.pw_gid, gids)
    if blocked is not None:
        raise BadInputError(
            f"--local-jobs-user {name!r} cannot run the launcher's Python {python}: {blocked} is not searchable by it",
            hint="install gpu-launcher where every user may run it (e.g. a venv under /opt)",
        )
    return JobUser(name, pw.pw_uid, pw.pw_gid, pw.pw_dir or "/"), setpriv


def _unreachable_ancestor(path: Path, uid: int, gid: int, gids: set[int]) -> Path | None:
    """The first directory above `path` that `uid` (with `gids`) cannot search, or None. Asked of
    the kernel as that user (a forked child drops to it and calls access()), so ACLs count."""
    dirs = list(reversed(path.parents))[:250]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgroups(sorted(gids))
            os.setgid(gid)
            os.setuid(uid)
            os._exit(next((i + 1 for i, d in enumerate(dirs) if not os.access(d, os.X_OK)), 0))
        except BaseException:
            os._exit(255)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 255:
        return dirs[0]
    return dirs[code - 1] if code else None


def grant(user: JobUser, *, home: Path, run_dir: Path, owned: Iterable[Path]) -> None:
    """Let `user` reach `owned` (made its own, recursively) through `home` .. `run_dir`
    (searchable by its group only). Paths outside `run_dir` are left as they are."""
    run_dir = run_dir.resolve()
    home = home.resolve()
    chain = [run_dir, *(p for p in run_dir.parents if p == home or home in p.parents)]
    for d in chain:
        os.chown(d, -1, user.gid)
        os.chmod(d, 0o710)
    for top in owned:
        top = Path(top)
        if not top.exists() or not top.resolve().is_relative_to(run_dir):
            continue
        for root, dirs, files in os.walk(top):
            os.chown(root, user.uid, user.gid)
            for f in files:
                os.lchown(os.path.join(root, f), user.uid, user.gid)
            for d in dirs:
                if os.path.islink(os.path.join(root, d)):
                    os.lchown(os.path.join(root, d), user.uid, user.gid)
