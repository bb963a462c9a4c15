"""Is the Pulumi CLI here? The Automation API drives the `pulumi` binary; without it, every
operation that deploys, previews against a cloud or destroys fails with one clear message,
before anything else happens (no state directory, no passphrase file, no cloud call).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from infra.errors import ToolMissingError

INSTALL_HINT = (
    "install it with `curl -fsSL https://get.pulumi.com | sh` (puts it in ~/.pulumi/bin) "
    "or `brew install pulumi/tap/pulumi`, then rerun; `--dry-run` prints the resource plan without it"
)


def find_pulumi(search_path: str | None = None, home: Path | None = None) -> Path | None:
    """`pulumi` on PATH (or `search_path`), else `<home>/.pulumi/bin/pulumi`; None when absent."""
    found = shutil.which("pulumi", path=search_path if search_path is not None else os.environ.get("PATH", ""))
    if found:
        return Path(found)
    candidate = (home or Path.home()) / ".pulumi" / "bin" / "pulumi"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    return None


def require_pulumi(action: str) -> Path:
    """The path of the `pulumi` binary, or ToolMissingError naming `action` and how to install."""
    found = find_pulumi()
    if found is None:
        raise ToolMissingError(f"`{action}` needs the Pulumi CLI, which is not installed", hint=INSTALL_HINT)
    return found
