"""SQLAlchemy models of the metastore: catalog rows, the distributed lock row and the event log.

Three tables keep Java Paimon's exact shape (``paimon_tables``, ``paimon_database_properties``,
``paimon_distributed_locks``, see ``JdbcUtils.java`` / ``PostgresqlDistributedLockDialect.java``) so a
Java ``JdbcCatalog`` pointed at the same database interlocks with us: every column we add to them is
nullable or has a server default, so Java's own INSERT statements keep working.

The models are the schema's single description; ``migrations/`` must produce exactly this (a test runs
``alembic.autogenerate.compare_metadata``). Views, triggers and the fencing sequence's use live in the
migration only.
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Double,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    Sequence,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from paimon_meta.db.base import Base
from paimon_meta.model.snapshot import CommitKind

# Base is re-exported: importing this module is what fills Base.metadata.
__all__ = [
    "AccessEventRecord",
    "AccessEventType",
    "AccessLevel",
    "CatalogObjectEventRecord",
    "CatalogObjectEventType",
    "CatalogObjectType",
    "FENCING_TOKEN_SEQUENCE",
    "PRINCIPAL_SETTING_SQL",
    "PUBLISHING_COMMIT_EVENT_TYPES",
    "TERMINAL_COMMIT_EVENT_TYPES",
    "Base",
    "CommitEventRecord",
    "EventArchiveRecord",
    "EventPartitionRecord",
    "PublishedSnapshot",
    "CommitEventType",
    "DistributedLock",
    "Grant",
    "LockEventRecord",
    "LockEventType",
    "MaintenanceEventRecord",
    "MaintenanceEventType",
    "MaintenanceOperation",
    "MaintenanceDebt",
    "MaintenanceJob",
    "MaintenanceJobState",
    "MaintenanceKind",
    "MaintenancePause",
    "MaintenanceCursor",
    "DroppedTable",
    "OutboxPosition",
    "PaimonCatalog",
    "PaimonDatabase",
    "PaimonDatabaseProperty",
    "PaimonFunction",
    "PaimonTable",
    "PaimonView",
    "PartitionRegistration",
    "PartitionStatistics",
    "Principal",
    "Privilege",
    "TableBranch",
    "TableTimeline",
    "Token",
]


class CommitEventType(enum.StrEnum):
    """``paimon_commit_events.event_type`` values (enforced by a CHECK constraint)."""

    PREPARED = "prepared"
    CONFLICT_CHECKED = "conflict_checked"
    SNAPSHOT_PUBLISHED = "snapshot_published"
    RETRIED = "retried"
    FAILED = "failed"
    ABORTED = "aborted"
    RECOVERED = "recovered"
    EXTERNAL = "external"


class LockEventType(enum.StrEnum):
    """``paimon_lock_events.event_type`` values (enforced by a CHECK constraint)."""

    ACQUIRED = "acquired"
    RELEASED = "released"
    EXPIRY_TAKEOVER = "expiry_takeover"
    FORCE_RELEASED = "force_released"
    LOST = "lost"


class MaintenanceEventType(enum.StrEnum):
    """``paimon_maintenance_events.event_type`` values (enforced by a CHECK constraint)."""

    STARTED = "started"
    FINISHED = "finished"
    FAILED = "failed"


class MaintenanceOperation(enum.StrEnum):
    """``paimon_maintenance_events.operation`` values (enforced by a CHECK constraint)."""

    EXPIRE_SNAPSHOTS = "expire_snapshots"
    REMOVE_ORPHAN_FILES = "remove_orphan_files"
    CREATE_TAG = "create_tag"
    DELETE_TAG = "delete_tag"
    ROLLBACK = "rollback"
    CREATE_PARTITIONS = "create_partitions"
    DROP_PARTITIONS = "drop_partitions"
    MARK_DONE_PARTITIONS = "mark_done_partitions"
    RESET_CONSUMER = "reset_consumer"
    CREATE_BRANCH = "create_branch"
    DROP_BRANCH = "drop_branch"
    RENAME_BRANCH = "rename_branch"
    FAST_FORWARD_BRANCH = "fast_forward_branch"
    REGISTER_TABLE = "register_table"
    DROP_TABLE = "drop_table"
    ROLLBACK_SCHEMA = "rollback_schema"
    # Recovery run from the console, with the operator's reason (migration 0013).
    RECOVER = "recover"
    # A table's ``CREATE OR REPLACE`` (migration 0016).
    REPLACE_TABLE = "replace_table"
    # A job of the maintenance queue (paimon_meta/maintenance/), and the recycle bin (migration 0017).
    MAINTAIN = "maintain"
    UNDROP_TABLE = "undrop_table"
    PURGE_TABLE = "purge_table"


#: Event types that end a commit: a commit with ``prepared`` and none of these is pending.
TERMINAL_COMMIT_EVENT_TYPES: frozenset[CommitEventType] = frozenset(
    {
        CommitEventType.SNAPSHOT_PUBLISHED,
        CommitEventType.FAILED,
        CommitEventType.ABORTED,
        CommitEventType.RECOVERED,
    }
)

#: Event types that claim a snapshot id on a table; at most one row per (table_id, snapshot_id).
PUBLISHING_COMMIT_EVENT_TYPES: tuple[CommitEventType, ...] = (
    CommitEventType.SNAPSHOT_PUBLISHED,
    CommitEventType.EXTERNAL,
)

#: The writing transaction's id as a bigint: the change feed's order (migration 0010, metastore/feed.py).
TXID_DEFAULT = "(pg_current_xact_id())::text::bigint"
# The keys of the change feed's lanes (metastore/feed.py, migration 0015): a table identifier's database,
# a lock id's catalog key and database (``<catalog key>.<database>.<table>``; none of them has a dot).
_DATABASE_OF_TABLE = text("split_part(table_identifier, '.', 1)")
#: The maintenance log's feed kind (``metastore.feed``): ``<operation>.<event type>``.
_MAINTENANCE_KIND = text("((operation || '.'::text) || event_type)")
_CATALOG_OF_LOCK = text("split_part(lock_id, '.', 1)")
_DATABASE_OF_LOCK = text("split_part(lock_id, '.', 2)")

#: Sets the principal that lock events written on this connection record (session-level; '' = none).
PRINCIPAL_SETTING_SQL = "SELECT set_config('paimon_meta.principal', %(principal)s, false)"

#: Sequence that hands out lock fencing tokens (strictly increasing across all lock ids).
FENCING_TOKEN_SEQUENCE = Sequence("paimon_lock_fencing_token_seq", metadata=Base.metadata)


def _in_list(column: str, values: Any) -> str:
    # Values are enum constants of this module, never user input.
    quoted = ", ".join(f"'{v.value if isinstance(v, enum.Enum) else v}'" for v in values)
    return f"{column} IN ({quoted})"


class PaimonDatabase(Base):
    """One database (namespace) of the catalog. Java keeps databases only as property rows; we keep
    both (``Registry.create_database`` also writes Java's ``exists``/``location`` properties)."""

    __tablename__ = "paimon_databases"
    __table_args__ = (UniqueConstraint("catalog_key", "database_name"),)

    database_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    catalog_key: Mapped[str] = mapped_column(String(255))
    database_name: Mapped[str] = mapped_column(String(255))
    location: Mapped[str | None] = mapped_column(Text)
    properties: Mapped[dict[str, str]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class PaimonDatabaseProperty(Base):
    """Java's ``paimon_database_properties`` table, column for column."""

    __tablename__ = "paimon_database_properties"

    catalog_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    database_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    property_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    property_value: Mapped[str | None] = mapped_column(String(1000))


class PaimonTable(Base):
    """Java's ``paimon_tables`` (primary key catalog_key, database_name, table_name) plus our columns.

    ``table_id`` is a surrogate that is never reused, so the event log can refer to a table even after
    it is dropped and a new table takes the same name. Rows inserted by Java have NULL location/uuid.
    """

    __tablename__ = "paimon_tables"
    __table_args__ = (
        UniqueConstraint("table_id"),
        UniqueConstraint("table_uuid"),
        CheckConstraint(
            "latest_snapshot_id IS NULL OR latest_snapshot_id >= 1", name="latest_snapshot_id_positive"
        ),
        CheckConstraint("schema_id IS NULL OR schema_id >= 0", name="schema_id_non_negative"),
        # the overlap check of every create, register and drop (migration 0014): equality on the
        # ancestors of a location, a range on its descendants, both bytewise (COLLATE "C")
        Index("ix_paimon_tables_location_key", "location_key"),
        # rows a replica not yet upgraded inserted (a location, no key): checked by their location
        Index(
            "ix_paimon_tables_location_unkeyed",
            "table_id",
            postgresql_where=text("location IS NOT NULL AND location_key IS NULL"),
        ),
    )

    catalog_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    database_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    table_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    table_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    location: Mapped[str | None] = mapped_column(Text)
    # ``paimon_meta.io.base.location_key`` of ``location`` (migration 0014): the one spelling of the
    # place, compared by the overlap check (no two rows' keys equal or nest); NULL for Java's rows
    location_key: Mapped[str | None] = mapped_column(Text(collation="C"))
    table_uuid: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    schema_id: Mapped[int | None] = mapped_column(BigInteger)
    latest_snapshot_id: Mapped[int | None] = mapped_column(BigInteger)
    # The snapshot paimon_partition_statistics are complete up to (migration 0003).
    stats_snapshot_id: Mapped[int | None] = mapped_column(BigInteger)
    # Bumped by every rollback (migration 0003): snapshot ids after the rollback's target are new again.
    timeline: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # The schema of a table the catalog keeps as metadata only (format, object, Iceberg tables; migration
    # 0008), as Paimon's schema JSON; NULL for Paimon tables, whose schemas are on storage.
    table_schema: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # A Paimon table's current schema JSON (its ``id`` inside), written by this release when it reads or
    # changes the schema (migration 0023): used only while its ``id`` is the row's ``schema_id``.
    schema_summary: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class DistributedLock(Base):
    """Java's ``paimon_distributed_locks`` (first three columns, exact types) plus lease bookkeeping.

    ``acquired_at`` stays a TIMESTAMP WITHOUT TIME ZONE set from CURRENT_TIMESTAMP, because Java's
    expiry test is ``EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)) > expire_time_seconds``: our heartbeat
    refreshes ``acquired_at`` so that predicate sees a live lease. A row with NULL ``owner`` was
    inserted by Java.
    """

    __tablename__ = "paimon_distributed_locks"

    lock_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    acquired_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=False), server_default=text("CURRENT_TIMESTAMP")
    )
    expire_time_seconds: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    owner: Mapped[str | None] = mapped_column(Text)
    fencing_token: Mapped[int | None] = mapped_column(BigInteger)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    lease_seconds: Mapped[int | None] = mapped_column(Integer)
    hostname: Mapped[str | None] = mapped_column(Text)
    pid: Mapped[int | None] = mapped_column(Integer)
    #: When the current holder acquired the row (``acquired_at`` moves with every heartbeat); 0018.
    held_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class CommitEventRecord(Base):
    """One row of the append-only commit log (UPDATE/DELETE/TRUNCATE are rejected by a trigger)."""

    __tablename__ = "paimon_commit_events"
    __table_args__ = (
        CheckConstraint(_in_list("event_type", CommitEventType), name="event_type"),
        CheckConstraint(_in_list("commit_kind", CommitKind), name="commit_kind"),
        CheckConstraint("attempt >= 1", name="attempt_positive"),
        CheckConstraint("snapshot_id IS NULL OR snapshot_id >= 1", name="snapshot_id_positive"),
        CheckConstraint("duration_ms IS NULL OR duration_ms >= 0", name="duration_non_negative"),
        CheckConstraint("(messages IS NULL) = (messages_version IS NULL)", name="messages_versioned"),
        # A REST commit's prepared event carries the client-built snapshot instead (migration 0003).
        CheckConstraint(
            "event_type <> 'prepared' OR messages IS NOT NULL OR coalesce(payload ->> 'source', '') = 'rest'",
            name="prepared_has_messages",
        ),
        CheckConstraint(
            f"NOT ({_in_list('event_type', PUBLISHING_COMMIT_EVENT_TYPES)}) OR snapshot_id IS NOT NULL",
            name="published_has_snapshot",
        ),
        Index("ix_paimon_commit_events_commit", "commit_id", "event_id"),
        Index("ix_paimon_commit_events_feed", "txid", "event_id"),
        # The change feed's lanes (migration 0015): one table's, one database's events in feed order.
        Index("ix_paimon_commit_events_feed_table", "table_identifier", "txid", "event_id"),
        Index("ix_paimon_commit_events_feed_database", _DATABASE_OF_TABLE, "txid", "event_id"),
        # The feed's kind lanes (migration 0026): one kind's events in feed order.
        Index("ix_paimon_commit_events_feed_kind", "event_type", "txid", "event_id"),
        Index("ix_paimon_commit_events_table", "table_id", "event_id"),
        # The audit listing of a table by name, newest first from a position (migration 0023).
        Index("ix_paimon_commit_events_identifier", "table_identifier", "event_id"),
        # A table's snapshot recordings and its troubled attempts from a position (migration 0023).
        Index(
            "ix_paimon_commit_events_recorded",
            "table_id",
            "event_id",
            postgresql_where=text(
                "event_type IN ('snapshot_published', 'external', 'recovered') AND branch = 'main' "
                "AND snapshot_id IS NOT NULL"
            ),
        ),
        Index(
            "ix_paimon_commit_events_trouble",
            "table_id",
            "event_id",
            postgresql_where=text("event_type IN ('retried', 'failed', 'aborted')"),
        ),
        Index("ix_paimon_commit_events_dedupe", "table_id", "branch", "commit_user", "commit_identifier"),
        # The database backstops of "no snapshot is published twice" and "a commit publishes at most one
        # snapshot" are the unique indexes of PublishedSnapshot (a partitioned table's unique indexes must
        # include its partition key, created_at: migration 0024).
        {"postgresql_partition_by": "RANGE (created_at)"},
    )

    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    txid: Mapped[int] = mapped_column(BigInteger, server_default=text(TXID_DEFAULT))
    commit_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    table_id: Mapped[int] = mapped_column(BigInteger)
    table_identifier: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(Text)
    attempt: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    commit_user: Mapped[str] = mapped_column(Text)
    commit_identifier: Mapped[int] = mapped_column(BigInteger)
    commit_kind: Mapped[str] = mapped_column(Text)
    snapshot_id: Mapped[int | None] = mapped_column(BigInteger)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    messages: Mapped[bytes | None] = mapped_column(LargeBinary)
    messages_version: Mapped[int | None] = mapped_column(Integer)
    # The partition key (migration 0024): part of the primary key, as a partitioned table's must be.
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("clock_timestamp()"), primary_key=True
    )
    duration_ms: Mapped[float | None] = mapped_column(Double)
    principal: Mapped[str | None] = mapped_column(Text)
    # The table's timeline when a publishing event was written (rollbacks start new ones); on a branch,
    # the branch's (see TableBranch).
    timeline: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # The branch committed to (migration 0009): 'main', or a branch of the table.
    branch: Mapped[str] = mapped_column(Text, server_default=text("'main'"))


