"""Who may do what on a real `launcher server` (one replica, SQLite ledger): 401 without a valid
token, 403 across projects and for viewers launching, a revoked token stops at once, bad
requests get one clear 4xx message, and tokens never reach logs, ledger events or errors."""

from __future__ import annotations

import json
import textwrap

import httpx
import pytest

from tests.server.helpers import cli_env, make_token, nobody_runs_python, run_cli_env, searchable_dir, start_server


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A server with users: root (admin everywhere), alice (member of A), bob (member of B),
    vic (viewer of A); one finished run of alice's in project A."""
    tmp = tmp_path_factory.mktemp("team")
    with nobody_runs_python() as local_jobs_args, searchable_dir() as d:
        yield from _team(tmp, d / "home", local_jobs_args)


def _team(tmp, home, local_jobs_args):
    """(Members' local jobs run as `nobody`: a server runs them in its own user only for admins.)"""
    env = cli_env(LAUNCHER_HOME=str(home))
    env.pop("LAUNCHER_DB_URL", None)
    env.pop("LAUNCHER_SERVER", None)
    env.pop("LAUNCHER_TOKEN", None)
    tokens = {
        "root": make_token("root", "*", "admin", env),
        "alice": make_token("alice", "A", "member", env),
        "bob": make_token("bob", "B", "member", env),
        "vic": make_token("vic", "A", "viewer", env),
    }
    server = start_server(tmp, "--lease-seconds", "6", *local_jobs_args, env=env)
    specs = {p: _spec(tmp, p) for p in ("A", "B")}
    try:
        r = run_cli_env("launch", str(specs["A"]), "--submit", "--yes", "--cheapest", "--cloud", "local",
                        env={**env, "LAUNCHER_SERVER": server.url, "LAUNCHER_TOKEN": tokens["alice"]})  # fmt: skip
        assert r.returncode == 0, r.stderr
        run_id = r.stdout.strip()
        r = run_cli_env("logs", run_id, "--follow", env={**env, "LAUNCHER_SERVER": server.url, "LAUNCHER_TOKEN": tokens["alice"]})
        assert r.returncode == 0 and "hello from rank 0" in r.stdout, r.stderr
        assert "\x1b" not in r.stdout and "[31m" not in r.stdout, r.stdout  # the job printed in colour
        yield {"server": server, "env": env, "tokens": tokens, "run_id": run_id, "specs": specs, "home": home}
    finally:
        server.stop()


def _spec(tmp, project: str):
    p = tmp / f"spec-{project}.yaml"
    p.write_text(textwrap.dedent(f"""
        name: hello-{project}
        run: printf '\\033[31mhello from rank %s\\033[0m\\n' "$SKYPILOT_NODE_RANK"
        launcher: {{project: {project}, expected_hours: 0.01, max_restarts: 0}}
    """))
    return p


def api(team, method: str, path: str, token: str | None, **kw) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, team["server"].url + path, headers={**headers, **kw.pop("headers", {})}, timeout=30, **kw)


def one_message(r: httpx.Response) -> str:
    body = r.json()
    assert set(body) <= {"error", "hint"} and isinstance(body["error"], str) and "Traceback" not in r.text
    return body["error"]


def test_no_token_malformed_or_wrong_token_is_401(team) -> None:
    r = api(team, "GET", "/api/v1/runs", None)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert "token" in one_message(r)
    assert api(team, "GET", "/api/v1/runs", None, headers={"Authorization": "Basic abc"}).status_code == 401
    assert api(team, "GET", "/api/v1/runs", "lsk_nope").status_code == 401
    good = team["tokens"]["alice"]
    wrong_secret = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    assert api(team, "GET", "/api/v1/runs", wrong_secret).status_code == 401
    assert api(team, "GET", "/metrics", None).status_code == 401
    assert api(team, "GET", "/healthz", None).status_code == 200


