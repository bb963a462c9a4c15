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