class PublishedSnapshot(Base):
    """The ledger of the commit log's publishing events (migration 0024), one row per
    ``snapshot_published``/``external`` event, written by a row trigger on ``paimon_commit_events`` in the
    inserting transaction. Its unique indexes are the database backstops that were the log's own before
    it was partitioned, under the same names, so a second publish fails exactly as it did.

    A partition dropped after archiving takes its ledger rows with it
    (``paimon_meta.metastore.event_partitions``): below an archived range, "no snapshot id twice" rests
    on the snapshot pointer's compare-and-set under the lock's fence and the object store's
    ``If-None-Match`` on the snapshot file, as it always did first."""

    __tablename__ = "paimon_published_snapshots"
    __table_args__ = (
        CheckConstraint(_in_list("event_type", PUBLISHING_COMMIT_EVENT_TYPES), name="event_type"),
        Index("ix_paimon_published_snapshots_created_at", "created_at"),
        # "No snapshot id is published twice" (per branch and timeline, as before: migration 0009).
        Index(
            "uq_paimon_commit_events_table_snapshot",
            "table_id",
            "branch",
            "timeline",
            "snapshot_id",
            unique=True,
        ),
        # "A commit publishes at most one snapshot".
        Index(
            "uq_paimon_commit_events_commit_published",
            "commit_id",
            unique=True,
            postgresql_where=text("event_type = 'snapshot_published'"),
        ),
    )

    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    table_id: Mapped[int] = mapped_column(BigInteger)
    branch: Mapped[str] = mapped_column(Text)
    timeline: Mapped[int] = mapped_column(Integer)
    snapshot_id: Mapped[int] = mapped_column(BigInteger)
    commit_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    event_type: Mapped[str] = mapped_column(Text)


