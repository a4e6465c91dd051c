"""The maintenance queue (paimon_meta/maintenance/) and the recycle bin.

* ``paimon_maintenance_jobs``: the queue. Workers take due jobs with ``FOR UPDATE SKIP LOCKED`` and a
  lease; a partial unique index allows at most one queued or running job per table and kind; a job out
  of attempts stays as ``dead`` (the dead letter).
* ``paimon_maintenance_debts``: each table's debt as last measured from its latest snapshot, and when
  each kind of job last succeeded (the schedules).
* ``paimon_maintenance_cursors``: how far the scheduler read the commit log.
* ``paimon_maintenance_pauses``: maintenance paused for the catalog (``*``) or a table.
* ``paimon_dropped_tables``: the recycle bin: a dropped table's row and grants until it is purged.
* The maintenance log records queue runs (``maintain``), undrops and purges.

Kind: expand (adds only; a check constraint widened): the previous release keeps working on it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPERATION_CHECK = "ck_paimon_maintenance_events_operation"
OLD_OPERATIONS = (
    "expire_snapshots",
    "remove_orphan_files",
    "create_tag",
    "delete_tag",
    "rollback",
    "create_partitions",
    "drop_partitions",
    "mark_done_partitions",
    "reset_consumer",
    "create_branch",
    "drop_branch",
    "rename_branch",
    "fast_forward_branch",
    "register_table",
    "drop_table",
    "rollback_schema",
    "recover",
    "replace_table",  # 0016
)
OPERATIONS = (*OLD_OPERATIONS, "maintain", "undrop_table", "purge_table")
KINDS = ("compact", "expire_snapshots", "expire_partitions", "create_tag", "remove_orphans", "purge_dropped")
STATES = ("queued", "running", "dead")
JSONB = postgresql.JSONB(astext_type=sa.Text())


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.drop_constraint(op.f(OPERATION_CHECK), "paimon_maintenance_events", type_="check")
    op.create_check_constraint(
        op.f(OPERATION_CHECK), "paimon_maintenance_events", _in("operation", OPERATIONS)
    )
    op.create_table(
        "paimon_maintenance_jobs",
        sa.Column("job_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("table_identifier", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), server_default=sa.text("'queued'"), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default=sa.text("5"), nullable=False),
        sa.Column("run_after", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("debt", JSONB, server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_paimon_maintenance_jobs")),
        sa.CheckConstraint(_in("kind", KINDS), name=op.f("ck_paimon_maintenance_jobs_kind")),
        sa.CheckConstraint(_in("state", STATES), name=op.f("ck_paimon_maintenance_jobs_state")),
        sa.CheckConstraint(
            "attempts >= 0 AND max_attempts >= 1", name=op.f("ck_paimon_maintenance_jobs_attempts")
        ),
    )
    op.create_index(
        "uq_paimon_maintenance_jobs_active",
        "paimon_maintenance_jobs",
        ["catalog_key", "table_id", "kind"],
        unique=True,
        postgresql_where=sa.text("state IN ('queued', 'running')"),
    )
    op.create_index("ix_paimon_maintenance_jobs_due", "paimon_maintenance_jobs", ["state", "run_after"])
    op.create_table(
        "paimon_maintenance_debts",
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("table_identifier", sa.Text(), nullable=False),
        sa.Column("snapshot_id", sa.BigInteger(), nullable=True),
        sa.Column("debt", JSONB, server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("last_runs", JSONB, server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("catalog_key", "table_id", name=op.f("pk_paimon_maintenance_debts")),
    )
    op.create_table(
        "paimon_maintenance_cursors",
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("event_id", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("catalog_key", name=op.f("pk_paimon_maintenance_cursors")),
    )
    op.create_table(
        "paimon_maintenance_pauses",
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("paused_by", sa.Text(), nullable=True),
        sa.Column("paused_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("catalog_key", "scope", name=op.f("pk_paimon_maintenance_pauses")),
    )
    op.create_table(
        "paimon_dropped_tables",
        sa.Column("drop_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("database_name", sa.String(length=255), nullable=False),
        sa.Column("table_name", sa.String(length=255), nullable=False),
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("table_row", JSONB, nullable=False),
        sa.Column("grants", JSONB, server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("dropped_by", sa.Text(), nullable=True),
        sa.Column("dropped_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("purge_after", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("drop_id", name=op.f("pk_paimon_dropped_tables")),
        sa.UniqueConstraint("table_id", name=op.f("uq_paimon_dropped_tables_table_id")),
    )
    op.create_index(
        "ix_paimon_dropped_tables_name",
        "paimon_dropped_tables",
        ["catalog_key", "database_name", "table_name"],
    )
    op.create_index("ix_paimon_dropped_tables_purge_after", "paimon_dropped_tables", ["purge_after"])


def downgrade() -> None:
    for table in (
        "paimon_dropped_tables",
        "paimon_maintenance_pauses",
        "paimon_maintenance_cursors",
        "paimon_maintenance_debts",
        "paimon_maintenance_jobs",
    ):
        op.drop_table(table)
    op.drop_constraint(op.f(OPERATION_CHECK), "paimon_maintenance_events", type_="check")
    # Event rows are append-only: a downgrade keeps the rows of the newer operations by not re-checking them.
    op.execute(
        f"ALTER TABLE paimon_maintenance_events ADD CONSTRAINT {OPERATION_CHECK} "
        f"CHECK ({_in('operation', OLD_OPERATIONS)}) NOT VALID"
    )
