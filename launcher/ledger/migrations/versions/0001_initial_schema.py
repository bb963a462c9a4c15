"""initial schema: runs, attempts, events, clusters, tags, heartbeats, reap_audit

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Frozen: uses plain SQLAlchemy types (no imports from the live models), so later model edits
cannot change what this revision creates.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _ts(name: str, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _str(name: str, length: int, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "runs",
        _str("run_id", 64, False),
        _str("name", 255, False),
        _str("spec_hash", 64, False),
        sa.Column("spec_yaml", sa.Text(), nullable=False),
        _str("state", 32, False),
        _str("project", 255, False),
        _str("experiment", 255),
        _str("owner", 255),
        _str("cost_center", 255),
        _ts("created_at", False),
        _ts("updated_at", False),
        _ts("ended_at"),
        sa.Column("end_reason", sa.Text(), nullable=True),
        sa.Column("budget_usd", sa.Float(), nullable=True),
        _ts("deadline_at"),
        _str("code_revision", 64),
        _str("code_dirty_hash", 64),
        _str("lockfile_hash", 64),
        sa.Column("image", sa.Text(), nullable=True),
        sa.Column("seeds", sa.JSON(), nullable=True),
        _str("data_hash", 64),
        _str("host", 255),
        _str("launcher_version", 64),
        sa.PrimaryKeyConstraint("run_id", name="pk_runs"),
    )
    op.create_index("ix_runs_project_created_at", "runs", ["project", "created_at"])
    op.create_index("ix_runs_owner_created_at", "runs", ["owner", "created_at"])
    op.create_index("ix_runs_state", "runs", ["state"])
    op.create_index("ix_runs_name", "runs", ["name"])

    op.create_table(
        "attempts",
        _str("attempt_id", 96, False),
        _str("run_id", 64, False),
        sa.Column("seq", sa.Integer(), nullable=False),
        _str("cloud", 32, False),
        _str("region", 64, False),
        _str("zone", 64),
        _str("instance_type", 128, False),
        _str("accelerator", 64),
        sa.Column("accelerator_count", sa.Integer(), nullable=False),
        sa.Column("num_nodes", sa.Integer(), nullable=False),
        sa.Column("spot", sa.Boolean(), nullable=False),
        sa.Column("price_usd_per_hour", sa.Float(), nullable=False),
        sa.Column("on_demand_price_usd_per_hour", sa.Float(), nullable=True),
        _str("cluster", 255),
        _str("state", 32, False),
        _ts("started_at", False),
        _ts("ended_at"),
        _str("end_reason", 64),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("billed_seconds", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name="fk_attempts_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("attempt_id", name="pk_attempts"),
        sa.UniqueConstraint("run_id", "seq", name="uq_attempts_run_id_seq"),
    )
    op.create_index("ix_attempts_started_at", "attempts", ["started_at"])
    op.create_index("ix_attempts_ended_at", "attempts", ["ended_at"])
    op.create_index("ix_attempts_cluster", "attempts", ["cluster"])

    op.create_table(
        "events",
        sa.Column("id", BIGINT_PK, autoincrement=True, nullable=False),
        _str("run_id", 64, False),
        _str("attempt_id", 96),
        _ts("at", False),
        _str("kind", 32, False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name="fk_events_run_id_runs", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.attempt_id"],
            name="fk_events_attempt_id_attempts",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
    )
    op.create_index("ix_events_run_id_id", "events", ["run_id", "id"])
    op.create_index("ix_events_kind_at", "events", ["kind", "at"])

    op.create_table(
        "clusters",
        _str("name", 255, False),
        _str("provider", 32, False),
        _str("region", 64),
        _str("zone", 64),
        _str("stack", 255),
        _str("state", 32, False),
        _str("run_id", 64),
        _str("project", 255),
        sa.Column("nodes", sa.JSON(), nullable=False),
        _ts("created_at", False),
        _ts("updated_at", False),
        _ts("terminated_at"),
        sa.PrimaryKeyConstraint("name", name="pk_clusters"),
    )
    op.create_index("ix_clusters_state", "clusters", ["state"])
    op.create_index("ix_clusters_run_id", "clusters", ["run_id"])

    op.create_table(
        "tags",
        _str("entity_type", 16, False),
        _str("entity_id", 255, False),
        _str("key", 128, False),
        _str("value", 512, False),
        sa.PrimaryKeyConstraint("entity_type", "entity_id", "key", name="pk_tags"),
    )
    op.create_index("ix_tags_key_value", "tags", ["key", "value"])

    op.create_table(
        "heartbeats",
        _str("subject_type", 16, False),
        _str("subject_id", 255, False),
        _ts("at", False),
        sa.PrimaryKeyConstraint("subject_type", "subject_id", name="pk_heartbeats"),
    )

    op.create_table(
        "reap_audit",
        sa.Column("id", BIGINT_PK, autoincrement=True, nullable=False),
        _ts("at", False),
        _str("pass_id", 64),
        _str("provider", 32, False),
        _str("region", 64, False),
        _str("instance_id", 255, False),
        _str("cluster", 255),
        _str("project", 255),
        _str("decision", 16, False),
        _str("action", 32),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("hourly_price_usd", sa.Float(), nullable=True),
        sa.Column("estimated_saving_usd", sa.Float(), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_reap_audit"),
    )
    op.create_index("ix_reap_audit_at", "reap_audit", ["at"])
    op.create_index("ix_reap_audit_instance_id_at", "reap_audit", ["instance_id", "at"])


def downgrade() -> None:
    for table in ("reap_audit", "heartbeats", "tags", "clusters", "events", "attempts", "runs"):
        op.drop_table(table)