class EventPartitionRecord(Base):
    """The registry of the commit log's partitions (migration 0024): every partition made (by whom), its
    range (``range_start`` NULL: from MINVALUE) and when and by whom it was dropped."""

    __tablename__ = "paimon_event_partitions"
    __table_args__ = (
        CheckConstraint("log IN ('commit')", name="log"),
        CheckConstraint("range_start IS NULL OR range_start < range_end", name="range"),
        CheckConstraint("(dropped_at IS NULL) = (dropped_by IS NULL)", name="dropped_by"),
    )

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    log: Mapped[str] = mapped_column(Text, server_default=text("'commit'"))
    range_start: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    range_end: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    created_by: Mapped[str | None] = mapped_column(Text)
    dropped_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    dropped_by: Mapped[str | None] = mapped_column(Text)


class EventArchiveRecord(Base):
    """One catalog's events of one partition archived (migration 0024): into which snapshot of the
    catalog's ``system.commit_log``, how many rows, by whom and when."""

    __tablename__ = "paimon_event_archives"
    __table_args__ = (
        CheckConstraint("snapshot_id >= 1", name="snapshot_id_positive"),
        CheckConstraint("row_count >= 0", name="row_count_non_negative"),
    )

    partition_name: Mapped[str] = mapped_column(
        Text, ForeignKey("paimon_event_partitions.name"), primary_key=True
    )
    catalog_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    snapshot_id: Mapped[int] = mapped_column(BigInteger)
    row_count: Mapped[int] = mapped_column(BigInteger)
    archived_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    archived_by: Mapped[str] = mapped_column(Text)


class LockEventRecord(Base):
    """One row of the append-only lock log: acquisitions, releases, takeovers, forced releases."""

    __tablename__ = "paimon_lock_events"
    __table_args__ = (
        CheckConstraint(_in_list("event_type", LockEventType), name="event_type"),
        CheckConstraint(
            "event_type <> 'force_released' OR (operator IS NOT NULL AND reason IS NOT NULL)",
            name="forced_has_operator",
        ),
        Index("ix_paimon_lock_events_lock", "lock_id", "event_id"),
        Index("ix_paimon_lock_events_feed", "txid", "event_id"),
        Index("ix_paimon_lock_events_feed_kind", "event_type", "txid", "event_id"),
        Index("ix_paimon_lock_events_feed_table", "lock_id", "txid", "event_id"),
        Index(
            "ix_paimon_lock_events_feed_database",
            _CATALOG_OF_LOCK,
            _DATABASE_OF_LOCK,
            "txid",
            "event_id",
        ),
        Index("ix_paimon_lock_events_feed_catalog", _CATALOG_OF_LOCK, "txid", "event_id"),
    )

    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    txid: Mapped[int] = mapped_column(BigInteger, server_default=text(TXID_DEFAULT))
    lock_id: Mapped[str] = mapped_column(String(255))
    event_type: Mapped[str] = mapped_column(Text)
    owner: Mapped[str | None] = mapped_column(Text)
    fencing_token: Mapped[int | None] = mapped_column(BigInteger)
    hostname: Mapped[str | None] = mapped_column(Text)
    pid: Mapped[int | None] = mapped_column(Integer)
    operator: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    previous_owner: Mapped[str | None] = mapped_column(Text)
    previous_fencing_token: Mapped[int | None] = mapped_column(BigInteger)
    wait_ms: Mapped[float | None] = mapped_column(Double)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("clock_timestamp()")
    )
    # Taken from the connection's ``paimon_meta.principal`` setting (see PRINCIPAL_SETTING_SQL).
    principal: Mapped[str | None] = mapped_column(
        Text, server_default=text("NULLIF(current_setting('paimon_meta.principal'::text, true), ''::text)")
    )