def test_member_of_another_project_gets_403_for_logs_cancel_and_launch(team) -> None:
    run_id, bob = team["run_id"], team["tokens"]["bob"]
    r = api(team, "GET", f"/api/v1/runs/{run_id}/logs", bob)
    assert r.status_code == 403 and "project 'A'" in one_message(r)
    assert api(team, "GET", f"/api/v1/runs/{run_id}", bob).status_code == 403
    assert api(team, "POST", f"/api/v1/runs/{run_id}/down", bob).status_code == 403
    # bob sees none of A's runs in lists
    assert api(team, "GET", "/api/v1/runs", bob).json() == {"runs": []}
    # alice launching into B through the real CLI: refused, one message, exit code REFUSED (3)
    env = {**team["env"], "LAUNCHER_SERVER": team["server"].url, "LAUNCHER_TOKEN": team["tokens"]["alice"]}
    r = run_cli_env("launch", str(team["specs"]["B"]), "--submit", "--yes", "--cheapest", "--cloud", "local", env=env)
    assert r.returncode == 3, r.stderr
    assert "error: user 'alice' is not a member of project 'B'; this needs member" in r.stderr and "Traceback" not in r.stderr
    # and the refused run was not recorded
    runs = api(team, "GET", "/api/v1/runs", team["tokens"]["root"]).json()["runs"]
    assert [x["project"] for x in runs] == ["A"]


def test_viewer_reads_but_cannot_launch_or_cancel(team) -> None:
    vic, run_id = team["tokens"]["vic"], team["run_id"]
    env = {**team["env"], "LAUNCHER_SERVER": team["server"].url, "LAUNCHER_TOKEN": vic}
    r = run_cli_env("logs", run_id, env=env)
    assert r.returncode == 0 and "hello from rank 0" in r.stdout
    r = run_cli_env("runs", "list", "--json", env=env)
    assert r.returncode == 0 and [x["run_id"] for x in json.loads(r.stdout)["runs"]] == [run_id]
    r = run_cli_env("launch", str(team["specs"]["A"]), "--submit", "--yes", "--cheapest", "--cloud", "local", env=env)
    assert r.returncode == 3 and "user 'vic' is a viewer of project 'A'; this needs member" in r.stderr
    r = run_cli_env("down", run_id, env=env)
    assert r.returncode == 3 and "this needs member" in r.stderr


def test_revoked_token_stops_at_once(team) -> None:
    env = team["env"]
    token = make_token("carol", "A", "member", env)
    assert api(team, "GET", "/api/v1/runs", token).status_code == 200
    token_id = token.split("_")[1]
    r = run_cli_env("server", "tokens", "revoke", token_id, env=env)
    assert r.returncode == 0, r.stderr
    r = api(team, "GET", "/api/v1/runs", token)
    assert r.status_code == 401 and one_message(r) == "unknown or revoked token"
    # removing a user stops their other tokens too
    token2 = make_token("dave", "A", "viewer", env)
    assert run_cli_env("server", "users", "remove", "dave", env=env).returncode == 0
    assert api(team, "GET", "/api/v1/runs", token2).status_code == 401


def test_bad_requests_get_one_clear_4xx(team) -> None:
    root = team["tokens"]["root"]
    r = api(team, "POST", "/api/v1/runs", root, content=b"{not json")
    assert r.status_code == 400 and one_message(r) == "the request body is not JSON"
    r = api(team, "POST", "/api/v1/runs", root, json={"spec_yaml": "name: x", "bogus": 1})
    assert r.status_code == 400 and one_message(r).startswith("bad submission: ")
    r = api(team, "GET", "/api/v1/runs?limit=many", root)
    assert r.status_code == 400 and one_message(r) == "query parameter 'limit' must be an integer, got 'many'"
    r = api(team, "GET", "/api/v1/runs/r-nope/logs?offsets=zz", root)
    assert r.status_code == 404 and "no run matches 'r-nope'" in one_message(r)
    r = api(team, "GET", f"/api/v1/runs/{team['run_id']}/logs?offsets=zz", root)
    assert r.status_code == 400 and "offsets must look like" in one_message(r)
    assert api(team, "GET", "/api/v2/whatever", root).status_code == 404
    assert api(team, "DELETE", "/api/v1/runs", root).status_code == 405
    # the CLI says the same in one line, without a traceback
    env = {**team["env"], "LAUNCHER_SERVER": team["server"].url, "LAUNCHER_TOKEN": root}
    r = run_cli_env("logs", "r-nope", env=env)
    assert r.returncode == 7 and r.stderr.startswith("error: no run matches 'r-nope'") and "Traceback" not in r.stderr


