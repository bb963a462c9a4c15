"""Stack and resource names: deterministic, valid, and distinct where inputs differ."""

from __future__ import annotations

import random
import re
import string

import pytest

from infra.naming import bucket_name, parse_stack_name, resource_prefix, stack_name
from infra.errors import InfraInputError as BadInputError


def test_clean_names_are_kept_readable():
    assert stack_name("vision", "c1") == "vision.c1"
    assert parse_stack_name("vision.c1") == ("vision", "c1")
    assert resource_prefix("vision", "c1") == "vision-c1"


def test_separator_keeps_ambiguous_splits_apart():
    assert stack_name("a-b", "c") != stack_name("a", "b-c")


def test_changed_names_get_a_hash_so_they_do_not_collide():
    assert stack_name("ML Team", "c1") != stack_name("ml-team", "c1")
    assert stack_name("ML Team", "c1").startswith("ml-team-")
    assert stack_name("ML Team", "c1") == stack_name("ML Team", "c1")  # deterministic


def test_empty_parts_are_refused():
    with pytest.raises(BadInputError):
        stack_name("", "c1")


@pytest.mark.parametrize("seed", range(3))
def test_property_names_are_valid_for_pulumi_gcp_and_s3(seed):
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + " ._-/@"
    seen: dict[str, tuple[str, str]] = {}
    for _ in range(300):
        proj = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120)))
        clus = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120)))
        if not proj.strip() or not clus.strip():
            continue
        s = stack_name(proj, clus)
        assert re.fullmatch(r"[a-z0-9_-]+\.[a-z0-9_-]+", s) and len(s) <= 100, s
        assert seen.setdefault(s, (proj, clus)) == (proj, clus), (s, seen[s], proj, clus)
        p = resource_prefix(proj, clus)
        assert re.fullmatch(r"[a-z][a-z0-9-]*", p) and len(p) <= 40, p
        b = bucket_name(proj, clus)
        assert re.fullmatch(r"[a-z][a-z0-9-]{2,62}", b), b