class MaintenanceEventRecord(Base):
    """One row of the append-only maintenance log: a run's ``started`` (settings), then ``finished``
    (what it did) or ``failed`` (why); see migration 0002."""

    __tablename__ = "paimon_maintenance_events"
    __table_args__ = (
        CheckConstraint(_in_list("operation", MaintenanceOperation), name="operation"),
        CheckConstraint(_in_list("event_type", MaintenanceEventType), name="event_type"),
        Index("ix_paimon_maintenance_events_table", "table_id", "event_id"),
        Index("ix_paimon_maintenance_events_identifier", "table_identifier", "event_id"),
        Index("ix_paimon_maintenance_events_feed", "txid", "event_id"),
        Index("ix_paimon_maintenance_events_feed_table", "table_identifier", "txid", "event_id"),
        Index("ix_paimon_maintenance_events_feed_database", _DATABASE_OF_TABLE, "txid", "event_id"),
        # The feed's kind lanes (migration 0026): the maintenance log's feed kind, in feed order.
        Index("ix_paimon_maintenance_events_feed_kind", _MAINTENANCE_KIND, "txid", "event_id"),
        Index(
            "uq_paimon_maintenance_events_run_started",
            "run_id",
            unique=True,
            postgresql_where=text("event_type = 'started'"),
        ),
        Index(
            "uq_paimon_maintenance_events_run_ended",
            "run_id",
            unique=True,
            postgresql_where=text("event_type <> 'started'"),
        ),
    )

    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    txid: Mapped[int] = mapped_column(BigInteger, server_default=text(TXID_DEFAULT))
    run_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    table_id: Mapped[int] = mapped_column(BigInteger)
    table_identifier: Mapped[str] = mapped_column(Text)
    operation: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(Text)
    operator: Mapped[str] = mapped_column(Text)
    dry_run: Mapped[bool] = mapped_column(Boolean)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("clock_timestamp()")
    )
    principal: Mapped[str | None] = mapped_column(Text)


class AccessEventType(enum.StrEnum):
    """``paimon_access_events.event_type`` values (enforced by a CHECK constraint)."""

    CREDENTIALS_VENDED = "credentials_vended"
    #: A commit the service refused for want of a write grant (403; migration 0018).
    COMMIT_REFUSED = "commit_refused"


class AccessLevel(enum.StrEnum):
    """What vended storage credentials allow on the table's files (docs/CREDENTIALS.md)."""

    READ = "read"
    WRITE = "write"


class AccessEventRecord(Base):
    """One row of the append-only data-access log: storage credentials vended to a principal for a
    table (migration 0004). The credentials are never stored."""

    __tablename__ = "paimon_access_events"
    __table_args__ = (
        CheckConstraint(_in_list("event_type", AccessEventType), name="event_type"),
        CheckConstraint(_in_list("access_level", AccessLevel), name="access_level"),
        Index("ix_paimon_access_events_table", "table_id", "event_id"),
        Index("ix_paimon_access_events_principal", "principal", "event_id"),
        Index("ix_paimon_access_events_identifier", "table_identifier", "event_id"),
    )

    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    event_type: Mapped[str] = mapped_column(Text)
    principal: Mapped[str] = mapped_column(Text)
    table_id: Mapped[int] = mapped_column(BigInteger)
    table_identifier: Mapped[str] = mapped_column(Text)
    access_level: Mapped[str] = mapped_column(Text)
    actions: Mapped[list[str]] = mapped_column(JSONB)
    #: None for a ``commit_refused`` row: nothing was handed out.
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("clock_timestamp()")
    )


class Privilege(enum.StrEnum):
    """``paimon_grants.privilege`` values; each implies the ones before it (admin > write > read)."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


class Principal(Base):
    """Someone (a person, a job, a service) who calls the service with a bearer token."""

    __tablename__ = "paimon_principals"
    __table_args__ = (UniqueConstraint("name"),)

    principal_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    created_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class Token(Base):
    """A bearer token of a principal: only its SHA-256 is stored (the token is shown once)."""

    __tablename__ = "paimon_tokens"
    __table_args__ = (UniqueConstraint("token_hash"),)

    token_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    principal_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("paimon_principals.principal_id", ondelete="CASCADE")
    )
    token_hash: Mapped[str] = mapped_column(String(64))
    token_prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Grant(Base):
    """``privilege`` on the catalog (no database), a database (no table) or one table, in the catalog
    ``catalog_key`` names (NULL: the service's default catalog; migration 0020)."""

    __tablename__ = "paimon_grants"
    __table_args__ = (
        CheckConstraint(_in_list("privilege", Privilege), name="privilege"),
        CheckConstraint("table_name IS NULL OR database_name IS NOT NULL", name="table_in_database"),
        Index(
            "uq_paimon_grants_catalog_scope",
            "principal_id",
            "catalog_key",
            "privilege",
            "database_name",
            "table_name",
            unique=True,
            postgresql_nulls_not_distinct=True,
        ),
    )

    grant_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    principal_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("paimon_principals.principal_id", ondelete="CASCADE")
    )
    privilege: Mapped[str] = mapped_column(Text)
    database_name: Mapped[str | None] = mapped_column(String(255))
    table_name: Mapped[str | None] = mapped_column(String(255))
    granted_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    catalog_key: Mapped[str | None] = mapped_column(String(255))


class ServicePrivilege(enum.StrEnum):
    """``paimon_service_grants.privilege`` values: what is granted outside any catalog."""

    CREATE_CATALOG = "create_catalog"


