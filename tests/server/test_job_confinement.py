"""A job never holds the server's keys (real `launcher server` over the real PostgreSQL).

The server runs with LAUNCHER_DB_URL, a token and cloud credentials in its environment:
* by default a member's `--cloud local` run is refused at submission (exit 3, HTTP 403, nothing
  recorded), while an admin's runs, with an environment holding none of those;
* with `--local-jobs-user nobody` (the server runs as root) the member's job runs as `nobody`:
  its environment holds none of the server's keys, no process environment on the machine that
  it can read does either, and its attempt to make a user admin of every project
  (`launcher server users add alice --project '*' --role admin`) leaves the users table as it was.
"""

from __future__ import annotations

import json
import os
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.server.helpers import cli_env, make_token, nobody_runs_python, run_cli_env, searchable_dir, start_server

PG_URL = os.environ.get("LAUNCHER_TEST_PG_URL")
SERVER_SECRETS = {
    "LAUNCHER_TOKEN": "lsk_00112233aabb_" + "Q" * 43,
    "AWS_ACCESS_KEY_ID": "AKIACONFINEMENT12345",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-confinement-77",
    "GOOGLE_APPLICATION_CREDENTIALS": "/srv/gcp-key-confinement.json",
}

# The job: its environment, its uid, every /proc/*/environ it can read that holds a ledger URL,
# then the escalation the issue reported.
PROBE = """\
import json, os, glob
readable = []
for p in glob.glob("/proc/[0-9]*/environ"):
    try:
        with open(p, "rb") as f:
            if b"LAUNCHER_DB_URL=" in f.read():
                readable.append(p)
    except OSError:
        pass
print("PROBE " + json.dumps({"env": dict(os.environ), "uid": os.getuid(), "leaky_procs": readable}), flush=True)
"""


@pytest.fixture
def pg_url():
    if not PG_URL:
        pytest.skip("LAUNCHER_TEST_PG_URL is not set")
    from tests.ledger.conftest import _pg_schema_url

    yield from _pg_schema_url(PG_URL)


@pytest.fixture
def searchable_home():
    with searchable_dir() as d:
        yield d / "home"


def _spec(dir_: Path, project: str) -> Path:
    probe = dir_ / "probe.py"
    probe.write_text(PROBE)
    os.chmod(probe, 0o644)
    p = dir_ / f"probe-{project}.yaml"
    p.write_text(textwrap.dedent(f"""
        name: probe-{project}
        workdir: {dir_}
        run: |
          python probe.py
          launcher server users add alice --project '*' --role admin; echo "escalation exit $?"
        launcher: {{project: {project}, expected_hours: 0.01, max_restarts: 0}}
    """))
    return p


def _setup(tmp: Path, home: Path, pg_url: str) -> tuple[dict, dict]:
    env = cli_env(LAUNCHER_HOME=str(home), LAUNCHER_DB_URL=pg_url, **SERVER_SECRETS)
    env.pop("LAUNCHER_SERVER", None)
    tokens = {"root": make_token("root", "*", "admin", env), "alice": make_token("alice", "A", "member", env)}
    return env, tokens


def _users(pg_url: str) -> list[dict]:
    from launcher.ledger import Ledger
    from launcher.server.auth import Users

    with Ledger(pg_url) as led:
        return [{"name": u["name"], "roles": u["roles"]} for u in Users(led).list()]


def _submit(spec: Path, env: dict, url: str, token: str):
    client = {k: v for k, v in env.items() if k not in ("LAUNCHER_DB_URL", *SERVER_SECRETS)}
    return run_cli_env("launch", str(spec), "--submit", "--yes", "--cheapest", "--cloud", "local",
                       env={**client, "LAUNCHER_SERVER": url, "LAUNCHER_TOKEN": token}, timeout=180)  # fmt: skip


def _probe(home: Path, run_id: str, env: dict, url: str, token: str) -> tuple[dict, str]:
    r = run_cli_env("logs", run_id, "--follow", env={**env, "LAUNCHER_SERVER": url, "LAUNCHER_TOKEN": token}, timeout=180)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("PROBE ")]
    assert lines, r.stdout + r.stderr
    line = lines[0]
    return json.loads(line[len("PROBE "):]), r.stdout


