"""The ledger schema (SQLAlchemy Core). Any change here needs an Alembic revision in
migrations/versions/ (tests/ledger/test_migrations.py fails on drift)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from launcher.ledger.types import BigIntPK, UtcDateTime

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("spec_hash", String(64), nullable=False),
    Column("spec_yaml", Text, nullable=False),
    Column("state", String(32), nullable=False),
    Column("project", String(255), nullable=False),
    Column("experiment", String(255)),
    Column("owner", String(255)),
    Column("cost_center", String(255)),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("ended_at", UtcDateTime),
    Column("end_reason", Text),
    Column("budget_usd", Float),
    Column("deadline_at", UtcDateTime),
    # provenance
    Column("code_revision", String(64)),
    Column("code_dirty_hash", String(64)),
    Column("lockfile_hash", String(64)),
    Column("image", Text),
    Column("seeds", JSON),
    Column("data_hash", String(64)),
    Column("host", String(255)),
    Column("launcher_version", String(64)),
    Index(None, "project", "created_at"),
    Index(None, "owner", "created_at"),
    Index(None, "state"),
    Index(None, "name"),
)

attempts = Table(
    "attempts",
    metadata,
    Column("attempt_id", String(96), primary_key=True),
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("cloud", String(32), nullable=False),
    Column("region", String(64), nullable=False),
    Column("zone", String(64)),
    Column("instance_type", String(128), nullable=False),
    Column("accelerator", String(64)),
    Column("accelerator_count", Integer, nullable=False),
    Column("num_nodes", Integer, nullable=False),
    Column("spot", Boolean, nullable=False),
    Column("price_usd_per_hour", Float, nullable=False),  # per node
    Column("on_demand_price_usd_per_hour", Float),
    Column("cluster", String(255)),
    Column("state", String(32), nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Column("ended_at", UtcDateTime),
    Column("end_reason", String(64)),
    Column("exit_code", Integer),
    Column("billed_seconds", Float),
    # the cloud account billed (0006): AWS account id, GCP project; NULL when unknown
    Column("billing_account_id", String(128)),
    Column("billing_account_name", String(255)),
    UniqueConstraint("run_id", "seq"),
    Index(None, "started_at"),
    Index(None, "ended_at"),
    Index(None, "cluster"),
)

events = Table(
    "events",
    metadata,
    Column("id", BigIntPK, primary_key=True, autoincrement=True),
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("attempt_id", String(96), ForeignKey("attempts.attempt_id", ondelete="CASCADE")),
    Column("at", UtcDateTime, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("data", JSON, nullable=False),
    Index(None, "run_id", "id"),
    Index(None, "kind", "at"),
    Index(None, "attempt_id", "kind", "at"),  # 0002: per-attempt event facts for reports
)

# Per ended attempt: the event facts cost reports need (see launcher/ledger/facts.py).
attempt_facts = Table(
    "attempt_facts",
    metadata,
    Column("attempt_id", String(96), ForeignKey("attempts.attempt_id", ondelete="CASCADE"), primary_key=True),
    Column("teardown_at", UtcDateTime),
    Column("last_ckpt_at", UtcDateTime),
    Column("resume_at", UtcDateTime),
    Column("overhead_s", Float),
    Column("n_price", Integer),
)

# Per ended run: its cost by UTC month, cloud and region, and in one row (see launcher/ledger/rollup.py), so a
# grouped report over a large ledger aggregates these rows in the database instead of reading
# every attempt. Times are epoch seconds (floats): the rows are summed and compared, never shown.
cost_rollup = Table(
    "cost_rollup",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("month_start_s", Float, nullable=False),
    Column("cloud", String(32)),
    Column("region", String(64)),
    Column("project", String(255)),
    Column("experiment", String(255)),
    Column("owner", String(255)),
    Column("cost_center", String(255)),
    Column("run_first_s", Float, nullable=False),
    Column("run_last_s", Float, nullable=False),
    Column("compute_usd", Float, nullable=False),
    Column("list_compute_usd", Float, nullable=False),
    Column("node_hours", Float, nullable=False),
    Column("gpu_hours", Float, nullable=False),
    Column("restart_overhead_usd", Float, nullable=False),
    Column("preemption_loss_usd", Float, nullable=False),
    Column("idle_usd", Float, nullable=False),
    Column("storage_gb_hours", Float, nullable=False),
    Column("preemptions", Integer, nullable=False),
    Column("attempts_started", Integer, nullable=False),
    Column("attempt_segments", Integer, nullable=False),
    Column("seg_start_s", Float, nullable=False),
    Column("seg_end_s", Float, nullable=False),
    Column("compute_end_s", Float),
    Column("run_count_bits", Integer, nullable=False),
    Column("storage_usd", Float, nullable=False),
    Column("grain", Integer, nullable=False),
    Index(None, "run_id"),
)

# One row per run whose cost_rollup rows are written (also when it has none): a run without a
# row here is read attempt by attempt. first_s/last_s: the extent of its rows (NULL: no rows).
cost_rollup_runs = Table(
    "cost_rollup_runs",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("first_s", Float),
    Column("last_s", Float),
)

# No foreign key to runs: the reaper records clusters it finds whose run this ledger never saw.
clusters = Table(
    "clusters",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("provider", String(32), nullable=False),
    Column("region", String(64)),
    Column("zone", String(64)),
    Column("stack", String(255)),
    Column("state", String(32), nullable=False),
    Column("run_id", String(64)),
    Column("project", String(255)),
    Column("nodes", JSON, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("terminated_at", UtcDateTime),
    Index(None, "state"),
    Index(None, "run_id"),
)

# Tags of runs and clusters: entity_type is 'run' or 'cluster'.
tags = Table(
    "tags",
    metadata,
    Column("entity_type", String(16), primary_key=True),
    Column("entity_id", String(255), primary_key=True),
    Column("key", String(128), primary_key=True),
    Column("value", String(512), nullable=False),
    Index(None, "key", "value"),
)

# Latest beat only (one row per subject): subject_type is 'run' or 'cluster'.
heartbeats = Table(
    "heartbeats",
    metadata,
    Column("subject_type", String(16), primary_key=True),
    Column("subject_id", String(255), primary_key=True),
    Column("at", UtcDateTime, nullable=False),
)

reap_audit = Table(
    "reap_audit",
    metadata,
    Column("id", BigIntPK, primary_key=True, autoincrement=True),
    Column("at", UtcDateTime, nullable=False),
    Column("pass_id", String(64)),
    Column("provider", String(32), nullable=False),
    Column("region", String(64), nullable=False),
    Column("instance_id", String(255), nullable=False),
    Column("cluster", String(255)),
    Column("project", String(255)),
    Column("decision", String(16), nullable=False),
    Column("action", String(32)),
    Column("reasons", JSON, nullable=False),
    Column("hourly_price_usd", Float),
    Column("estimated_saving_usd", Float),
    Column("ok", Boolean, nullable=False),
    Column("error", Text),
    Column("dry_run", Boolean, nullable=False),
    Index(None, "at"),
    Index(None, "instance_id", "at"),
)

# Runs handed to `launcher server`: who drives each one (a lease), until when. A row per
# submitted run; owner_id NULL = waiting for a replica. `generation` grows on every claim, so a
# replica that lost its lease cannot write as the owner any more (see ledger/leases.py).
leases = Table(
    "leases",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("owner_id", String(128)),
    Column("generation", Integer, nullable=False),
    Column("expires_at", UtcDateTime),
    Column("acquired_at", UtcDateTime),
    Column("renewed_at", UtcDateTime),
    Column("submitted_at", UtcDateTime, nullable=False),
    Column("submitted_by", String(255)),
    Column("done", Boolean, nullable=False),
    Index(None, "done", "expires_at"),
    Index(None, "owner_id"),
)

# Server access control: users, their roles per project ('*' = every project), API tokens
# (only a SHA-256 of the secret is stored; the token is shown once when created).
server_users = Table(
    "server_users",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("created_at", UtcDateTime, nullable=False),
)

server_roles = Table(
    "server_roles",
    metadata,
    Column("user_name", String(255), ForeignKey("server_users.name", ondelete="CASCADE"), primary_key=True),
    Column("project", String(255), primary_key=True),
    Column("role", String(16), nullable=False),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("token_id", String(32), primary_key=True),
    Column("user_name", String(255), ForeignKey("server_users.name", ondelete="CASCADE"), nullable=False),
    Column("secret_sha256", String(64), nullable=False),
    Column("label", String(255)),
    Column("created_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime),
    Index(None, "user_name"),
)
