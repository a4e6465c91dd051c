"""Data access in the event log: every storage credential the service vends.

``paimon_access_events`` is append-only like the commit, lock and maintenance logs (the same
statement-level trigger): one ``credentials_vended`` row per answer of ``GET .../token`` (the principal,
the table, the access level and the storage actions the credentials allow, when they expire, and in
``payload`` the STS role session name that storage's own audit log shows, and whether the answer reused
credentials vended earlier). The credentials themselves are never stored.

Kind: expand (adds only): the previous release keeps working on it.
Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "paimon_access_events"
EVENT_TYPES = ("credentials_vended",)
LEVELS = ("read", "write")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("event_id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("principal", sa.Text(), nullable=False),
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("table_identifier", sa.Text(), nullable=False),
        sa.Column("access_level", sa.Text(), nullable=False),
        sa.Column("actions", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "payload",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("clock_timestamp()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_paimon_access_events")),
        sa.CheckConstraint(_in("event_type", EVENT_TYPES), name=op.f("ck_paimon_access_events_event_type")),
        sa.CheckConstraint(_in("access_level", LEVELS), name=op.f("ck_paimon_access_events_access_level")),
    )
    op.create_index("ix_paimon_access_events_table", TABLE, ["table_id", "event_id"])
    op.create_index("ix_paimon_access_events_principal", TABLE, ["principal", "event_id"])
    # By name too: a dropped table's history is still audited by the name it had.
    op.create_index("ix_paimon_access_events_identifier", TABLE, ["table_identifier", "event_id"])
    op.execute(
        f"CREATE TRIGGER trg_{TABLE}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {TABLE} "
        "FOR EACH STATEMENT EXECUTE FUNCTION paimon_reject_event_mutation()"
    )


def downgrade() -> None:
    op.drop_table(TABLE)  # drops its trigger with it