def _no_keys(seen: dict, pg_url: str) -> None:
    env = seen["env"]
    assert not {"LAUNCHER_DB_URL", "LAUNCHER_HOME", *SERVER_SECRETS} & set(env), sorted(env)
    values = json.dumps(env)
    assert pg_url not in values and not [v for v in SERVER_SECRETS.values() if v in values]


def test_member_local_run_is_refused_by_default_admin_runs_without_keys(tmp_path, searchable_home, pg_url) -> None:
    env, tokens = _setup(tmp_path, searchable_home, pg_url)
    server = start_server(tmp_path, "--lease-seconds", "6", env=env)
    try:
        users_before = _users(pg_url)
        r = _submit(_spec(tmp_path, "A"), env, server.url, tokens["alice"])
        assert r.returncode == 3, (r.returncode, r.stderr)
        assert "does not run `--cloud local` jobs of non-admins" in r.stderr and "--local-jobs-user" in r.stderr
        assert not (searchable_home / "runs").exists() or not any((searchable_home / "runs").iterdir())
        from launcher.ledger import Ledger

        with Ledger(pg_url) as led:
            assert led.list_runs() == []
        # An admin's local run runs (as the server's user), with none of the server's keys.
        r = _submit(_spec(tmp_path, "A"), env, server.url, tokens["root"])
        assert r.returncode == 0, r.stderr
        seen, out = _probe(searchable_home, r.stdout.strip(), env, server.url, tokens["root"])
        _no_keys(seen, pg_url)
        assert seen["uid"] == os.getuid()
        # The escalation found no ledger to write: the users table is as it was.
        assert _users(pg_url) == users_before
    finally:
        server.stop()


@pytest.fixture
def local_jobs_args():
    with nobody_runs_python() as args:
        yield args


def test_member_job_runs_as_the_jobs_user_and_cannot_escalate(tmp_path, searchable_home, pg_url, local_jobs_args) -> None:
    env, tokens = _setup(tmp_path, searchable_home, pg_url)
    work = Path(tempfile.mkdtemp(prefix="probe-wd-", dir=str(searchable_home.parent)))
    os.chmod(work, 0o755)
    server = start_server(tmp_path, "--lease-seconds", "6", *local_jobs_args, env=env)
    try:
        users_before = _users(pg_url)
        assert {"name": "alice", "roles": {"A": "member"}} in users_before
        r = _submit(_spec(work, "A"), env, server.url, tokens["alice"])
        assert r.returncode == 0, r.stderr
        run_id = r.stdout.strip()
        seen, out = _probe(searchable_home, run_id, env, server.url, tokens["alice"])
        _no_keys(seen, pg_url)
        assert seen["uid"] == 65534  # nobody
        assert seen["leaky_procs"] == []  # not even /proc/<server>/environ
        assert "escalation exit" in out  # it ran: at best it wrote a ledger of its own under its HOME
        assert _users(pg_url) == users_before
        from launcher.ledger import Ledger

        with Ledger(pg_url) as led:
            assert led.get_run(run_id).state == "succeeded"
        # The server's own state stays private: the ledger's run dir files are not the job user's.
        rd = searchable_home / "runs" / run_id
        assert (rd / "spec.yaml").stat().st_uid == os.getuid() and (rd / "spec.yaml").stat().st_mode & 0o077 == 0
    finally:
        server.stop()


def test_server_refuses_a_root_or_missing_jobs_user(tmp_path, searchable_home) -> None:
    env = cli_env(LAUNCHER_HOME=str(searchable_home))
    env.pop("LAUNCHER_DB_URL", None)
    for user, words in (("no-such-user-xyz", "no user"), ("root", "root")):
        r = run_cli_env("server", "--port", "0", "--local-jobs-user", user, env=env, timeout=60)
        assert r.returncode == 2 and words in r.stderr, (r.returncode, r.stderr)