class ServiceGrant(Base):
    """A privilege at the service level (migration 0020): ``create_catalog``."""

    __tablename__ = "paimon_service_grants"
    __table_args__ = (
        CheckConstraint(_in_list("privilege", ServicePrivilege), name="privilege"),
        UniqueConstraint("principal_id", "privilege"),
    )

    grant_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    principal_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("paimon_principals.principal_id", ondelete="CASCADE")
    )
    privilege: Mapped[str] = mapped_column(Text)
    granted_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class PartitionStatistics(Base):
    """Per table and partition: totals kept by the commit path in each publishing transaction (Paimon's
    ``PartitionStatistics``); ``partition_key`` is the canonical JSON of ``spec``."""

    __tablename__ = "paimon_partition_statistics"

    table_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    partition_key: Mapped[str] = mapped_column(Text, primary_key=True)
    spec: Mapped[dict[str, str]] = mapped_column(JSONB)
    record_count: Mapped[int] = mapped_column(BigInteger)
    file_size_in_bytes: Mapped[int] = mapped_column(BigInteger)
    file_count: Mapped[int] = mapped_column(BigInteger)
    last_file_creation_time: Mapped[int] = mapped_column(BigInteger)
    total_buckets: Mapped[int | None] = mapped_column(Integer)
    snapshot_id: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class PartitionRegistration(Base):
    """A partition registered in the catalog (``createPartitions``) or marked done, per table; keyed
    like :class:`PartitionStatistics` (``partition_key`` the canonical JSON of ``spec``); migration 0006.
    ``done_at``/``done_by``: the done mark, when there is one."""

    __tablename__ = "paimon_partitions"

    table_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    partition_key: Mapped[str] = mapped_column(Text, primary_key=True)
    spec: Mapped[dict[str, str]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    created_by: Mapped[str | None] = mapped_column(Text)
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    done_by: Mapped[str | None] = mapped_column(Text)


class TableTimeline(Base):
    """One rollback: timeline ``timeline`` of the table starts from ``base_snapshot_id``; the snapshots
    after it (up to ``rolled_back_from``, their uuids in ``removed_uuids``) are gone from it."""

    __tablename__ = "paimon_table_timelines"

    table_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    timeline: Mapped[int] = mapped_column(Integer, primary_key=True)
    base_snapshot_id: Mapped[int] = mapped_column(BigInteger)
    rolled_back_from: Mapped[int] = mapped_column(BigInteger)
    removed_uuids: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    principal: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class TableBranch(Base):
    """A branch's snapshot pointer (migration 0009), for every branch but main (whose pointer is
    ``paimon_tables.latest_snapshot_id``). ``timeline``: the branch's incarnation, one no commit event
    of this (table, branch) used before it was created (a name dropped and created again, or renamed
    onto, starts its snapshot ids over), so the commit log's unique index holds across incarnations."""

    __tablename__ = "paimon_table_branches"
    __table_args__ = (
        CheckConstraint("branch <> 'main'", name="not_main"),
        CheckConstraint(
            "latest_snapshot_id IS NULL OR latest_snapshot_id >= 1", name="latest_snapshot_id_positive"
        ),
        CheckConstraint("timeline >= 0", name="timeline_non_negative"),
    )

    table_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    branch: Mapped[str] = mapped_column(Text, primary_key=True)
    latest_snapshot_id: Mapped[int | None] = mapped_column(BigInteger)
    timeline: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


# ---- Paimon's permission model (migration 0022, docs/GOVERNANCE.md) -------------------------------------


class GovernanceEventType(enum.StrEnum):
    """``paimon_governance_events.event_type`` values (enforced by a CHECK constraint)."""

    PERMISSION_GRANTED = "permission_granted"
    PERMISSION_REVOKED = "permission_revoked"
    POLICY_CREATED = "policy_created"
    POLICY_DROPPED = "policy_dropped"
    MEMBER_ADDED = "member_added"
    MEMBER_REMOVED = "member_removed"
    #: An object's drop removed its assignments and policies.
    OBJECT_DROPPED = "object_dropped"
    #: An object's rename moved its assignments with it.
    OBJECT_RENAMED = "object_renamed"


_RESOURCE_TYPES = (
    "CATALOG",
    "CATALOG_ALL",
    "DATABASE",
    "DATABASE_ALL",
    "TABLE",
    "COLUMN",
    "VIEW",
    "FUNCTION",
)
_ACCESSES = (
    "ALL", "CREATEDATABASE", "DESCRIBE", "ALTER", "DROP", "CREATETABLE", "CREATEFUNCTION", "CREATEVIEW",
    "LIST", "SELECT", "UPDATE", "GRANT",
)  # fmt: skip


class AssignmentRecord(Base):
    """One access on one resource for one principal (``paimon_meta.governance.permissions.Assignment``).
    ``object_id`` binds the resource to its object's stable id (database, table, view or function id; NULL:
    by name); ``catalog_key`` NULL is the service's default catalog."""

    __tablename__ = "paimon_assignments"
    __table_args__ = (
        CheckConstraint(_in_list("resource_type", _RESOURCE_TYPES), name="resource_type"),
        CheckConstraint(_in_list("access", _ACCESSES), name="access"),
        CheckConstraint(
            "(resource_type = 'COLUMN') = ((column_names IS NULL) <> (excluded_column_names IS NULL))",
            name="columns_for_column",
        ),
        Index(
            "uq_paimon_assignments_identity",
            "catalog_key",
            "resource_type",
            "database_name",
            "object_name",
            "access",
            "principal_id",
            unique=True,
            postgresql_nulls_not_distinct=True,
        ),
        Index("ix_paimon_assignments_principal", "principal_id", "catalog_key"),
        Index(
            "ix_paimon_assignments_object",
            "resource_type",
            "object_id",
            postgresql_where=text("object_id IS NOT NULL"),
        ),
    )

    assignment_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    catalog_key: Mapped[str | None] = mapped_column(String(255))
    principal_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("paimon_principals.principal_id", ondelete="CASCADE")
    )
    resource_type: Mapped[str] = mapped_column(Text)
    database_name: Mapped[str | None] = mapped_column(String(255))
    object_name: Mapped[str | None] = mapped_column(String(255))
    object_id: Mapped[int | None] = mapped_column(BigInteger)
    access: Mapped[str] = mapped_column(Text)
    column_names: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    excluded_column_names: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    expire_time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    granted_by: Mapped[str | None] = mapped_column(Text)
    granted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    reason: Mapped[str | None] = mapped_column(Text)