def test_tokens_never_in_logs_ledger_events_or_errors(team) -> None:
    """Grep everything the server and its runs wrote for every token and its secret part."""
    # a failed request with a token in a wrong place must not echo it back either
    root = team["tokens"]["root"]
    pasted = api(team, "GET", f"/api/v1/runs/{root}", root)
    assert pasted.status_code == 404 and "lsk_<redacted>" in one_message(pasted)
    r = api(team, "GET", "/api/v1/runs", None, headers={"Authorization": f"Bearer {root}x"})
    # lsk_<id>_<secret>: the secret (url-safe base64) may itself hold "_", so split after the id
    secrets = [t for t in team["tokens"].values()] + [t.split("_", 2)[2] for t in team["tokens"].values()]
    bodies = [pasted.text, r.text]
    from launcher.ledger import Ledger

    with Ledger(f"sqlite:///{team['home'] / 'ledger.db'}") as led:
        events = [json.dumps(e.data) for run in led.list_runs() for e in led.events(run.run_id)]
        runs = [repr(x) for x in led.list_runs()]
    files = [p.read_text(errors="replace") for p in team["home"].rglob("*") if p.is_file() and p.suffix != ".db"]
    server_log = team["server"].log.read_text()
    haystack = "\n".join([*events, *runs, *files, server_log, *bodies])
    assert events and server_log
    for s in secrets:
        assert s not in haystack
    # the database stores hashes, not tokens
    db = (team["home"] / "ledger.db").read_bytes()
    for s in secrets:
        assert s.encode() not in db


def test_member_cancels_a_running_run_through_the_server(team, tmp_path) -> None:
    """`launcher down RUN` against the server: STOPPING in the ledger, the owning replica's
    controller stops the job and tears down; the replica itself keeps running."""
    import time

    spec = tmp_path / "long.yaml"
    spec.write_text("name: long\nrun: echo started; sleep 120\nlauncher: {project: A, expected_hours: 0.05, max_restarts: 0}\n")
    env = {**team["env"], "LAUNCHER_SERVER": team["server"].url, "LAUNCHER_TOKEN": team["tokens"]["alice"]}
    r = run_cli_env("launch", str(spec), "--submit", "--yes", "--cheapest", "--cloud", "local", env=env)
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.strip()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        r = run_cli_env("status", "--json", env=env)
        rows = {x["run_id"]: x for x in json.loads(r.stdout)["runs"]}
        if run_id in rows and rows[run_id]["state"] == "running":
            break
        time.sleep(1)
    else:
        raise AssertionError(f"run {run_id} never ran: {rows.get(run_id)}")
    r = run_cli_env("down", run_id, "--wait", "60", env=env)
    assert r.returncode == 0 and f"{run_id}: cancelled" in r.stderr, r.stderr
    detail = api(team, "GET", f"/api/v1/runs/{run_id}", team["tokens"]["alice"]).json()
    assert detail["state"] == "cancelled" and [a["end_reason"] for a in detail["attempt_rows"]] == ["cancelled"]
    assert team["server"].proc.poll() is None  # the replica was not signalled


def test_ambiguous_prefix_never_names_another_projects_run(team) -> None:
    """A prefix that matches runs of several projects resolves within the caller's projects only:
    bob (B) gets his run, alice (A) an answer that names none of B's runs, by id or by name."""
    env_b = {**team["env"], "LAUNCHER_SERVER": team["server"].url, "LAUNCHER_TOKEN": team["tokens"]["bob"]}
    r = run_cli_env("launch", str(team["specs"]["B"]), "--submit", "--yes", "--cheapest", "--cloud", "local", env=env_b)
    assert r.returncode == 0, r.stderr
    run_b, run_a = r.stdout.strip(), team["run_id"]
    common = next(i for i, (x, y) in enumerate(zip(run_a, run_b)) if x != y)
    prefix = run_a[: max(2, common)]
    assert run_b.startswith(prefix) and run_a.startswith(prefix)
    alice, bob = team["tokens"]["alice"], team["tokens"]["bob"]
    r = api(team, "GET", f"/api/v1/runs/{prefix}", alice)
    assert r.status_code in (200, 400), r.text
    assert run_b not in r.text and "hello-B" not in r.text
    if r.status_code == 200:
        assert r.json()["run_id"] != run_b
    r = api(team, "GET", f"/api/v1/runs/{prefix}", bob)
    assert r.status_code == 200 and r.json()["run_id"] == run_b and run_a not in r.text
    # The same through the real CLI (`logs` asks the server)
    env_a = {**team["env"], "LAUNCHER_SERVER": team["server"].url, "LAUNCHER_TOKEN": alice}
    r = run_cli_env("logs", prefix, env=env_a)
    assert run_b not in r.stdout + r.stderr and "hello-B" not in r.stdout + r.stderr
    # a name of B's run is not found for alice (and not hinted at)
    r = api(team, "GET", "/api/v1/runs/hello-B", alice)
    assert r.status_code == 404 and run_b not in r.text
