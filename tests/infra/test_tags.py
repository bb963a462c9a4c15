"""Tags: the mandatory set, refusal of missing ones, AWS rules, and the GCP label mapping."""

from __future__ import annotations

import random
import re
import string
from datetime import UTC, datetime

import pytest

from infra.tags import (
    GCP_LABEL_MAX_CHARS,
    TagInput,
    build_tags,
    from_gcp_labels,
    gcp_label_filter,
    gcp_label_key,
    gcp_label_value,
    is_valid_gcp_label,
    label_is_lossless,
    to_gcp_labels,
    validate_tags,
)
from infra.errors import InfraInputError as BadInputError
from launcher.providers.base import REQUIRED_TAGS

NOW = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)
FULL = TagInput(
    project="vision", experiment="ft-3", owner="alice@example.com", cost_center="CC-1234",
    run_id="r-20261130-01", cluster="c1", ttl_hours=6,
)


def test_build_tags_has_exactly_the_required_keys_in_order():
    tags = build_tags(FULL, now=NOW)
    assert tuple(tags) == REQUIRED_TAGS
    assert tags["managed-by"] == "gpu-launcher"
    assert tags["created-at"] == "2026-11-30T08:00:00Z"
    assert tags["expires-at"] == "2026-11-30T14:00:00Z"
    assert tags["cost-center"] == "CC-1234"


def test_expires_at_given_directly_and_naive_times_are_utc():
    tags = build_tags(
        TagInput(**{**FULL.__dict__, "ttl_hours": None, "expires_at": datetime(2026, 12, 1, 0, 0)}), now=NOW
    )
    assert tags["expires-at"] == "2026-12-01T00:00:00Z"


def test_missing_tags_are_all_named_with_the_flags_to_set_them():
    with pytest.raises(BadInputError) as e:
        build_tags(TagInput(project="vision", cluster="c1", owner="  "), now=NOW)
    msg = str(e.value)
    for missing in ("experiment", "owner", "cost-center", "run-id", "expires-at"):
        assert missing in msg
    assert "project" not in e.value.message.split(":", 1)[1]
    assert "--cost-center" in e.value.hint and "--ttl-hours" in e.value.hint


def test_expiry_must_follow_creation_and_ttl_must_be_positive():
    with pytest.raises(BadInputError, match="not after"):
        build_tags(TagInput(**{**FULL.__dict__, "ttl_hours": None, "expires_at": NOW}), now=NOW)
    with pytest.raises(BadInputError, match="positive"):
        build_tags(TagInput(**{**FULL.__dict__, "ttl_hours": -1}), now=NOW)


def test_extra_tags_cannot_override_mandatory_ones_and_must_follow_aws_rules():
    tags = build_tags(TagInput(**{**FULL.__dict__, "extra": {"team": "cv"}}), now=NOW)
    assert tags["team"] == "cv"
    with pytest.raises(BadInputError, match="override"):
        build_tags(TagInput(**{**FULL.__dict__, "extra": {"owner": "mallory"}}), now=NOW)
    with pytest.raises(BadInputError, match="invalid tags"):
        build_tags(TagInput(**{**FULL.__dict__, "extra": {"aws:x": "y"}}), now=NOW)
    with pytest.raises(BadInputError, match="invalid tags"):
        build_tags(TagInput(**{**FULL.__dict__, "extra": {"note": "a;b"}}), now=NOW)


def test_validate_tags_refuses_wrong_managed_by_and_bad_timestamps():
    tags = build_tags(FULL, now=NOW)
    with pytest.raises(BadInputError, match="managed-by"):
        validate_tags({**tags, "managed-by": "someone-else"})
    with pytest.raises(BadInputError, match="timestamp"):
        validate_tags({**tags, "expires-at": "tomorrow"})
    with pytest.raises(BadInputError, match="missing mandatory tags: run-id"):
        validate_tags({k: v for k, v in tags.items() if k != "run-id"})


# ---- GCP labels -----------------------------------------------------------------------------

def test_required_tags_become_valid_labels_and_come_back_exactly():
    tags = build_tags(TagInput(**{**FULL.__dict__, "owner": "alice", "cost_center": "cc-1234"}), now=NOW)
    labels = to_gcp_labels(tags)
    assert labels["created-at"] == "2026-11-30t08-00-00z"
    assert labels["expires-at"] == "2026-11-30t14-00-00z"
    assert all(is_valid_gcp_label(k, v) for k, v in labels.items())
    assert from_gcp_labels(labels) == tags


def test_lossy_values_are_sanitized_and_reported_as_lossy():
    assert gcp_label_value("Alice@Example.com") == "alice-example-com"
    assert gcp_label_key("Team.Name") == "team-name"
    assert gcp_label_key("9lives") == "k9lives"
    assert not label_is_lossless("owner", "Alice@Example.com")
    assert label_is_lossless("owner", "alice")
    assert label_is_lossless("expires-at", "2026-11-30T14:00:00Z")
    # a timestamp-shaped value under another key is just a value
    assert not label_is_lossless("note", "2026-11-30T14:00:00Z")


def test_long_values_are_shortened_with_a_hash_so_they_stay_distinct():
    a, b = "x" * 70 + "a", "x" * 70 + "b"
    la, lb = gcp_label_value(a), gcp_label_value(b)
    assert len(la) == len(lb) == GCP_LABEL_MAX_CHARS
    assert la != lb
    assert la.startswith("x" * 54 + "-")


def test_colliding_keys_are_refused():
    with pytest.raises(BadInputError, match="both become GCP label 'team-name'"):
        to_gcp_labels({"Team.Name": "a", "team-name": "b"})


def test_label_filter_matches_what_to_gcp_labels_wrote():
    tags = build_tags(FULL, now=NOW)
    labels = to_gcp_labels(tags)
    flt = gcp_label_filter({"owner": tags["owner"], "expires-at": tags["expires-at"]})
    assert flt.items() <= labels.items()


_ALPHABET = string.ascii_letters + string.digits + " _-.:/=+@äß"


@pytest.mark.parametrize("seed", range(5))
def test_property_every_sanitized_label_obeys_gcp_rules(seed):
    rng = random.Random(seed)
    for _ in range(400):
        key = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 90)))
        value = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 120)))
        lk, lv = gcp_label_key(key), gcp_label_value(value, key=key)
        assert re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", lk), (key, lk)
        assert re.fullmatch(r"[a-z0-9_-]{0,63}", lv), (value, lv)
        # idempotent: a valid label maps to itself
        assert gcp_label_key(lk) == lk and gcp_label_value(lv) == lv
        # lossless exactly when the value was already a valid label value (and key a valid key)
        already_valid = is_valid_gcp_label(key, value)
        assert label_is_lossless(key, value) == already_valid, (key, value)


@pytest.mark.parametrize("seed", range(3))
def test_property_timestamps_roundtrip(seed):
    rng = random.Random(seed)
    for _ in range(200):
        ts = datetime(rng.randint(2000, 2099), rng.randint(1, 12), rng.randint(1, 28),
                      rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59), tzinfo=UTC)
        s = ts.strftime("%Y-%m-%dT%H:%M:%SZ")
        for key in ("created-at", "expires-at"):
            lv = gcp_label_value(s, key=key)
            assert is_valid_gcp_label(key, lv)
            assert from_gcp_labels({key: lv}) == {key: s}