class PolicyRecord(Base):
    """A row filter or column mask of one table (by ``table_id``) for one principal; ``body`` is the
    rule's canonical JSON (``governance.rules.to_json``)."""

    __tablename__ = "paimon_policies"
    __table_args__ = (
        CheckConstraint(_in_list("policy_type", ("ROW_FILTER", "COLUMN_MASKING")), name="policy_type"),
        CheckConstraint(
            "(policy_type = 'COLUMN_MASKING') = (on_column IS NOT NULL)", name="column_for_masks"
        ),
        Index(
            "uq_paimon_policies_identity",
            "table_id",
            "principal_id",
            "policy_type",
            "on_column",
            unique=True,
            postgresql_nulls_not_distinct=True,
        ),
    )

    policy_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    catalog_key: Mapped[str] = mapped_column(String(255))
    table_id: Mapped[int] = mapped_column(BigInteger)
    principal_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("paimon_principals.principal_id", ondelete="CASCADE")
    )
    policy_type: Mapped[str] = mapped_column(Text)
    on_column: Mapped[str | None] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    reason: Mapped[str | None] = mapped_column(Text)


class PrincipalMember(Base):
    """``member_id`` belongs to the group or role ``group_id`` (both principals): the group's or role's
    assignments and policies apply to it."""

    __tablename__ = "paimon_principal_members"
    __table_args__ = (
        CheckConstraint("member_id <> group_id", name="not_itself"),
        Index("ix_paimon_principal_members_group", "group_id"),
    )

    member_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("paimon_principals.principal_id", ondelete="CASCADE"), primary_key=True
    )
    group_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("paimon_principals.principal_id", ondelete="CASCADE"), primary_key=True
    )
    added_by: Mapped[str | None] = mapped_column(Text)
    added_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class GovernanceEventRecord(Base):
    """One row of the append-only governance log: who (``principal``) changed what (``event_type``,
    ``subject``: the resource as ``TYPE db.name``, ``target``: the principal the change is for,
    ``payload``) when and why (``reason``). ``txid`` orders it in the change feed."""

    __tablename__ = "paimon_governance_events"
    __table_args__ = (
        CheckConstraint(_in_list("event_type", GovernanceEventType), name="event_type"),
        Index("ix_paimon_governance_events_feed", "txid", "event_id"),
        Index("ix_paimon_governance_events_subject", "subject", "event_id"),
        Index("ix_paimon_governance_events_target", "target", "event_id"),
    )

    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    txid: Mapped[int] = mapped_column(BigInteger, server_default=text(TXID_DEFAULT))
    catalog_key: Mapped[str | None] = mapped_column(String(255))
    event_type: Mapped[str] = mapped_column(Text)
    principal: Mapped[str | None] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)
    target: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("clock_timestamp()")
    )


# ---- views and functions (migration 0005) --------------------------------------------------------------


class CatalogObjectType(enum.StrEnum):
    """``paimon_catalog_object_events.object_type`` values (enforced by a CHECK constraint)."""

    VIEW = "view"
    FUNCTION = "function"
    SEMANTIC_VIEW = "semantic-view"


class CatalogObjectEventType(enum.StrEnum):
    """``paimon_catalog_object_events.event_type`` values (enforced by a CHECK constraint)."""

    CREATED = "created"
    ALTERED = "altered"
    RENAMED = "renamed"
    DROPPED = "dropped"


#: Names sort and page by byte order (Python's ``sorted``), and a name prefix is an index range.
_NAME = String(255, collation="C")


class PaimonView(Base):
    """Java's ``paimon_views`` (primary key catalog_key, database_name, view_name; the protocol's
    ``ViewSchema`` as JSON text in ``view_schema``) plus our columns, nullable or defaulted so Java's
    INSERTs keep working (migration 0005).

    ``view_id`` survives a rename and is never reused (the event log refers to it); ``view_uuid`` is
    the protocol's ``id`` (NULL for rows Java inserted). ``version`` starts at 1 and every alter adds one.
    """

    __tablename__ = "paimon_views"
    __table_args__ = (
        UniqueConstraint("view_id"),
        UniqueConstraint("view_uuid"),
        CheckConstraint("version >= 1", name="version_positive"),
    )

    catalog_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    database_name: Mapped[str] = mapped_column(_NAME, primary_key=True)
    view_name: Mapped[str] = mapped_column(_NAME, primary_key=True)
    view_schema: Mapped[str] = mapped_column(Text)
    view_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    view_uuid: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    created_by: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    updated_by: Mapped[str | None] = mapped_column(Text)


class PaimonFunction(Base):
    """A function of a database: the protocol's ``Function`` (parameters, definitions per dialect)
    plus its version and audit fields; ids as :class:`PaimonView`'s."""

    __tablename__ = "paimon_functions"
    __table_args__ = (
        UniqueConstraint("function_uuid"),
        UniqueConstraint("catalog_key", "database_name", "function_name"),
        CheckConstraint("version >= 1", name="version_positive"),
    )

    function_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    function_uuid: Mapped[uuid.UUID] = mapped_column(Uuid)
    catalog_key: Mapped[str] = mapped_column(String(255))
    database_name: Mapped[str] = mapped_column(_NAME)
    function_name: Mapped[str] = mapped_column(_NAME)
    input_params: Mapped[list[Any] | None] = mapped_column(JSONB)
    return_params: Mapped[list[Any] | None] = mapped_column(JSONB)
    deterministic: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    definitions: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    comment: Mapped[str | None] = mapped_column(Text)
    options: Mapped[dict[str, str]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    created_by: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    updated_by: Mapped[str | None] = mapped_column(Text)


class PaimonSemanticView(Base):
    """A semantic view of a database: an opaque model document (``format``, ``content``) kept verbatim,
    with ids, version and audit fields as :class:`PaimonFunction`'s (migration 0016)."""

    __tablename__ = "paimon_semantic_views"
    __table_args__ = (
        UniqueConstraint("semantic_view_uuid"),
        UniqueConstraint("catalog_key", "database_name", "name"),
        CheckConstraint("version >= 1", name="version_positive"),
    )

    semantic_view_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    semantic_view_uuid: Mapped[uuid.UUID] = mapped_column(Uuid)
    catalog_key: Mapped[str] = mapped_column(String(255))
    database_name: Mapped[str] = mapped_column(_NAME)
    name: Mapped[str] = mapped_column(_NAME)
    format: Mapped[str] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    created_by: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    updated_by: Mapped[str | None] = mapped_column(Text)


class CatalogObjectEventRecord(Base):
    """One row of the append-only log of view and function changes (migration 0005): ``identifier``
    is ``<database>.<name>`` after the change, ``version`` the object's version after it."""

    __tablename__ = "paimon_catalog_object_events"
    __table_args__ = (
        CheckConstraint(_in_list("object_type", CatalogObjectType), name="object_type"),
        CheckConstraint(_in_list("event_type", CatalogObjectEventType), name="event_type"),
        Index("ix_paimon_catalog_object_events_object", "object_type", "object_id", "event_id"),
        Index("ix_paimon_catalog_object_events_identifier", "object_type", "identifier", "event_id"),
    )

    event_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    object_type: Mapped[str] = mapped_column(Text)
    object_id: Mapped[int] = mapped_column(BigInteger)
    catalog_key: Mapped[str] = mapped_column(String(255))
    identifier: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)
    principal: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=text("clock_timestamp()")
    )


