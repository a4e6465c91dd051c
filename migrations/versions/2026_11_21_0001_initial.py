"""Initial metastore schema: catalog rows, the distributed lock, the event log and its views.

Java Paimon's ``JdbcCatalog`` creates ``paimon_tables``, ``paimon_database_properties`` and
``paimon_distributed_locks`` itself when they are missing, so either side may have created them first.
This migration therefore creates them in Java's exact DDL only if absent, then extends them (new
columns are nullable or defaulted, so Java's INSERTs keep working) and renames Java's default primary
key names to our naming convention. Downgrading to base puts them back into Java's shape instead of
dropping them: their rows may belong to a Java catalog.

Kind: expand (adds only): the previous release keeps working on it.
Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COMMIT_EVENT_TYPES = (
    "prepared",
    "conflict_checked",
    "snapshot_published",
    "retried",
    "failed",
    "aborted",
    "recovered",
    "external",
)
LOCK_EVENT_TYPES = ("acquired", "released", "expiry_takeover", "force_released", "lost")
COMMIT_KINDS = ("APPEND", "COMPACT", "OVERWRITE", "ANALYZE")
PUBLISHING = "event_type IN ('snapshot_published', 'external')"
_PLAIN_IDENTIFIER = re.compile(r"^[a-z_]+$")

# Java's DDL, verbatim in shape (JdbcUtils.CREATE_CATALOG_TABLE, CREATE_DATABASE_PROPERTIES_TABLE,
# PostgresqlDistributedLockDialect.getCreateTableSql with lock-key-max-length 255).
JAVA_TABLES = {
    "paimon_tables": (
        "CREATE TABLE IF NOT EXISTS paimon_tables("
        "catalog_key VARCHAR(255) NOT NULL, database_name VARCHAR(255) NOT NULL, "
        "table_name VARCHAR(255) NOT NULL, PRIMARY KEY (catalog_key, database_name, table_name))"
    ),
    "paimon_database_properties": (
        "CREATE TABLE IF NOT EXISTS paimon_database_properties("
        "catalog_key VARCHAR(255) NOT NULL, database_name VARCHAR(255) NOT NULL, "
        "property_key VARCHAR(255), property_value VARCHAR(1000), "
        "PRIMARY KEY (catalog_key, database_name, property_key))"
    ),
    "paimon_distributed_locks": (
        "CREATE TABLE IF NOT EXISTS paimon_distributed_locks("
        "lock_id VARCHAR(255) NOT NULL, acquired_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL, "
        "expire_time_seconds BIGINT DEFAULT 0 NOT NULL, PRIMARY KEY (lock_id))"
    ),
}


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _rename_primary_key(table: str, new_name: str) -> None:
    # A DO block rather than a Python-side lookup, so offline (--sql) scripts rename correctly too.
    # Both names are constants of this module; quote_ident() quotes the one read from the catalog.
    # (No percent signs: offline scripts would double them.)
    assert _PLAIN_IDENTIFIER.match(table) and _PLAIN_IDENTIFIER.match(new_name)
    statement = f"""
        DO $$
        DECLARE current_name text;
        BEGIN
            SELECT conname INTO current_name FROM pg_constraint
            WHERE conrelid = '{table}'::regclass AND contype = 'p';
            IF current_name IS DISTINCT FROM '{new_name}' THEN
                EXECUTE 'ALTER TABLE {table} RENAME CONSTRAINT ' || quote_ident(current_name)
                    || ' TO {new_name}';
            END IF;
        END
        $$
    """  # noqa: S608 - constant identifiers, checked above
    op.execute(statement)


def _timestamps() -> list[sa.Column[Any]]:
    return [
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    ]


def _upgrade_java_tables() -> None:
    for ddl in JAVA_TABLES.values():
        op.execute(ddl)
    for table in JAVA_TABLES:
        _rename_primary_key(table, f"pk_{table}")

    op.add_column(
        "paimon_tables", sa.Column("table_id", sa.BigInteger(), sa.Identity(always=False), nullable=False)
    )
    op.add_column("paimon_tables", sa.Column("location", sa.Text(), nullable=True))
    op.add_column("paimon_tables", sa.Column("table_uuid", sa.Uuid(), nullable=True))
    op.add_column("paimon_tables", sa.Column("schema_id", sa.BigInteger(), nullable=True))
    op.add_column("paimon_tables", sa.Column("latest_snapshot_id", sa.BigInteger(), nullable=True))
    for column in _timestamps():
        op.add_column("paimon_tables", column)
    op.create_unique_constraint(op.f("uq_paimon_tables_table_id"), "paimon_tables", ["table_id"])
    op.create_unique_constraint(op.f("uq_paimon_tables_table_uuid"), "paimon_tables", ["table_uuid"])
    op.create_check_constraint(
        op.f("ck_paimon_tables_latest_snapshot_id_positive"),
        "paimon_tables",
        "latest_snapshot_id IS NULL OR latest_snapshot_id >= 1",
    )
    op.create_check_constraint(
        op.f("ck_paimon_tables_schema_id_non_negative"),
        "paimon_tables",
        "schema_id IS NULL OR schema_id >= 0",
    )

    lock_columns: tuple[sa.Column[Any], ...] = (
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("fencing_token", sa.BigInteger(), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_seconds", sa.Integer(), nullable=True),
        sa.Column("hostname", sa.Text(), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
    )
    for lock_column in lock_columns:
        op.add_column("paimon_distributed_locks", lock_column)


def _downgrade_java_tables() -> None:
    for column in ("pid", "hostname", "lease_seconds", "heartbeat_at", "fencing_token", "owner"):
        op.drop_column("paimon_distributed_locks", column)
    op.drop_constraint(op.f("ck_paimon_tables_schema_id_non_negative"), "paimon_tables", type_="check")
    op.drop_constraint(op.f("ck_paimon_tables_latest_snapshot_id_positive"), "paimon_tables", type_="check")
    op.drop_constraint(op.f("uq_paimon_tables_table_uuid"), "paimon_tables", type_="unique")
    op.drop_constraint(op.f("uq_paimon_tables_table_id"), "paimon_tables", type_="unique")
    for column in (
        "updated_at",
        "created_at",
        "latest_snapshot_id",
        "schema_id",
        "table_uuid",
        "location",
        "table_id",
    ):
        op.drop_column("paimon_tables", column)
    for table in JAVA_TABLES:
        _rename_primary_key(table, f"{table}_pkey")


def _create_own_tables() -> None:
    op.create_table(
        "paimon_databases",
        sa.Column("database_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("database_name", sa.String(length=255), nullable=False),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column(
            "properties",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("database_id", name=op.f("pk_paimon_databases")),
        sa.UniqueConstraint(
            "catalog_key", "database_name", name=op.f("uq_paimon_databases_catalog_key_database_name")
        ),
    )
    op.create_table(
        "paimon_commit_events",
        sa.Column("event_id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("commit_id", sa.Uuid(), nullable=False),
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("table_identifier", sa.Text(), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("commit_user", sa.Text(), nullable=False),
        sa.Column("commit_identifier", sa.BigInteger(), nullable=False),
        sa.Column("commit_kind", sa.Text(), nullable=False),
        sa.Column("snapshot_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "payload",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("messages", sa.LargeBinary(), nullable=True),
        sa.Column("messages_version", sa.Integer(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("clock_timestamp()"),
            nullable=False,
        ),
        sa.Column("duration_ms", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_paimon_commit_events")),
        sa.CheckConstraint(
            _in("event_type", COMMIT_EVENT_TYPES), name=op.f("ck_paimon_commit_events_event_type")
        ),
        sa.CheckConstraint(
            _in("commit_kind", COMMIT_KINDS), name=op.f("ck_paimon_commit_events_commit_kind")
        ),
        sa.CheckConstraint("attempt >= 1", name=op.f("ck_paimon_commit_events_attempt_positive")),
        sa.CheckConstraint(
            "snapshot_id IS NULL OR snapshot_id >= 1",
            name=op.f("ck_paimon_commit_events_snapshot_id_positive"),
        ),
        sa.CheckConstraint(
            "duration_ms IS NULL OR duration_ms >= 0",
            name=op.f("ck_paimon_commit_events_duration_non_negative"),
        ),
        sa.CheckConstraint(
            "(messages IS NULL) = (messages_version IS NULL)",
            name=op.f("ck_paimon_commit_events_messages_versioned"),
        ),
        sa.CheckConstraint(
            "event_type <> 'prepared' OR messages IS NOT NULL",
            name=op.f("ck_paimon_commit_events_prepared_has_messages"),
        ),
        sa.CheckConstraint(
            f"NOT ({PUBLISHING}) OR snapshot_id IS NOT NULL",
            name=op.f("ck_paimon_commit_events_published_has_snapshot"),
        ),
    )
    op.create_index("ix_paimon_commit_events_commit", "paimon_commit_events", ["commit_id", "event_id"])
    op.create_index("ix_paimon_commit_events_table", "paimon_commit_events", ["table_id", "event_id"])
    op.create_index(
        "ix_paimon_commit_events_dedupe",
        "paimon_commit_events",
        ["table_id", "commit_user", "commit_identifier"],
    )
    op.create_index(
        "uq_paimon_commit_events_table_snapshot",
        "paimon_commit_events",
        ["table_id", "snapshot_id"],
        unique=True,
        postgresql_where=sa.text(PUBLISHING),
    )
    op.create_index(
        "uq_paimon_commit_events_commit_published",
        "paimon_commit_events",
        ["commit_id"],
        unique=True,
        postgresql_where=sa.text("event_type = 'snapshot_published'"),
    )
    op.create_table(
        "paimon_lock_events",
        sa.Column("event_id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("lock_id", sa.String(length=255), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("fencing_token", sa.BigInteger(), nullable=True),
        sa.Column("hostname", sa.Text(), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("operator", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("previous_owner", sa.Text(), nullable=True),
        sa.Column("previous_fencing_token", sa.BigInteger(), nullable=True),
        sa.Column("wait_ms", sa.Double(), nullable=True),
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
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_paimon_lock_events")),
        sa.CheckConstraint(
            _in("event_type", LOCK_EVENT_TYPES), name=op.f("ck_paimon_lock_events_event_type")
        ),
        sa.CheckConstraint(
            "event_type <> 'force_released' OR (operator IS NOT NULL AND reason IS NOT NULL)",
            name=op.f("ck_paimon_lock_events_forced_has_operator"),
        ),
    )
    op.create_index("ix_paimon_lock_events_lock", "paimon_lock_events", ["lock_id", "event_id"])
    op.execute("CREATE SEQUENCE paimon_lock_fencing_token_seq")


def _create_append_only_triggers() -> None:
    # Statement-level so even an UPDATE/DELETE matching no row is refused, and TRUNCATE is covered.
    # An operator who really must prune has to disable the trigger explicitly (table owner only).
    op.execute(
        """
        CREATE FUNCTION paimon_reject_event_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION USING
                MESSAGE = 'paimon_meta: ' || TG_TABLE_NAME || ' is append-only; '
                    || TG_OP || ' is not allowed',
                ERRCODE = 'restrict_violation';
        END;
        $$
        """
    )
    for table in ("paimon_commit_events", "paimon_lock_events"):
        op.execute(
            f"CREATE TRIGGER trg_{table}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION paimon_reject_event_mutation()"
        )


VIEWS = {
    # One row per commit: its outcome, snapshot, attempts and where the time went.
    "paimon_commit_history": """
        SELECT
            e.commit_id,
            min(e.table_id) AS table_id,
            min(e.table_identifier) AS table_identifier,
            min(e.commit_user) AS commit_user,
            min(e.commit_identifier) AS commit_identifier,
            min(e.commit_kind) AS commit_kind,
            CASE
                WHEN bool_or(e.event_type = 'snapshot_published') THEN 'published'
                WHEN bool_or(e.event_type = 'external') THEN 'external'
                WHEN bool_or(e.event_type = 'recovered') THEN 'recovered'
                WHEN bool_or(e.event_type = 'failed') THEN 'failed'
                WHEN bool_or(e.event_type = 'aborted') THEN 'aborted'
                ELSE 'pending'
            END AS outcome,
            max(e.snapshot_id) FILTER (
                WHERE e.event_type IN ('snapshot_published', 'external', 'recovered')
            ) AS snapshot_id,
            max(e.attempt) AS attempts,
            count(*) FILTER (WHERE e.event_type = 'retried') AS retries,
            count(*) FILTER (
                WHERE e.event_type = 'conflict_checked' AND e.payload @> '{"conflict": true}'
            ) AS conflicts,
            sum(e.duration_ms) FILTER (WHERE e.event_type = 'prepared') AS prepare_ms,
            sum(e.duration_ms) FILTER (WHERE e.event_type = 'conflict_checked') AS conflict_check_ms,
            sum(e.duration_ms) FILTER (WHERE e.event_type = 'snapshot_published') AS publish_ms,
            sum((e.payload ->> 'wait_ms')::double precision) FILTER (
                WHERE e.event_type = 'retried'
            ) AS retry_wait_ms,
            (array_agg(e.payload ->> 'reason' ORDER BY e.event_id DESC) FILTER (
                WHERE e.event_type IN ('failed', 'aborted', 'recovered')
            ))[1] AS final_reason,
            min(e.created_at) AS first_event_at,
            max(e.created_at) AS last_event_at,
            EXTRACT(EPOCH FROM max(e.created_at) - min(e.created_at)) * 1000 AS elapsed_ms,
            count(*) AS event_count
        FROM paimon_commit_events e
        GROUP BY e.commit_id
    """,
    "paimon_commit_conflicts": """
        SELECT
            e.event_id, e.commit_id, e.table_id, e.table_identifier, e.commit_user,
            e.commit_identifier, e.commit_kind, e.attempt,
            (e.payload ->> 'base_snapshot_id')::bigint AS base_snapshot_id,
            e.payload ->> 'reason' AS reason,
            e.payload AS details,
            e.created_at
        FROM paimon_commit_events e
        WHERE e.event_type = 'conflict_checked' AND e.payload @> '{"conflict": true}'
    """,
    "paimon_commit_retries": """
        SELECT
            e.event_id, e.commit_id, e.table_id, e.table_identifier, e.commit_user,
            e.commit_identifier, e.commit_kind, e.attempt,
            e.payload ->> 'reason' AS reason,
            (e.payload ->> 'wait_ms')::double precision AS wait_ms,
            e.created_at
        FROM paimon_commit_events e
        WHERE e.event_type = 'retried'
    """,
    # One row per acquisition, joined to whatever ended it (release, takeover, forced release, loss).
    "paimon_lock_activity": """
        SELECT
            a.event_id AS acquire_event_id,
            a.lock_id, a.owner, a.fencing_token, a.hostname, a.pid,
            a.created_at AS acquired_at,
            a.wait_ms,
            e.event_type AS ended_by,
            e.created_at AS ended_at,
            e.operator AS ended_by_operator,
            e.reason AS end_reason,
            EXTRACT(EPOCH FROM e.created_at - a.created_at) * 1000 AS held_ms,
            e.event_id IS NULL AS still_open
        FROM paimon_lock_events a
        LEFT JOIN LATERAL (
            SELECT x.event_id, x.event_type, x.created_at, x.operator, x.reason
            FROM paimon_lock_events x
            WHERE x.lock_id = a.lock_id
              AND x.event_id > a.event_id
              AND (
                (x.event_type IN ('released', 'lost') AND x.fencing_token = a.fencing_token)
                OR (x.event_type IN ('expiry_takeover', 'force_released')
                    AND x.previous_fencing_token = a.fencing_token)
              )
            ORDER BY x.event_id
            LIMIT 1
        ) e ON true
        WHERE a.event_type = 'acquired'
    """,
}


def upgrade() -> None:
    _upgrade_java_tables()
    _create_own_tables()
    _create_append_only_triggers()
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(f"DROP VIEW {name}")
    op.drop_table("paimon_lock_events")  # drops its trigger with it
    op.drop_table("paimon_commit_events")
    op.execute("DROP FUNCTION paimon_reject_event_mutation()")
    op.execute("DROP SEQUENCE paimon_lock_fencing_token_seq")
    op.drop_table("paimon_databases")
    _downgrade_java_tables()
