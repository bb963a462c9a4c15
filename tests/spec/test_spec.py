"""Task spec parsing: the examples, every shape SkyPilot accepts that we use, and bad input
(one readable message naming the field and line, with a did-you-mean)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from launcher.errors import SpecError
from launcher.planning import Overrides
from launcher.spec import format_duration, load_spec, load_spec_text, parse_duration_seconds

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "task_specs").glob("*.yaml"))


def _load(text: str):
    return load_spec_text(textwrap.dedent(text))


def _error(text: str) -> str:
    with pytest.raises(SpecError) as ei:
        _load(text)
    return str(ei.value)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_parse(path):
    loaded = load_spec(path)
    assert loaded.spec.run
    assert loaded.spec.launcher.project == "examples"


def test_examples_exist():
    assert {p.name for p in EXAMPLES} >= {"train.yaml", "quickstart.yaml", "multinode.yaml"}
    assert load_spec(REPO / "task_specs" / "multinode.yaml").spec.num_nodes == 2


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_parse_with_skypilot(path, tmp_path, monkeypatch):
    sky = pytest.importorskip("sky")
    monkeypatch.setenv("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
    monkeypatch.chdir(path.parent)  # SkyPilot resolves `workdir` against the cwd
    loaded = load_spec(path)
    task = sky.Task.from_yaml_config(loaded.sky_config())
    assert task.run is not None
    assert task.num_nodes == loaded.spec.num_nodes
    # The GPU alternatives survive the conversion (only `infra: local` entries are dropped).
    if loaded.spec.wants_gpu:
        accs = {next(iter(r.accelerators)) for r in task.resources if r.accelerators}
        assert accs and accs <= {"T4", "L4"}


def test_train_example_lists_local_as_an_alternative():
    spec = load_spec(REPO / "task_specs" / "train.yaml").spec
    alts = spec.resources.alternatives()
    assert [a.placement().cloud for a in alts] == ["aws", "gcp", "local"]
    assert spec.wants_gpu and alts[0].accelerators == (("T4", 1), ("L4", 1))


# ---- shapes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "acc, expected",
    [
        ("A100:8", (("A100", 8),)),
        ("a100", (("A100", 1),)),
        ("{H100: 8, A100-80GB: 8}", (("H100", 8), ("A100-80GB", 8))),
        ("['L4:1', 'T4:2']", (("L4", 1), ("T4", 2))),
        ("{T4: null}", (("T4", 1),)),
    ],
)
def test_accelerator_shapes(acc, expected):
    spec = _load(f"resources:\n  accelerators: {acc}\nrun: x\n").spec
    assert spec.resources.accelerators == expected


@pytest.mark.parametrize(
    "infra, cloud, region, zone",
    [
        ("aws", "aws", None, None),
        ("aws/us-east-1", "aws", "us-east-1", None),
        ("gcp/us-central1/us-central1-a", "gcp", "us-central1", "us-central1-a"),
        ("local", "local", None, None),
        ("'*/us-east-1'", None, "us-east-1", None),
        ("k8s", "kubernetes", None, None),
    ],
)
def test_infra_forms(infra, cloud, region, zone):
    p = _load(f"resources:\n  infra: {infra}\nrun: x\n").spec.resources.placement()
    assert (p.cloud, p.region, p.zone) == (cloud, region, zone)


def test_cloud_region_zone_fields():
    p = _load("resources: {cloud: AWS, region: us-west-2}\nrun: x\n").spec.resources.placement()
    assert (p.cloud, p.region) == ("aws", "us-west-2")


def test_any_of_entries_override_the_base_block():
    spec = _load(
        """
        resources:
          accelerators: A100:8
          infra: aws/us-east-1
          use_spot: true
          any_of:
            - infra: gcp
            - accelerators: H100:8
              region: us-west-2
              cloud: aws
            - {}
        run: x
        """
    ).spec
    a, b, c = spec.resources.alternatives()
    assert (a.placement().cloud, a.placement().region, a.accelerators, a.use_spot) == ("gcp", None, (("A100", 8),), True)
    assert (b.placement().cloud, b.placement().region, b.accelerators) == ("aws", "us-west-2", (("H100", 8),))
    assert (c.placement().cloud, c.placement().region) == ("aws", "us-east-1")
    assert not spec.resources.is_ordered


def test_launcher_block():
    lb = _load(
        """
        run: x
        launcher:
          project: p1
          budget_usd: 12.5
          deadline: 1h30m
          expected_hours: 2
          checkpoint: {dir: /tmp/ck, interval: 10m, cost: 30s}
          max_restarts: 0
          recovery: next-offer
          seeds: {train: 1}
          data: [data/]
        """
    ).spec.launcher
    assert lb.deadline_hours == 1.5 and lb.checkpoint.interval_minutes == 10 and lb.checkpoint.cost_minutes == 0.5
    assert lb.max_restarts == 0 and lb.seeds == {"train": 1} and lb.budget_usd == 12.5


def test_checkpoint_cost_reaches_the_ranking_query():
    from launcher.planning.candidates import query_for

    loaded = _load("run: x\nresources: {accelerators: L4:1}\nlauncher: {checkpoint: {interval: 5m, cost: 15s}}\n")
    alt = loaded.spec.resources.alternatives()[0]
    q = query_for(alt, loaded, ("aws",), Overrides())
    assert (q.checkpoint_minutes, q.checkpoint_cost_minutes) == (5.0, 0.25)
    default = query_for(alt, _load("run: x\nresources: {accelerators: L4:1}\n"), ("aws",), Overrides())
    assert default.checkpoint_cost_minutes == 1.0  # OfferQuery's default


def test_bad_checkpoint_cost_is_rejected():
    with pytest.raises(SpecError, match="checkpoint.cost"):
        _load("run: x\nlauncher: {checkpoint: {cost: 20}}\n")


def test_envs_and_secrets_become_strings():
    spec = _load("envs: {A: 1, B: true, C: null}\nsecrets: {TOKEN: abc}\nrun: x\n").spec
    assert spec.env_strings() == {"A": "1", "B": "true", "C": "", "TOKEN": "abc"}


def test_secret_values_are_the_secrets_as_the_job_sees_them():
    spec = _load("envs: {A: visible}\nsecrets: {TOKEN: abc-123, PIN: ' 4711 '}\nrun: x\n").spec
    assert spec.secret_values() == ("abc-123", " 4711 ")


def test_durations():
    assert parse_duration_seconds("90m") == 5400
    assert parse_duration_seconds("1h30m") == 5400
    assert parse_duration_seconds("2d") == 172800
    assert format_duration(5400) == "1h30m"
    for bad in ("6", "soon", "", "0h", 6):
        with pytest.raises(ValueError):
            parse_duration_seconds(bad)


# ---- bad input: field, line, did-you-mean -------------------------------------------------------


def test_unknown_top_level_key_names_line_and_suggests():
    msg = _error("name: t\nrun: x\nworkdri: .\n")
    assert "line 3" in msg and "workdri" in msg and "did you mean 'workdir'" in msg


def test_unknown_key_inside_any_of_entry():
    msg = _error(
        """
        resources:
          any_of:
            - infra: aws
            - infra: gcp
              use_spto: true
        run: x
        """
    )
    assert "line 6" in msg and "resources.any_of[1].use_spto" in msg and "'use_spot'" in msg


def test_unknown_key_in_launcher_block():
    msg = _error("run: x\nlauncher:\n  budjet_usd: 3\n")
    assert "line 3" in msg and "launcher.budjet_usd" in msg and "'budget_usd'" in msg


def test_unknown_gpu_suggests():
    msg = _error("resources:\n  accelerators: H10O:8\nrun: x\n")
    assert "line 2" in msg and "unknown GPU 'H10O'" in msg and "'H100'" in msg


def test_unknown_cloud_in_infra_suggests():
    msg = _error("resources:\n  infra: asw/us-east-1\nrun: x\n")
    assert "line 2" in msg and "unknown cloud 'asw'" in msg and "'aws'" in msg


@pytest.mark.parametrize(
    "text, needle",
    [
        ("run: x\nlauncher:\n  deadline: 6\n", "durations are strings with a unit"),
        ("run: x\nlauncher:\n  deadline: soonish\n", "malformed duration"),
        ("run: x\nnum_nodes: 0\n", "num_nodes"),
        ("run: x\nresources:\n  accelerators: A100:0\n", "whole number >= 1"),
        ("run: x\nresources:\n  accelerators: A100:1.5\n", "whole number >= 1"),
        ("run: x\nresources:\n  infra: aws\n  region: us-east-1\n", "either `infra` or `cloud`"),
        ("run: x\nresources:\n  infra: local/here\n", "takes no region"),
        ("run: x\nresources:\n  cpus: lots\n", "cpus must be a number"),
        ("run: x\nresources:\n  any_of: [{infra: aws}]\n  ordered: [{infra: gcp}]\n", "either `any_of` or `ordered`"),
        ("name: t\n", "neither `run` nor `setup`"),
        ("setup: pip install x\n", "`setup` but no `run`: nothing to launch"),
        ("setup: pip install x\nrun: '  '\n", "put the job's commands in `run:`"),
        ("run: x\nenvs: {1BAD: x}\n", "not a valid environment variable name"),
        ("run: x\nlauncher:\n  budget_usd: -1\n", "greater than 0"),
        ("run: x\nlauncher:\n  max_restarts: -1\n", "max_restarts"),
    ],
)
def test_bad_values(text, needle):
    assert needle in _error(text)


def test_several_problems_are_listed_in_line_order():
    msg = _error("run: x\nlauncher:\n  budjet_usd: 3\nresources:\n  acelerators: A100\n")
    assert "2 problems" in msg
    assert msg.index("line 3") < msg.index("line 5")


@pytest.mark.parametrize(
    "text, needle",
    [
        ("run: [unclosed\n", "not valid YAML"),
        ("", "empty"),
        ("- a\n- b\n", "mapping"),
        ("run: a\n---\nrun: b\n", "several YAML documents"),
    ],
)
def test_malformed_files(text, needle):
    assert needle in _error(text)


def test_yaml_syntax_error_has_a_line():
    assert "line 3" in _error("name: t\nrun: x\nresources: {a: [}\n")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)


def test_relative_paths_resolve_against_the_spec_file(tmp_path):
    (tmp_path / "sub").mkdir()
    f = tmp_path / "sub" / "t.yaml"
    f.write_text("workdir: .\nrun: x\n")
    assert load_spec(f).workdir == (tmp_path / "sub").resolve()


def test_sky_config_drops_our_block_and_local_alternatives():
    cfg = _load(
        """
        resources:
          accelerators: T4:1
          ordered: [{infra: aws}, {infra: local}]
        run: x
        launcher: {project: p}
        """
    ).sky_config()
    assert "launcher" not in cfg and cfg["resources"]["ordered"] == [{"infra": "aws"}]
