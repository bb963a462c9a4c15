"""One loader for user-edited YAML files: line numbers, mappings only, field paths, did-you-mean
at any depth (nested models, dicts and lists of models)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from launcher.config_file import fields_at, load_yaml_model
from launcher.errors import BadInputError, SpecError


class Leaf(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limit_usd: float = 1.0


class Root(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "x"
    by_key: dict[str, Leaf] = {}
    items: list[Leaf] = []
    maybe: Leaf | None = None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("by_key: {a: {limit_uds: 3}}", "unknown field 'by_key.a.limit_uds' (did you mean 'limit_usd'?)"),
        ("items: [{limit_usd: 1}, {limitusd: 2}]", "did you mean 'limit_usd'"),
        ("maybe: {limt_usd: 1}", "did you mean 'limit_usd'"),
        ("nmae: y", "did you mean 'name'"),
        ("by_key: {a: {limit_usd: lots}}", "by_key.a.limit_usd: Input should be a valid number"),
        ("name: [1, 2\n", ":2: not valid YAML"),
        ("- 1\n", "must be a mapping, got list"),
    ],
)
def test_errors_name_the_field_and_suggest(tmp_path, text, needle):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(SpecError) as e:
        load_yaml_model(p, Root)
    assert needle in str(e.value)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(BadInputError, match="not found"):
        load_yaml_model(tmp_path / "none.yaml", Root)
    assert load_yaml_model(tmp_path / "none.yaml", Root, missing_ok=True) == Root()
    (tmp_path / "empty.yaml").write_text("")
    assert load_yaml_model(tmp_path / "empty.yaml", Root) == Root()


def test_fields_at_walks_models_dicts_and_lists():
    assert fields_at(Root, ()) == ["name", "by_key", "items", "maybe"]
    assert fields_at(Root, ("by_key", "anything")) == ["limit_usd"]
    assert fields_at(Root, ("items", 3)) == ["limit_usd"]
    assert fields_at(Root, ("maybe",)) == ["limit_usd"]


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("launcher.planning.budget", "BudgetsConfig"),
        ("launcher.clusters.models", "ClustersFile"),
        ("launcher.server.settings", "UserConfig"),
    ],
)
def test_optional_files_defaults_need_no_schema_build_and_equal_validated_defaults(tmp_path, module, name):
    import importlib
    import subprocess
    import sys

    from tests.conftest import REPO

    model = getattr(importlib.import_module(module), name)
    missing = load_yaml_model(tmp_path / "absent.yaml", model, missing_ok=True)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert missing == model() == load_yaml_model(empty, model)  # model(): validated defaults
    assert missing.model_dump() == model().model_dump() and missing.model_fields_set == set()
    # in a fresh interpreter a missing file leaves the schema unbuilt (what a plain launch reads)
    probe = (
        f"import sys; from launcher.config_file import load_yaml_model; from {module} import {name} as M\n"
        "m = load_yaml_model(sys.argv[1], M, missing_ok=True)\n"
        "print(M.__pydantic_complete__)\n"
    )
    p = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "absent.yaml")], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "False"


def test_an_optional_file_with_content_is_still_validated(tmp_path):
    from launcher.planning.budget import BudgetsConfig

    p = tmp_path / "budgets.yaml"
    p.write_text("budgets:\n  - project: vision\n")
    with pytest.raises(SpecError, match="set monthly_limit_usd and/or hourly_burn_limit_usd_per_hour"):
        load_yaml_model(p, BudgetsConfig, missing_ok=True)
    p.write_text("budgets:\n  - {project: vision, monthly_limit_usd: 10}\n  - {project: vision, monthly_limit_usd: 5}\n")
    with pytest.raises(SpecError, match="listed twice"):
        load_yaml_model(p, BudgetsConfig, missing_ok=True)
