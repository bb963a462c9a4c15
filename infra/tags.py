"""The mandatory cost-allocation tags, and how they map to GCP labels.

Every billable resource a stack creates carries REQUIRED_TAGS (defined below):

    project, experiment, owner, cost-center, run-id, cluster,
    managed-by=gpu-launcher, created-at, expires-at

`build_tags` makes that set from a typed `TagInput` and refuses (InfraInputError naming every
missing one) before anything is planned or provisioned. Timestamps are UTC ISO 8601 with
seconds, e.g. `2026-11-30T08:00:00Z`.

AWS tags take the values as they are (checked against AWS's tag character rules).

GCP labels have stricter rules: keys and values at most 63 characters of lowercase letters,
digits, `_` and `-`; keys start with a lowercase letter; at most 64 labels. `to_gcp_labels`
maps tags to labels like this:

| tag                       | label                      | reversible |
|---------------------------|----------------------------|------------|
| key `cost-center`         | `cost-center` (unchanged)  | yes        |
| key `Team.Name`           | `team-name`                | no         |
| key `9lives`              | `k9lives` (prefix `k`)     | no         |
| value `2026-11-30T08:00:00Z` (created-at / expires-at) | `2026-11-30t08-00-00z` | yes |
| value `vision-ft_3` (already valid) | `vision-ft_3`    | yes        |
| value `Alice@Example.com` | `alice-example-com`        | no         |
| value longer than 63 chars | first 54 chars + `-` + 8 hex of its SHA-1 | no |

Lowercase first, then every character outside `[a-z0-9_-]` becomes `-`. `from_gcp_labels`
reverses what is reversible (the required keys, the timestamps, values that were already valid)
and passes other labels through unchanged. `label_is_lossless(key, value)` says whether a tag
survives the trip exactly. Two tags whose keys collide after sanitizing are refused.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from infra.errors import InfraInputError

MANAGED_BY_TAG = "managed-by"
MANAGED_BY_VALUE = "gpu-launcher"
# Tags every billable resource carries (AWS tags as they are, GCP labels through `to_gcp_labels`).
REQUIRED_TAGS = (
    "project",
    "experiment",
    "owner",
    "cost-center",
    "run-id",
    "cluster",
    "managed-by",
    "created-at",
    "expires-at",
)

TIMESTAMP_TAGS = ("created-at", "expires-at")
_TS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
_GCP_TS_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})t(\d{2})-(\d{2})-(\d{2})z$")

GCP_LABEL_MAX_CHARS = 63
GCP_MAX_LABELS = 64
_GCP_VALID_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_GCP_VALID_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_GCP_BAD_CHAR = re.compile(r"[^a-z0-9_-]")

# AWS: letters (any language), digits, spaces and _ . : / = + - @ ; key <= 128, value <= 256.
_AWS_TAG_CHARS = re.compile(r"^[\w .:/=+\-@]*$", re.UNICODE)
AWS_MAX_TAGS = 50


@dataclass(frozen=True)
class TagInput:
    """What the caller knows about a cluster; `build_tags` turns it into the tag set.

    `created_at` defaults to the injected clock's now; `expires_at` may be given directly or as
    `ttl_hours` after `created_at`. `extra` are additional user tags (never override required ones).
    """

    project: str | None = None
    experiment: str | None = None
    owner: str | None = None
    cost_center: str | None = None
    run_id: str | None = None
    cluster: str | None = None
    created_at: datetime | None = None
    expires_at: datetime | None = None
    ttl_hours: float | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


# tag key -> (TagInput field, how to supply it on the command line)
_FIELD_FOR_TAG = {
    "project": ("project", "--project"),
    "experiment": ("experiment", "--experiment"),
    "owner": ("owner", "--owner"),
    "cost-center": ("cost_center", "--cost-center"),
    "run-id": ("run_id", "--run-id"),
    "cluster": ("cluster", "--cluster"),
}


def format_timestamp(ts: datetime) -> str:
    """UTC, whole seconds, `Z` suffix. Naive datetimes are taken as UTC."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).strftime(_TS_FORMAT)


