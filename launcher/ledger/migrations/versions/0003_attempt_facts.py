"""attempt_facts: per ended attempt, the event facts cost reports need (last teardown and
checkpoint, first recovery and its overhead, number of price changes), filled here from the
events of every attempt that has already ended.

Frozen: plain SQLAlchemy types and its own table stubs (no imports from the live models).

Revision ID: 0003_attempt_facts
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_attempt_facts"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "attempt_facts",
        sa.Column("attempt_id", sa.String(96), nullable=False),
        sa.Column("teardown_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_ckpt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resume_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("overhead_s", sa.Float(), nullable=True),
        sa.Column("n_price", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["attempts.attempt_id"], name="fk_attempt_facts_attempt_id_attempts", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("attempt_id", name="pk_attempt_facts"),
    )
    events = sa.table(
        "events", sa.column("attempt_id", sa.String), sa.column("kind", sa.String),
        sa.column("at", sa.DateTime(timezone=True)), sa.column("data", sa.JSON),
    )  # fmt: skip
    attempts = sa.table("attempts", sa.column("attempt_id", sa.String), sa.column("ended_at", sa.DateTime(timezone=True)))
    facts = sa.table(
        "attempt_facts", *[sa.column(c) for c in ("attempt_id", "teardown_at", "last_ckpt_at", "resume_at", "overhead_s", "n_price")]
    )
    e, a = events.c, attempts.c
    ended = attempts.join(events, e.attempt_id == a.attempt_id)
    facts_q = (
        sa.select(
            e.attempt_id,
            sa.func.max(sa.case((e.kind == "teardown", e.at))),
            sa.func.max(sa.case((e.kind == "checkpoint", e.at))),
            sa.func.min(sa.case((e.kind == "recovery", e.at))),
            sa.func.max(sa.case((e.kind == "recovery", e.data["restart_overhead_seconds"].as_float()))),
            sa.func.count(sa.case((e.kind == "price", 1))),
        )
        .select_from(ended)
        .where(e.kind.in_(("teardown", "checkpoint", "recovery", "price")), a.ended_at.is_not(None))
        .group_by(e.attempt_id)
    )
    bind = op.get_bind()
    bind.execute(sa.insert(facts).from_select(list(facts.c.keys()), facts_q))
    bare = sa.select(a.attempt_id, sa.literal(0)).where(a.ended_at.is_not(None), a.attempt_id.not_in(sa.select(facts.c.attempt_id)))
    bind.execute(sa.insert(facts).from_select(["attempt_id", "n_price"], bare))


def downgrade() -> None:
    op.drop_table("attempt_facts")
