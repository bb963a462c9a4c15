"""cost_rollup / cost_rollup_runs: per ended run, its cost by UTC month, cloud and region (and
in one row per run), so a grouped report aggregates in the database instead of reading every attempt. The tables start
empty here; the ledger fills them for runs that have already ended right after the upgrade, in
the same transaction (launcher.ledger.rollup.backfill), so this file stays frozen.

Revision ID: 0007_cost_rollup
Revises: 0006_billing_account
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_cost_rollup"
down_revision: str | None = "0006_billing_account"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FLOATS = (
    "compute_usd", "list_compute_usd", "node_hours", "gpu_hours", "restart_overhead_usd",
    "preemption_loss_usd", "idle_usd", "storage_gb_hours",
)  # fmt: skip


def upgrade() -> None:
    op.create_table(
        "cost_rollup",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("month_start_s", sa.Float(), nullable=False),
        sa.Column("cloud", sa.String(32), nullable=True),
        sa.Column("region", sa.String(64), nullable=True),
        sa.Column("project", sa.String(255), nullable=True),
        sa.Column("experiment", sa.String(255), nullable=True),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("cost_center", sa.String(255), nullable=True),
        sa.Column("run_first_s", sa.Float(), nullable=False),
        sa.Column("run_last_s", sa.Float(), nullable=False),
        *[sa.Column(c, sa.Float(), nullable=False) for c in _FLOATS],
        sa.Column("preemptions", sa.Integer(), nullable=False),
        sa.Column("attempts_started", sa.Integer(), nullable=False),
        sa.Column("attempt_segments", sa.Integer(), nullable=False),
        sa.Column("seg_start_s", sa.Float(), nullable=False),
        sa.Column("seg_end_s", sa.Float(), nullable=False),
        sa.Column("compute_end_s", sa.Float(), nullable=True),
        sa.Column("run_count_bits", sa.Integer(), nullable=False),
        sa.Column("storage_usd", sa.Float(), nullable=False),
        sa.Column("grain", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name="fk_cost_rollup_run_id_runs", ondelete="CASCADE"),
    )
    op.create_index("ix_cost_rollup_run_id", "cost_rollup", ["run_id"])
    op.create_table(
        "cost_rollup_runs",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("first_s", sa.Float(), nullable=True),
        sa.Column("last_s", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name="fk_cost_rollup_runs_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", name="pk_cost_rollup_runs"),
    )


def downgrade() -> None:
    op.drop_table("cost_rollup_runs")
    op.drop_index("ix_cost_rollup_run_id", table_name="cost_rollup")
    op.drop_table("cost_rollup")
