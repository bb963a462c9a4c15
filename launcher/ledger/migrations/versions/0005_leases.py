"""leases (who drives each run submitted to `launcher server`) and the server's users, roles
and API tokens.

Revision ID: 0005_leases
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

UtcDateTime = sa.DateTime(timezone=True)  # frozen: not the live models' type

revision: str = "0005_leases"
down_revision: str | None = "0003_attempt_facts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("owner_id", sa.String(128)),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("expires_at", UtcDateTime),
        sa.Column("acquired_at", UtcDateTime),
        sa.Column("renewed_at", UtcDateTime),
        sa.Column("submitted_at", UtcDateTime, nullable=False),
        sa.Column("submitted_by", sa.String(255)),
        sa.Column("done", sa.Boolean, nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.run_id"], name="fk_leases_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", name="pk_leases"),
    )
    op.create_index("ix_leases_done_expires_at", "leases", ["done", "expires_at"])
    op.create_index("ix_leases_owner_id", "leases", ["owner_id"])
    op.create_table(
        "server_users",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", UtcDateTime, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_server_users"),
    )
    op.create_table(
        "server_roles",
        sa.Column("user_name", sa.String(255), nullable=False),
        sa.Column("project", sa.String(255), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_name"], ["server_users.name"], name="fk_server_roles_user_name_server_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("user_name", "project", name="pk_server_roles"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("token_id", sa.String(32), nullable=False),
        sa.Column("user_name", sa.String(255), nullable=False),
        sa.Column("secret_sha256", sa.String(64), nullable=False),
        sa.Column("label", sa.String(255)),
        sa.Column("created_at", UtcDateTime, nullable=False),
        sa.Column("revoked_at", UtcDateTime),
        sa.ForeignKeyConstraint(
            ["user_name"], ["server_users.name"], name="fk_api_tokens_user_name_server_users", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("token_id", name="pk_api_tokens"),
    )
    op.create_index("ix_api_tokens_user_name", "api_tokens", ["user_name"])


def downgrade() -> None:
    op.drop_index("ix_api_tokens_user_name", table_name="api_tokens")
    op.drop_table("api_tokens")
    op.drop_table("server_roles")
    op.drop_table("server_users")
    op.drop_index("ix_leases_owner_id", table_name="leases")
    op.drop_index("ix_leases_done_expires_at", table_name="leases")
    op.drop_table("leases")
