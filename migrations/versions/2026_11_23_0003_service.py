"""The commit service: principals, hashed bearer tokens, grants, partition statistics, principals on events.

* ``paimon_principals`` / ``paimon_tokens`` / ``paimon_grants``: who may call the service. Only a
  SHA-256 of each token is stored (tokens are 256-bit random strings, so a plain hash is enough); a
  token is shown once, when it is created. A grant is ``read``, ``write`` or ``admin`` on the whole
  catalog (no database), a database (no table) or one table.
* ``paimon_partition_statistics``: per table and partition, the record count, file count, size and last
  file creation time, kept by the commit path in the transaction that publishes a snapshot;
  ``paimon_tables.stats_snapshot_id`` is the snapshot they are complete up to (a snapshot the commit
  path did not publish, e.g. one reconciled from another engine, leaves it behind).
* ``principal`` on the commit, lock and maintenance logs: who asked for each step.
* A REST commit's ``prepared`` event carries the client-built snapshot instead of CommitMessages (the
  client wrote the manifests), marked ``payload.source = 'rest'``; recovery never re-commits it.
* Timelines, for rollback: a rollback to snapshot T starts a new timeline of the table
  (``paimon_tables.timeline`` + 1, a ``paimon_table_timelines`` row with T and the uuids of the removed
  snapshots), in which ids after T are created again. Publishing events carry their timeline, and a
  snapshot id is unique per (table, timeline) instead of per table.

Kind: expand (adds only; check constraints widened, the snapshot index widened by the new timeline
column, default 0): the previous release keeps working on it.
Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PRIVILEGES = ("read", "write", "admin")
PUBLISHING = "event_type IN ('snapshot_published', 'external')"
EVENT_TABLES = ("paimon_commit_events", "paimon_lock_events", "paimon_maintenance_events")
PREPARED_CHECK = "ck_paimon_commit_events_prepared_has_messages"
PRINCIPAL_SETTING = "NULLIF(current_setting('paimon_meta.principal'::text, true), ''::text)"
OPERATION_CHECK = "ck_paimon_maintenance_events_operation"
OLD_OPERATIONS = ("expire_snapshots", "remove_orphan_files")
OPERATIONS = (*OLD_OPERATIONS, "create_tag", "delete_tag", "rollback")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _now() -> sa.Column[object]:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
    )


def upgrade() -> None:
    op.create_table(
        "paimon_principals",
        sa.Column("principal_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=True),
        _now(),
        sa.PrimaryKeyConstraint("principal_id", name=op.f("pk_paimon_principals")),
        sa.UniqueConstraint("name", name=op.f("uq_paimon_principals_name")),
    )
    op.create_table(
        "paimon_tokens",
        sa.Column("token_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("principal_id", sa.BigInteger(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("token_prefix", sa.String(length=16), nullable=False),
        _now(),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("token_id", name=op.f("pk_paimon_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_paimon_tokens_token_hash")),
        sa.ForeignKeyConstraint(
            ["principal_id"],
            ["paimon_principals.principal_id"],
            name=op.f("fk_paimon_tokens_principal_id_paimon_principals"),
            ondelete="CASCADE",
        ),
    )
    op.create_table(
        "paimon_grants",
        sa.Column("grant_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("principal_id", sa.BigInteger(), nullable=False),
        sa.Column("privilege", sa.Text(), nullable=False),
        sa.Column("database_name", sa.String(length=255), nullable=True),
        sa.Column("table_name", sa.String(length=255), nullable=True),
        sa.Column("granted_by", sa.Text(), nullable=True),
        _now(),
        sa.PrimaryKeyConstraint("grant_id", name=op.f("pk_paimon_grants")),
        sa.ForeignKeyConstraint(
            ["principal_id"],
            ["paimon_principals.principal_id"],
            name=op.f("fk_paimon_grants_principal_id_paimon_principals"),
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(
            "privilege IN ('read', 'write', 'admin')", name=op.f("ck_paimon_grants_privilege")
        ),
        sa.CheckConstraint(
            "table_name IS NULL OR database_name IS NOT NULL", name=op.f("ck_paimon_grants_table_in_database")
        ),
    )
    op.create_index(
        "uq_paimon_grants_scope",
        "paimon_grants",
        ["principal_id", "privilege", "database_name", "table_name"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )
    op.create_table(
        "paimon_partition_statistics",
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("partition_key", sa.Text(), nullable=False),
        sa.Column("spec", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("record_count", sa.BigInteger(), nullable=False),
        sa.Column("file_size_in_bytes", sa.BigInteger(), nullable=False),
        sa.Column("file_count", sa.BigInteger(), nullable=False),
        sa.Column("last_file_creation_time", sa.BigInteger(), nullable=False),
        sa.Column("total_buckets", sa.Integer(), nullable=True),
        sa.Column("snapshot_id", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("table_id", "partition_key", name=op.f("pk_paimon_partition_statistics")),
    )
    op.add_column("paimon_tables", sa.Column("stats_snapshot_id", sa.BigInteger(), nullable=True))
    op.add_column(
        "paimon_tables", sa.Column("timeline", sa.Integer(), server_default=sa.text("0"), nullable=False)
    )
    op.add_column(
        "paimon_commit_events",
        sa.Column("timeline", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.drop_index("uq_paimon_commit_events_table_snapshot", table_name="paimon_commit_events")
    op.create_index(
        "uq_paimon_commit_events_table_snapshot",
        "paimon_commit_events",
        ["table_id", "timeline", "snapshot_id"],
        unique=True,
        postgresql_where=sa.text(PUBLISHING),
    )
    op.create_table(
        "paimon_table_timelines",
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("timeline", sa.Integer(), nullable=False),
        sa.Column("base_snapshot_id", sa.BigInteger(), nullable=False),
        sa.Column("rolled_back_from", sa.BigInteger(), nullable=False),
        sa.Column(
            "removed_uuids",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("principal", sa.Text(), nullable=True),
        _now(),
        sa.PrimaryKeyConstraint("table_id", "timeline", name=op.f("pk_paimon_table_timelines")),
    )
    for table in EVENT_TABLES:
        # Lock events are written by many statements (acquire, release, takeover): they take the
        # principal from the session setting the service's guard sets, so no statement needs it.
        default = sa.text(PRINCIPAL_SETTING) if table == "paimon_lock_events" else None
        op.add_column(table, sa.Column("principal", sa.Text(), server_default=default, nullable=True))
    op.drop_constraint(op.f(PREPARED_CHECK), "paimon_commit_events", type_="check")
    op.create_check_constraint(
        op.f(PREPARED_CHECK),
        "paimon_commit_events",
        "event_type <> 'prepared' OR messages IS NOT NULL OR coalesce(payload ->> 'source', '') = 'rest'",
    )
    op.drop_constraint(op.f(OPERATION_CHECK), "paimon_maintenance_events", type_="check")
    op.create_check_constraint(
        op.f(OPERATION_CHECK), "paimon_maintenance_events", _in("operation", OPERATIONS)
    )


def downgrade() -> None:
    op.drop_constraint(op.f(OPERATION_CHECK), "paimon_maintenance_events", type_="check")
    op.execute(
        f"ALTER TABLE paimon_maintenance_events ADD CONSTRAINT {OPERATION_CHECK} "
        f"CHECK ({_in('operation', OLD_OPERATIONS)}) NOT VALID"
    )
    op.drop_constraint(op.f(PREPARED_CHECK), "paimon_commit_events", type_="check")
    # Event rows are append-only: a downgrade keeps REST prepared events by not re-checking old rows.
    op.execute(
        f"ALTER TABLE paimon_commit_events ADD CONSTRAINT {PREPARED_CHECK} "
        "CHECK (event_type <> 'prepared' OR messages IS NOT NULL) NOT VALID"
    )
    for table in EVENT_TABLES:
        op.drop_column(table, "principal")
    op.drop_table("paimon_table_timelines")
    op.drop_index("uq_paimon_commit_events_table_snapshot", table_name="paimon_commit_events")
    op.create_index(
        "uq_paimon_commit_events_table_snapshot",
        "paimon_commit_events",
        ["table_id", "snapshot_id"],
        unique=True,
        postgresql_where=sa.text(PUBLISHING),
    )
    op.drop_column("paimon_commit_events", "timeline")
    op.drop_column("paimon_tables", "timeline")
    op.drop_column("paimon_tables", "stats_snapshot_id")
    op.drop_table("paimon_partition_statistics")
    op.drop_index("uq_paimon_grants_scope", table_name="paimon_grants")
    op.drop_table("paimon_grants")
    op.drop_table("paimon_tokens")
    op.drop_table("paimon_principals")