def parse_timestamp(value: str) -> datetime:
    if not _TS_RE.match(value):
        raise InfraInputError(f"bad timestamp {value!r}: expected UTC like 2026-11-30T08:00:00Z")
    return datetime.strptime(value, _TS_FORMAT).replace(tzinfo=UTC)


def build_tags(inp: TagInput, *, now: datetime | None = None) -> dict[str, str]:
    """The mandatory tag set (plus `extra`), in REQUIRED_TAGS order. Refuses when any is missing."""
    missing: list[str] = []
    values: dict[str, str] = {}
    for tag, (attr, _flag) in _FIELD_FOR_TAG.items():
        v = getattr(inp, attr)
        if v is None or not str(v).strip():
            missing.append(tag)
        else:
            values[tag] = str(v).strip()
    created = inp.created_at or now or datetime.now(UTC)
    if inp.expires_at is not None:
        expires: datetime | None = inp.expires_at
    elif inp.ttl_hours is not None:
        if inp.ttl_hours <= 0:
            raise InfraInputError(f"ttl must be positive, got {inp.ttl_hours} hours")
        expires = created + timedelta(hours=inp.ttl_hours)
    else:
        expires = None
        missing.append("expires-at")
    if missing:
        flags = [(_FIELD_FOR_TAG[m][1] if m in _FIELD_FOR_TAG else "--ttl-hours") for m in missing]
        raise InfraInputError(
            "missing mandatory tags: " + ", ".join(missing),
            hint="set them with " + " ".join(flags) + " (or `tags:` in the task spec)",
        )
    if format_timestamp(expires) <= format_timestamp(created):
        raise InfraInputError(f"expires-at {format_timestamp(expires)} is not after created-at {format_timestamp(created)}")
    tags = {
        "project": values["project"],
        "experiment": values["experiment"],
        "owner": values["owner"],
        "cost-center": values["cost-center"],
        "run-id": values["run-id"],
        "cluster": values["cluster"],
        MANAGED_BY_TAG: MANAGED_BY_VALUE,
        "created-at": format_timestamp(created),
        "expires-at": format_timestamp(expires),
    }
    for k, v in inp.extra.items():
        if k in tags:
            raise InfraInputError(f"extra tag {k!r} would override a mandatory tag")
        tags[k] = str(v)
    validate_tags(tags)
    return tags


def validate_tags(tags: Mapping[str, str]) -> None:
    """Refuse a tag set that lacks a mandatory tag or breaks AWS tag rules (one message)."""
    missing = [t for t in REQUIRED_TAGS if not str(tags.get(t, "")).strip()]
    if missing:
        raise InfraInputError("missing mandatory tags: " + ", ".join(missing))
    if tags[MANAGED_BY_TAG] != MANAGED_BY_VALUE:
        raise InfraInputError(f"tag {MANAGED_BY_TAG} must be {MANAGED_BY_VALUE!r}, got {tags[MANAGED_BY_TAG]!r}")
    for t in TIMESTAMP_TAGS:
        parse_timestamp(tags[t])
    if len(tags) > AWS_MAX_TAGS:
        raise InfraInputError(f"{len(tags)} tags; AWS allows at most {AWS_MAX_TAGS}")
    problems = []
    for k, v in tags.items():
        if not (1 <= len(k) <= 128) or not _AWS_TAG_CHARS.match(k) or k.lower().startswith("aws:"):
            problems.append(f"key {k!r}" + _bad_chars(k))
        elif len(v) > 256 or not _AWS_TAG_CHARS.match(v):
            problems.append(f"{k}={v!r}" + (_bad_chars(v) or " is longer than 256 characters"))
    if problems:
        raise InfraInputError(
            "invalid tags: " + "; ".join(problems),
            hint=AWS_TAG_RULE + "; " + GCP_LABEL_RULE,
        )


AWS_TAG_RULE = (
    "AWS tag keys and values accept letters of any language, digits, spaces and _ . : / = + - @ "
    "(keys up to 128 characters without an `aws:` prefix, values up to 256)"
)
GCP_LABEL_RULE = "GCP labels are made from the same tags: lowercased, and any other character becomes '-'"


def _bad_chars(text: str) -> str:
    bad = sorted({c for c in text if not _AWS_TAG_CHARS.match(c)})
    return (" has " + " ".join(repr(c) for c in bad) + (" (not allowed)" if bad else "")) if bad else ""


