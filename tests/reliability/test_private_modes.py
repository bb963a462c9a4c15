"""State is private whatever the umask (real CLI started under `umask 000`): the home, run
directories, logs, checkpoints and the ledger are 0700 directories and 0600 files."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from tests.conftest import REPO

SPEC = """name: modes
resources: {infra: local}
run: echo saved > "$LAUNCHER_CHECKPOINT_DIR/ckpt.txt"; echo done
launcher: {project: p, owner: ana, experiment: e, expected_hours: 0.01, budget_usd: 1}
"""


def test_umask_000_still_gives_private_state(tmp_path, launcher_home):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    home = launcher_home / "fresh"  # created by the CLI itself
    env = {**os.environ, "LAUNCHER_HOME": str(home)}
    cmd = f"umask 000; exec {sys.executable} -m launcher.cli.main launch {spec} --yes"
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=120, cwd=str(REPO))
    assert res.returncode == 0, res.stderr
    loose = []
    for p in [home, *home.rglob("*")]:
        if p.is_symlink():
            continue
        mode = stat.S_IMODE(os.stat(p).st_mode)
        if mode & 0o077:
            loose.append(f"{p.relative_to(home)} {oct(mode)}")
    assert loose == []
    ckpt = next(home.rglob("ckpt.txt"))
    assert stat.S_IMODE(os.stat(ckpt).st_mode) == 0o600
