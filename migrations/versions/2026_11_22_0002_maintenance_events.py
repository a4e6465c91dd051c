"""Maintenance runs in the event log: who expired snapshots or removed orphan files, when, with what result.

``paimon_maintenance_events`` is append-only like the commit and lock logs (the same statement-level
trigger): a run writes ``started`` (its settings) before it touches anything and ``finished`` (what it did)
or ``failed`` (why) at the end; a ``started`` without either is a run that died. The view
``paimon_maintenance_history`` has one row per run.

Kind: expand (adds only): the previous release keeps working on it.
Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPERATIONS = ("expire_snapshots", "remove_orphan_files")
EVENT_TYPES = ("started", "finished", "failed")
TABLE = "paimon_maintenance_events"
VIEW = "paimon_maintenance_history"


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("event_id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("table_identifier", sa.Text(), nullable=False),
        sa.Column("operation", sa.Text(), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("operator", sa.Text(), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
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
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_paimon_maintenance_events")),
        sa.CheckConstraint(_in("operation", OPERATIONS), name=op.f("ck_paimon_maintenance_events_operation")),
        sa.CheckConstraint(
            _in("event_type", EVENT_TYPES), name=op.f("ck_paimon_maintenance_events_event_type")
        ),
    )
    op.create_index("ix_paimon_maintenance_events_table", TABLE, ["table_id", "event_id"])
    # One start and at most one end per run.
    op.create_index(
        "uq_paimon_maintenance_events_run_started",
        TABLE,
        ["run_id"],
        unique=True,
        postgresql_where=sa.text("event_type = 'started'"),
    )
    op.create_index(
        "uq_paimon_maintenance_events_run_ended",
        TABLE,
        ["run_id"],
        unique=True,
        postgresql_where=sa.text("event_type <> 'started'"),
    )
    op.execute(
        f"CREATE TRIGGER trg_{TABLE}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {TABLE} "
        "FOR EACH STATEMENT EXECUTE FUNCTION paimon_reject_event_mutation()"
    )
    op.execute(
        """
        CREATE VIEW paimon_maintenance_history AS
        SELECT
            s.run_id,
            s.table_id,
            s.table_identifier,
            s.operation,
            s.operator,
            s.dry_run,
            CASE WHEN e.event_type IS NULL THEN 'unfinished' ELSE e.event_type END AS outcome,
            s.created_at AS started_at,
            e.created_at AS ended_at,
            (extract(epoch FROM e.created_at - s.created_at) * 1000)::float8 AS elapsed_ms,
            s.payload AS settings,
            e.payload AS result
        FROM paimon_maintenance_events s
        LEFT JOIN paimon_maintenance_events e ON e.run_id = s.run_id AND e.event_type <> 'started'
        WHERE s.event_type = 'started'
        """
    )


def downgrade() -> None:
    op.execute(f"DROP VIEW {VIEW}")
    op.drop_table(TABLE)  # drops its trigger with it
