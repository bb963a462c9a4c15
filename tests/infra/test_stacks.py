"""Stacks: the CLI-missing path writes nothing, backend and passphrase handling, listing a file
backend without the CLI, outputs -> ClusterHandle, and (only where `pulumi` exists) a real
`pulumi preview` against moto_server."""

from __future__ import annotations

import json
import os
import stat

import pytest

from infra import stacks
from infra.cli_check import INSTALL_HINT, find_pulumi
from infra.errors import InfraInputError as BadInputError
from infra.errors import ToolMissingError
from tests.infra.helpers import make_spec


@pytest.fixture
def no_pulumi(tmp_path, monkeypatch):
    """A PATH and HOME where no `pulumi` can be found."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    monkeypatch.delenv(stacks.BACKEND_ENV, raising=False)
    assert find_pulumi() is None


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("op", ["preview", "up", "destroy"])
def test_without_cli_every_operation_refuses_before_writing_anything(no_pulumi, launcher_home, op):
    spec = make_spec("aws")
    call = {
        "preview": lambda: stacks.preview(spec, state_home=launcher_home),
        "up": lambda: stacks.up(spec, state_home=launcher_home),
        "destroy": lambda: stacks.destroy("vision", "c1", state_home=launcher_home),
    }[op]
    with pytest.raises(ToolMissingError) as e:
        call()
    assert "Pulumi CLI" in e.value.message and f"infra {op}" in e.value.message
    assert e.value.hint == INSTALL_HINT and "get.pulumi.com" in INSTALL_HINT
    from launcher.errors import as_launcher_error

    assert int(as_launcher_error(e.value).exit_code) == 5  # the CLI's PROVIDER exit code
    assert _tree(launcher_home) == []  # no state dir, no passphrase file


def test_without_cli_bad_spec_for_up_still_reports_the_missing_cli_first(no_pulumi, launcher_home):
    spec = make_spec("aws", ssh_public_key=None)
    with pytest.raises(ToolMissingError):
        stacks.up(spec, state_home=launcher_home)
    assert _tree(launcher_home) == []


def test_list_on_a_remote_backend_needs_the_cli(no_pulumi, launcher_home, monkeypatch):
    monkeypatch.setenv(stacks.BACKEND_ENV, "s3://team-state/pulumi")
    with pytest.raises(ToolMissingError):
        stacks.list_stacks(launcher_home)
    assert _tree(launcher_home) == []


def test_find_pulumi_on_path_or_in_home(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "pulumi"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert find_pulumi(search_path=str(bin_dir), home=tmp_path / "nohome") == exe
    home = tmp_path / "h"
    (home / ".pulumi" / "bin").mkdir(parents=True)
    hexe = home / ".pulumi" / "bin" / "pulumi"
    hexe.write_text("#!/bin/sh\n")
    assert find_pulumi(search_path="", home=home) is None  # not executable
    hexe.chmod(0o755)
    assert find_pulumi(search_path="", home=home) == hexe


def test_backend_url_default_and_configured(launcher_home, monkeypatch):
    monkeypatch.delenv(stacks.BACKEND_ENV, raising=False)
    assert stacks.backend_url(launcher_home) == f"file://{(launcher_home / 'pulumi').resolve()}"
    monkeypatch.setenv(stacks.BACKEND_ENV, "gs://team-state/pulumi")
    assert stacks.backend_url(launcher_home) == "gs://team-state/pulumi"
    monkeypatch.setenv(stacks.BACKEND_ENV, "http://example.com/state")
    with pytest.raises(BadInputError, match="unsupported backend"):
        stacks.backend_url(launcher_home)


def test_passphrase_file_is_private_stable_and_repaired_when_empty(launcher_home, monkeypatch):
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    env = stacks.passphrase_env(launcher_home)
    path = launcher_home / stacks.PASSPHRASE_FILE_NAME
    assert env == {"PULUMI_CONFIG_PASSPHRASE_FILE": str(path)}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = path.read_text()
    assert len(secret) >= 32
    assert stacks.ensure_passphrase_file(launcher_home) == path and path.read_text() == secret  # never regenerated
    path.write_text("")  # as after a crash between create and write
    stacks.ensure_passphrase_file(launcher_home)
    assert len(path.read_text()) >= 32 and path.read_text() != secret


def test_passphrase_from_env_writes_no_file(launcher_home, monkeypatch):
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "s3cret")
    assert stacks.passphrase_env(launcher_home) == {"PULUMI_CONFIG_PASSPHRASE": "s3cret"}
    assert _tree(launcher_home) == []


def test_list_reads_a_file_backend_without_the_cli(no_pulumi, launcher_home):
    assert stacks.list_stacks(launcher_home) == []
    d = launcher_home / "pulumi" / ".pulumi" / "stacks" / "gpu-launcher"
    d.mkdir(parents=True)
    checkpoint = {
        "version": 3,
        "checkpoint": {
            "stack": "organization/gpu-launcher/vision.c1",
            "latest": {
                "manifest": {"time": "2026-11-30T08:10:00.123456789Z", "version": "v3.200.0"},
                "resources": [{"urn": "a"}, {"urn": "b"}, {"urn": "c"}],
            },
        },
    }
    (d / "vision.c1.json").write_text(json.dumps(checkpoint))
    (d / "vision.c1.json.bak").write_text("{}")
    (d / "nlp.big.json").write_text('{"checkpoint": {"lat')  # torn/being written: still listed
    found = {s.name: s for s in stacks.list_stacks(launcher_home)}
    assert set(found) == {"vision.c1", "nlp.big"}
    s = found["vision.c1"]
    assert (s.project, s.cluster, s.resource_count) == ("vision", "c1", 3)
    assert s.last_update is not None and (s.last_update.year, s.last_update.minute) == (2026, 10)
    assert found["nlp.big"].resource_count is None


def test_stack_outputs_become_a_cluster_handle():
    out = stacks.StackOutputs.from_outputs(
        "vision.c1",
        {"cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "ssh_user": "ubuntu",
         "instance_ids": ["i-1", "i-2"], "public_ips": ["198.51.100.1", "198.51.100.2"],
         "private_ips": ["10.77.0.5", "10.77.0.6"], "bucket": "vision-c1-ckpt-x"},
    )
    from launcher.providers.stack_backed import handle_from_outputs

    h = handle_from_outputs(out, "c1")
    assert [(n.instance_id, n.ip, n.rank) for n in h.nodes] == [("i-1", "198.51.100.1", 0), ("i-2", "198.51.100.2", 1)]
    assert (h.provider, h.region, h.stack, h.extra["bucket"]) == ("aws", "us-east-1", "vision.c1", "vision-c1-ckpt-x")


@pytest.mark.skipif(find_pulumi() is None, reason="needs the Pulumi CLI (not installed here)")
def test_real_pulumi_preview_against_moto(aws_env, launcher_home, monkeypatch):
    """Only where `pulumi` (and the aws plugin) exist: a real preview through the Automation API."""
    from infra.spec import AwsProviderSettings

    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test")
    spec = make_spec("aws", num_nodes=2, image_id="ami-12c6146b", aws=AwsProviderSettings.for_endpoint(aws_env))
    result = stacks.preview(spec, state_home=launcher_home)
    assert result.changes.get("create", 0) >= 10
    assert (launcher_home / "pulumi").is_dir()
    assert os.path.exists(launcher_home / stacks.PASSPHRASE_FILE_NAME) is False  # env passphrase used


def test_workspace_options_pin_backend_secrets_and_the_found_binary(tmp_path, launcher_home, monkeypatch):
    """With a stand-in `pulumi` (it only answers `version`), check what we hand the Automation API."""
    from pulumi import automation as auto

    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    monkeypatch.delenv(stacks.BACKEND_ENV, raising=False)
    exe = tmp_path / "pulumi-root" / "bin" / "pulumi"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\necho v3.272.0\n")
    exe.chmod(0o755)

    def program() -> None:
        return None

    opts = stacks._workspace_options(exe, program, launcher_home)
    url = f"file://{(launcher_home / 'pulumi').resolve()}"
    assert opts.project_settings.name == "gpu-launcher"
    assert opts.project_settings.backend.url == url
    assert opts.env_vars["PULUMI_BACKEND_URL"] == url
    assert opts.env_vars["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(launcher_home / stacks.PASSPHRASE_FILE_NAME)
    assert opts.secrets_provider == "passphrase"
    assert isinstance(opts.pulumi_command, auto.PulumiCommand) and opts.pulumi_command.command == str(exe)
    assert opts.program is program
    assert (launcher_home / "pulumi").is_dir()


def test_server_stack_with_a_failing_pulumi_cli_is_an_infra_error_not_a_crash(tmp_path, launcher_home, monkeypatch):
    """`launcher infra server up` where a `pulumi` exists: the server's stack is opened with this
    home's backend and passphrase, and a failing CLI surfaces as our InfraProviderError (a stand-in
    `pulumi` that answers `version` and fails everything else, as a broken install would)."""
    from infra.errors import InfraProviderError
    from infra.server_program import ServerInfraSpec
    from launcher.providers import server_stack as deploy

    monkeypatch.delenv(stacks.BACKEND_ENV, raising=False)
    exe = tmp_path / "pulumi-root" / "bin" / "pulumi"
    exe.parent.mkdir(parents=True)
    exe.write_text(
        '#!/bin/sh\nif [ "$1" = version ]; then echo v3.272.0; exit 0; fi\n'
        'echo "error: the stand-in pulumi refuses: $*" >&2; exit 255\n'
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    spec = ServerInfraSpec(region="us-east-1", project="team")
    with pytest.raises(InfraProviderError) as e:
        deploy.up(spec, None)
    assert "stand-in pulumi refuses" in e.value.message and spec.stack_name in e.value.message
    assert (launcher_home / "pulumi").is_dir()  # this home's file backend, as the cluster stacks use
