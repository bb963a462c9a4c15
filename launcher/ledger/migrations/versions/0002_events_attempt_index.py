"""events: index (attempt_id, kind, at) so reports look up an attempt's checkpoint, recovery and
teardown events without scanning every event.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_events_attempt_id_kind_at", "events", ["attempt_id", "kind", "at"])


def downgrade() -> None:
    op.drop_index("ix_events_attempt_id_kind_at", table_name="events")
