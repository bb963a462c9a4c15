"""Contained (real CLI): checkpoint dirs that climb out or point outside the allowed roots are
refused before anything is written; file mounts the local backend skips are said at launch;
terminal control characters in names never reach table output."""

from __future__ import annotations

from tests.conftest import run_cli

BASE = """name: {name}
resources: {{infra: local}}
run: echo ok
launcher: {{project: p, owner: ana, experiment: e, expected_hours: 0.01, budget_usd: 1{extra}}}
"""


def test_checkpoint_dir_outside_the_allowed_roots_is_refused(tmp_path, launcher_home):
    for bad, needle in (("../../elsewhere", "climbs out with '..'"), ("/etc/launcher-ckpt", "outside the allowed roots")):
        spec = tmp_path / "s.yaml"
        spec.write_text(BASE.format(name="ck", extra=f", checkpoint: {{dir: '{bad}'}}"))
        res = run_cli("launch", str(spec), "--yes", timeout=60)
        assert res.returncode == 2, (bad, res.stderr)
        assert needle in res.stderr, res.stderr
        assert not (launcher_home / "ledger.db").exists()
    ok = tmp_path / "ok.yaml"
    ok.write_text(BASE.format(name="ck", extra=", checkpoint: {dir: ckpts}"))
    assert run_cli("launch", str(ok), "--yes", timeout=120).returncode == 0


def test_skipped_file_mounts_are_reported_at_launch(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(BASE.format(name="fm", extra="") + "file_mounts: {/data/x: s3://bucket/x, ~/cfg: ./missing.cfg}\n")
    res = run_cli("launch", str(spec), "--yes", timeout=120)
    assert res.returncode == 0, res.stderr
    assert "file_mounts '/data/x' will be skipped on the local backend: bucket URLs are not mounted locally" in res.stderr
    assert "file_mounts '~/cfg' will be skipped on the local backend: source" in res.stderr


def test_control_characters_in_names_never_reach_the_table(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(BASE.format(name='"evil\\e[2J\\e]8;;http://x\\a"', extra=""))
    res = run_cli("launch", str(spec), "--yes", timeout=120)
    assert res.returncode == 0, res.stderr
    listing = run_cli("runs", "list", timeout=60)
    assert listing.returncode == 0, listing.stderr
    assert "\x1b" not in listing.stdout and "\x07" not in listing.stdout
    assert "evil\\x1b[2J" in listing.stdout
