"""A full disk on the server is told as a full disk (HTTP 507, the CLI's exit 5), not a 500, and a
submission that could not be laid out is not left pending forever (real server, real PostgreSQL
ledger, LAUNCHER_HOME on a small tmpfs filled for real; root only)."""

from __future__ import annotations

import os


from tests.reliability.test_disk_full_and_permissions import _fill, small_fs  # noqa: F401
from tests.server.helpers import cli_env, make_token, run_cli_env, start_server
from tests.server.test_job_confinement import pg_url  # noqa: F401


def test_submission_on_a_full_disk_is_507_and_exit_5(tmp_path, small_fs, pg_url) -> None:  # noqa: F811
    home = small_fs / "home"
    env = cli_env(LAUNCHER_HOME=str(home), LAUNCHER_DB_URL=pg_url)
    env.pop("LAUNCHER_SERVER", None)
    token = make_token("root", "*", "admin", env)
    server = start_server(tmp_path, "--lease-seconds", "6", env=env)
    try:
        spec = tmp_path / "s.yaml"
        spec.write_text("name: s\nrun: echo hi\nlauncher: {project: A, expected_hours: 0.01, max_restarts: 0}\n")
        filler = _fill(small_fs)
        client = {k: v for k, v in env.items() if k != "LAUNCHER_DB_URL"}
        r = run_cli_env("launch", str(spec), "--submit", "--yes", "--cheapest", "--cloud", "local",
                        env={**client, "LAUNCHER_SERVER": server.url, "LAUNCHER_TOKEN": token}, timeout=180)  # fmt: skip
        assert r.returncode == 5, (r.returncode, r.stderr)
        assert "disk full" in r.stderr and "internal error" not in r.stderr, r.stderr
        from launcher.ledger import Ledger

        with Ledger(pg_url) as led:
            runs = led.list_runs()
        assert all(x.state == "failed" and x.end_reason == "disk_full" for x in runs), [(x.state, x.end_reason) for x in runs]
        filler.unlink()
        assert server.proc.poll() is None
    finally:
        server.stop()
    assert os.path.isdir(home)