# ---- GCP labels ------------------------------------------------------------------------------


def _shorten(text: str) -> str:
    if len(text) <= GCP_LABEL_MAX_CHARS:
        return text
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]
    return text[: GCP_LABEL_MAX_CHARS - 9] + "-" + digest


def gcp_label_key(key: str) -> str:
    k = _GCP_BAD_CHAR.sub("-", key.lower())
    if not k or not k[0].isalpha() or not k[0].isascii():
        k = "k" + k
    return _shorten(k)


def gcp_label_value(value: str, *, key: str | None = None) -> str:
    if key in TIMESTAMP_TAGS and _TS_RE.match(value):
        return value.lower().replace(":", "-")
    return _shorten(_GCP_BAD_CHAR.sub("-", value.lower()))


def to_gcp_labels(tags: Mapping[str, str]) -> dict[str, str]:
    """Tags -> GCP labels (rules in the module docstring). Refuses key collisions and >64 labels."""
    labels: dict[str, str] = {}
    source: dict[str, str] = {}
    for k, v in tags.items():
        lk = gcp_label_key(k)
        if lk in labels:
            raise InfraInputError(f"tags {source[lk]!r} and {k!r} both become GCP label {lk!r}")
        labels[lk] = gcp_label_value(v, key=k)
        source[lk] = k
    if len(labels) > GCP_MAX_LABELS:
        raise InfraInputError(f"{len(labels)} labels; GCP allows at most {GCP_MAX_LABELS}")
    return labels


def from_gcp_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Best-effort reverse of `to_gcp_labels`: decodes timestamps; other labels pass through."""
    out: dict[str, str] = {}
    for k, v in labels.items():
        m = _GCP_TS_RE.match(v) if k in TIMESTAMP_TAGS else None
        out[k] = f"{m.group(1)}T{m.group(2)}:{m.group(3)}:{m.group(4)}Z" if m else v
    return out


def gcp_label_filter(tag_filter: Mapping[str, str]) -> dict[str, str]:
    """A tag filter expressed as the labels to match (for listing GCP instances by tag)."""
    return {gcp_label_key(k): gcp_label_value(v, key=k) for k, v in tag_filter.items()}


def label_is_lossless(key: str, value: str) -> bool:
    """True when `from_gcp_labels(to_gcp_labels({key: value}))` gives back exactly {key: value}."""
    back = from_gcp_labels({gcp_label_key(key): gcp_label_value(value, key=key)})
    return back == {key: value}


def is_valid_gcp_label(key: str, value: str) -> bool:
    return bool(_GCP_VALID_KEY.match(key)) and bool(_GCP_VALID_VALUE.match(value))


# ---- the tags of a run and of each of its clusters ---------------------------------------------


def run_tags(inp: TagInput, *, now: datetime | None = None) -> dict[str, str]:
    """The tags every resource of one run carries, all but `cluster` (each cluster adds its own).

    `inp.extra` (the spec's labels and tags) come first and the mandatory tags override them.
    `expires_at` or `ttl_hours` gives expiry. Values are taken as given; `validate_tags` checks
    the full set once the cluster is known.
    """
    created = inp.created_at or now or datetime.now(UTC)
    if inp.expires_at is not None:
        expires = inp.expires_at
    elif inp.ttl_hours is not None:
        expires = created + timedelta(hours=inp.ttl_hours)
    else:
        raise InfraInputError("run tags need expires_at or ttl_hours")
    return {
        **{k: str(v) for k, v in inp.extra.items()},
        "project": str(inp.project),
        "experiment": str(inp.experiment),
        "owner": str(inp.owner),
        "cost-center": str(inp.cost_center),
        "run-id": str(inp.run_id),
        MANAGED_BY_TAG: MANAGED_BY_VALUE,
        "created-at": format_timestamp(created),
        "expires-at": format_timestamp(expires),
    }


def cluster_tags(run: Mapping[str, str], *, cluster: str, run_id: str) -> dict[str, str]:
    """A run's tags for one of its clusters: `cluster` set, `run-id` and `managed-by` ensured."""
    return {**run, "cluster": cluster, "run-id": run_id, MANAGED_BY_TAG: MANAGED_BY_VALUE}