class OutboxPosition(Base):
    """How far the publisher of the change feed to one sink got (migration 0012, service/outbox.py): the
    feed position (metastore/feed.py) of the last event the broker acknowledged, written only after the
    ack, only forward, by the holder of the catalog's outbox advisory lock; ``published`` counts events."""

    __tablename__ = "paimon_outbox_positions"

    catalog_key: Mapped[str] = mapped_column(Text, primary_key=True)
    sink: Mapped[str] = mapped_column(Text, primary_key=True)
    txid: Mapped[int] = mapped_column(BigInteger)
    rank: Mapped[int] = mapped_column(SmallInteger)
    event_id: Mapped[int] = mapped_column(BigInteger)
    published: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    updated_by: Mapped[str | None] = mapped_column(Text)


class MaintenanceKind(enum.StrEnum):
    """What a maintenance job does (``paimon_maintenance_jobs.kind``; paimon_meta/maintenance/)."""

    COMPACT = "compact"
    EXPIRE_SNAPSHOTS = "expire_snapshots"
    EXPIRE_PARTITIONS = "expire_partitions"
    CREATE_TAG = "create_tag"
    REMOVE_ORPHANS = "remove_orphans"
    PURGE_DROPPED = "purge_dropped"


class MaintenanceJobState(enum.StrEnum):
    """A job's state: ``queued`` (waiting for ``run_after``), ``running`` (leased by a worker until
    ``lease_expires_at``), ``dead`` (out of attempts: the dead letter, kept until an operator acts).
    A job that succeeds is deleted (its run is in the maintenance log)."""

    QUEUED = "queued"
    RUNNING = "running"
    DEAD = "dead"


class MaintenanceJob(Base):
    """One job of the maintenance queue (migration 0017): at most one queued or running per table and
    kind (a partial unique index), taken with ``FOR UPDATE SKIP LOCKED`` under a lease."""

    __tablename__ = "paimon_maintenance_jobs"
    __table_args__ = (
        CheckConstraint(_in_list("kind", MaintenanceKind), name="kind"),
        CheckConstraint(_in_list("state", MaintenanceJobState), name="state"),
        CheckConstraint("attempts >= 0 AND max_attempts >= 1", name="attempts"),
        Index(
            "uq_paimon_maintenance_jobs_active",
            "catalog_key",
            "table_id",
            "kind",
            unique=True,
            postgresql_where=text("state IN ('queued', 'running')"),
        ),
        Index("ix_paimon_maintenance_jobs_due", "state", "run_after"),
    )

    job_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    catalog_key: Mapped[str] = mapped_column(String(255))
    table_id: Mapped[int] = mapped_column(BigInteger)
    table_identifier: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text, server_default=text("'queued'"))
    reason: Mapped[str] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    max_attempts: Mapped[int] = mapped_column(Integer, server_default=text("5"))
    run_after: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    lease_owner: Mapped[str | None] = mapped_column(Text)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    debt: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


#: A table's debt pressure: its worst bucket's sorted runs or small files, whichever is more (migration
#: 0027 indexes it per catalog: ``ix_paimon_maintenance_debts_pressure``, read backward: most first,
#: ties by name descending). ``{d}``: the alias of the debts relation with its dot, or ''.
DEBT_PRESSURE = (
    "greatest(coalesce(({d}debt ->> 'max_sorted_runs')::double precision, 0), "
    "coalesce(({d}debt ->> 'max_small_files')::double precision, 0))"
)


