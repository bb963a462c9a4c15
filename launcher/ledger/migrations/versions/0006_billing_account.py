"""attempts.billing_account_id / billing_account_name: the cloud account an attempt bills to
(AWS account from STS, GCP project), recorded when the attempt is provisioned, so a FOCUS
export names it without a cloud call. NULL for attempts recorded before, and where the provider
does not know it (the report then uses a stable id derived from the ledger).

Revision ID: 0006_billing_account
Revises: 0005_leases
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_billing_account"
down_revision: str | None = "0005_leases"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # nullable, no default: a constant-time change on SQLite and PostgreSQL, however many attempts
    op.add_column("attempts", sa.Column("billing_account_id", sa.String(128), nullable=True))
    op.add_column("attempts", sa.Column("billing_account_name", sa.String(255), nullable=True))


def downgrade() -> None:
    # plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): a batch copy would drop and recreate
    # attempts, and SQLite's implicit DELETE would cascade to every event of every attempt
    op.drop_column("attempts", "billing_account_name")
    op.drop_column("attempts", "billing_account_id")
