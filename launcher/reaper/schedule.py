"""`launcher reap schedule install|show|remove`: a nightly cron entry, plus the equivalent
systemd timer and Kubernetes CronJob printed for those who use them.

The crontab is edited through `crontab -l` / `crontab -` (the user's own table); our line is
identified by a marker comment so install is idempotent and remove touches nothing else.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

from launcher.errors import BadInputError, ToolMissingError

MARKER = "# gpu-launcher nightly reap"


@dataclass(frozen=True)
class Schedule:
    minute: int = 17
    hour: int = 3
    policy_path: str | None = None
    log_path: str | None = None
    home: str | None = None  # LAUNCHER_HOME the job must read (cron starts with a bare environment)

    def command(self) -> str:
        exe = shutil.which("launcher") or f"{sys.executable} -m launcher.cli.main"
        parts = [f"LAUNCHER_HOME={shlex.quote(self.home)}"] if self.home else []
        parts += [exe, "reap", "--json"]
        if self.policy_path:
            parts += ["--policy", shlex.quote(self.policy_path)]
        cmd = " ".join(parts)
        if self.log_path:
            cmd += f" >> {shlex.quote(self.log_path)} 2>&1"
        return cmd

    def cron_line(self) -> str:
        return f"{self.minute} {self.hour} * * * {self.command()} {MARKER}"

    def systemd_units(self) -> str:
        return (
            "# ~/.config/systemd/user/launcher-reap.service\n"
            "[Unit]\nDescription=gpu-launcher nightly reap\n\n"
            "[Service]\nType=oneshot\n"
            + (f"Environment=LAUNCHER_HOME={self.home}\n" if self.home else "")
            + f"ExecStart={self._exec()}\n\n"
            "# ~/.config/systemd/user/launcher-reap.timer\n"
            "[Unit]\nDescription=Run gpu-launcher reap nightly\n\n"
            f"[Timer]\nOnCalendar=*-*-* {self.hour:02d}:{self.minute:02d}:00\nPersistent=true\n\n"
            "[Install]\nWantedBy=timers.target\n"
        )

    def _exec(self) -> str:
        """The command without the environment prefix (systemd sets it with Environment=)."""
        return Schedule(self.minute, self.hour, self.policy_path, self.log_path).command()

    def kubernetes_cronjob(self) -> str:
        args = ", ".join(f'"{a}"' for a in ["reap", "--json"] + (["--policy", self.policy_path] if self.policy_path else []))
        return (
            "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: gpu-launcher-reap\n"
            f"spec:\n  schedule: \"{self.minute} {self.hour} * * *\"\n  concurrencyPolicy: Forbid\n"
            "  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n"
            "          containers:\n            - name: reap\n              image: gpu-launcher:latest\n"
            f"              command: [\"launcher\"]\n              args: [{args}]\n"
        )


def validate_time(hour: int, minute: int) -> None:
    if not 0 <= hour <= 23 or not 0 <= minute <= 59:
        raise BadInputError(f"invalid schedule time {hour:02d}:{minute:02d} (hour 0-23, minute 0-59)")


def _crontab() -> str:
    if shutil.which("crontab") is None:
        raise ToolMissingError("`crontab` is not installed", hint="install cron (e.g. apt-get install cron), or use the systemd timer / Kubernetes CronJob printed by `launcher reap schedule show`")
    res = subprocess.run(["crontab", "-l"], capture_output=True, text=True)
    return res.stdout if res.returncode == 0 else ""  # no crontab yet -> empty


def _write_crontab(text: str) -> None:
    subprocess.run(["crontab", "-"], input=text, text=True, check=True)


def installed_line() -> str | None:
    for line in _crontab().splitlines():
        if line.rstrip().endswith(MARKER):
            return line
    return None


def install(schedule: Schedule) -> str:
    lines = [ln for ln in _crontab().splitlines() if not ln.rstrip().endswith(MARKER)]
    lines.append(schedule.cron_line())
    _write_crontab("\n".join(lines) + "\n")
    return schedule.cron_line()


def remove() -> bool:
    current = _crontab().splitlines()
    kept = [ln for ln in current if not ln.rstrip().endswith(MARKER)]
    if len(kept) == len(current):
        return False
    _write_crontab("\n".join(kept) + ("\n" if kept else ""))
    return True