class MaintenanceDebt(Base):
    """A table's maintenance debt as last measured from its latest snapshot (migration 0017), and when
    each kind of job last succeeded on it (``last_runs``: kind -> ISO time), for the schedules."""

    __tablename__ = "paimon_maintenance_debts"
    __table_args__ = (
        # Migration 0027: the debt pressure per catalog, most first; the tables over the stop trigger;
        # a table's debt by name (``maintenance.scheduler.most_in_debt``, ``ops.metrics``).
        Index(
            "ix_paimon_maintenance_debts_pressure",
            "catalog_key",
            text(
                "GREATEST(COALESCE((debt ->> 'max_sorted_runs'::text)::double precision, "
                "0::double precision), "
                "COALESCE((debt ->> 'max_small_files'::text)::double precision, 0::double precision))"
            ),
            "table_identifier",
        ),
        Index(
            "ix_paimon_maintenance_debts_stopped",
            "catalog_key",
            postgresql_where=text(
                "(((debt ->> 'buckets_over_stop_trigger'::text))::double precision > (0)::double precision)"
            ),
        ),
        Index("ix_paimon_maintenance_debts_identifier", "catalog_key", "table_identifier"),
    )

    catalog_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    table_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    table_identifier: Mapped[str] = mapped_column(Text)
    snapshot_id: Mapped[int | None] = mapped_column(BigInteger)
    debt: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    last_runs: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class MaintenanceCursor(Base):
    """How far the maintenance scheduler of a catalog read the commit log (migration 0017); the row is
    taken ``FOR UPDATE SKIP LOCKED`` so one replica at a time measures the new commits."""

    __tablename__ = "paimon_maintenance_cursors"

    catalog_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    event_id: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class MaintenancePause(Base):
    """Maintenance paused by an operator (migration 0017): ``scope`` is ``*`` (the whole catalog) or a
    table's ``db.table``."""

    __tablename__ = "paimon_maintenance_pauses"

    catalog_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    scope: Mapped[str] = mapped_column(Text, primary_key=True)
    paused_by: Mapped[str | None] = mapped_column(Text)
    paused_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class DroppedTable(Base):
    """The recycle bin (migration 0017): a dropped table's catalog row as it was, its grants, and when
    it may be purged. Its files stay at ``location`` until it is purged; the name is free meanwhile."""

    __tablename__ = "paimon_dropped_tables"
    __table_args__ = (
        UniqueConstraint("table_id"),
        Index("ix_paimon_dropped_tables_name", "catalog_key", "database_name", "table_name"),
        Index("ix_paimon_dropped_tables_purge_after", "purge_after"),
    )

    drop_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    catalog_key: Mapped[str] = mapped_column(String(255))
    database_name: Mapped[str] = mapped_column(String(255))
    table_name: Mapped[str] = mapped_column(String(255))
    table_id: Mapped[int] = mapped_column(BigInteger)
    location: Mapped[str | None] = mapped_column(Text)
    #: the dropped ``paimon_tables`` row, column by column (restored as it was by an undrop)
    table_row: Mapped[dict[str, Any]] = mapped_column(JSONB)
    #: the table's grants: ``[{"principal_id", "privilege", "granted_by"}]``
    grants: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    dropped_by: Mapped[str | None] = mapped_column(Text)
    dropped_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    purge_after: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RemovedTable(Base):
    """The catalog of a table that left the registry (migration 0025): a row for every row deleted from
    ``paimon_tables`` or ``paimon_dropped_tables``, written by their AFTER DELETE triggers, so the events
    of a purged table still belong to their catalog (``metastore.event_partitions``)."""

    __tablename__ = "paimon_removed_tables"

    table_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    catalog_key: Mapped[str] = mapped_column(String(255))
    removed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class PaimonDroppedDatabase(Base):
    """The recycle bin's databases (migration 0021): a dropped database's row and properties as they
    were, its database-level grants, its views, functions and semantic views, and the bin entries
    (``paimon_dropped_tables.drop_id``) of the tables dropped with it. An undrop restores all of it if
    the name is free; the row is removed once its retention passed and its tables were purged."""

    __tablename__ = "paimon_dropped_databases"
    __table_args__ = (
        Index("ix_paimon_dropped_databases_name", "catalog_key", "database_name"),
        Index("ix_paimon_dropped_databases_purge_after", "purge_after"),
    )

    drop_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    catalog_key: Mapped[str] = mapped_column(String(255))
    database_name: Mapped[str] = mapped_column(String(255))
    location: Mapped[str | None] = mapped_column(Text)
    #: the ``paimon_databases`` row, column by column (None: a database only Java's rows knew)
    database_row: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    #: Java's ``paimon_database_properties`` rows
    properties: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    #: the database-level grants: ``[{"principal_id", "privilege", "granted_by"}]``
    grants: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    #: its catalog objects' rows by table: ``{"paimon_views": [...], "paimon_functions": [...], ...}``
    objects: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    #: the bin entries of the tables dropped with it
    table_drop_ids: Mapped[list[int]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    #: the run id of the database drop (each table's ``drop_table`` run names it)
    run_id: Mapped[str | None] = mapped_column(Text)
    dropped_by: Mapped[str | None] = mapped_column(Text)
    dropped_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    purge_after: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class PaimonCatalog(Base):
    """A catalog of the service (migration 0019): a name clients use as their ``warehouse``, the catalog
    key its databases, tables and locks are stored under, its warehouse root, its storage profile and the
    default options of its tables. No two catalogs' warehouses equal or nest (``warehouse_key``, compared
    under an advisory lock by ``paimon_meta.metastore.catalogs``)."""

    __tablename__ = "paimon_catalogs"
    __table_args__ = (
        UniqueConstraint("name"),
        UniqueConstraint("catalog_key"),
        Index("ix_paimon_catalogs_warehouse_key", "warehouse_key"),
    )

    catalog_id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    catalog_key: Mapped[str] = mapped_column(String(255))
    #: ``paimon_meta.io.base.normalise_uri`` of the warehouse root, and its ``location_key``
    warehouse: Mapped[str] = mapped_column(Text)
    warehouse_key: Mapped[str] = mapped_column(Text(collation="C"))
    #: the storage profile: an S3-compatible endpoint, region and path-style addressing (NULL: defaults)
    storage_endpoint: Mapped[str | None] = mapped_column(Text)
    storage_region: Mapped[str | None] = mapped_column(Text)
    storage_path_style: Mapped[bool | None] = mapped_column(Boolean)
    #: vending: the role assumed for the catalog's clients, and the external id the role's trust requires
    sts_role_arn: Mapped[str | None] = mapped_column(Text)
    sts_external_id: Mapped[str | None] = mapped_column(Text)
    #: the default options of the catalog's tables (and the server's own storage keys, never echoed)
    options: Mapped[dict[str, str]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    created_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))


class MetricFold(Base):
    """How far the event log's metrics rollup folded each log (migration 0027; ``paimon_meta.telemetry``):
    the feed position (txid, event_id) of the last event folded, the events folded, and the fold's layout
    (a rollup of another layout is folded again from the log)."""

    __tablename__ = "paimon_metric_folds"

    log: Mapped[str] = mapped_column(Text, primary_key=True)
    txid: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    event_id: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    events: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    layout: Mapped[str] = mapped_column(Text)
    folded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class MetricSeries(Base):
    """One series of the metrics rollup (migration 0027): a counter's value, or a histogram's sum with its
    count per bucket. ``subject``: a table's ``db.t``, a lock id, ``(other)``, or '' for none."""

    __tablename__ = "paimon_metric_series"

    family: Mapped[str] = mapped_column(Text, primary_key=True)
    catalog_key: Mapped[str] = mapped_column(Text, primary_key=True)
    subject: Mapped[str] = mapped_column(Text, primary_key=True)
    labels: Mapped[list[str]] = mapped_column(ARRAY(Text), primary_key=True)
    value: Mapped[float] = mapped_column(Double)
    buckets: Mapped[list[float] | None] = mapped_column(ARRAY(Double))


class MetricSubject(Base):
    """A table (``kind`` 'table') or lock ('lock') the metrics rollup gives series of its own (migration
    0027); the others are counted in their catalog's ``(other)`` series."""

    __tablename__ = "paimon_metric_subjects"

    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    catalog_key: Mapped[str] = mapped_column(Text, primary_key=True)
    subject: Mapped[str] = mapped_column(Text, primary_key=True)


class MetricOpenCommit(Base):
    """A commit the metrics rollup saw prepared and not yet concluded (migration 0027)."""

    __tablename__ = "paimon_metric_open_commits"

    commit_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    catalog_key: Mapped[str] = mapped_column(Text)
    table_identifier: Mapped[str] = mapped_column(Text)
    commit_kind: Mapped[str] = mapped_column(Text)
    first_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    attempt: Mapped[int] = mapped_column(Integer)


class MetricOpenLock(Base):
    """A lock acquisition the metrics rollup saw and no end of yet (migration 0027)."""

    __tablename__ = "paimon_metric_open_locks"

    lock_id: Mapped[str] = mapped_column(Text, primary_key=True)
    fencing_token: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    acquired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
