"""The append-only event log of commits and locks.

Every step of a commit is one row in ``paimon_commit_events`` written in the transaction that makes the
step true (the ``snapshot_published`` event commits together with the table pointer advance), so the log
is the authoritative history: ``pending_commits`` finds commits that were prepared and never finished,
and their ``prepared`` event carries the serialized CommitMessages so any process can finish them.

The database enforces the log's shape: a trigger rejects UPDATE/DELETE/TRUNCATE, CHECK constraints
restrict event types and kinds, and a unique partial index makes a second ``snapshot_published`` (or
``external``) for the same (table_id, snapshot_id) impossible.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

import pyarrow as pa
from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, Row, func, insert, select, text
from sqlalchemy.exc import IntegrityError

from paimon_meta.db.models import (
    TERMINAL_COMMIT_EVENT_TYPES,
    CommitEventRecord,
    CommitEventType,
    LockEventRecord,
    LockEventType,
    MaintenanceEventRecord,
    MaintenanceEventType,
    MaintenanceOperation,
)
from paimon_meta.errors import (
    CorruptMetadataError,
    EventLogPartitionMissingError,
    PaimonMetaError,
    ValidationError,
)
from paimon_meta.metastore.event_partitions import is_partition_missing
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.serde.commit_message import deserialize_commit_messages

__all__ = [
    "TERMINAL_COMMIT_EVENT_TYPES",
    "Aborted",
    "CommitEvent",
    "CommitEventType",
    "CommitRef",
    "ConflictChecked",
    "EventLog",
    "External",
    "Failed",
    "LockEvent",
    "LockEventType",
    "MaintenanceEvent",
    "PendingCommit",
    "Prepared",
    "PreparedSnapshot",
    "Recovered",
    "Retried",
    "SnapshotPublished",
    "StoredCommitEvent",
    "StoredLockEvent",
    "commit_event_insert",
    "commit_event_insert_sql",
    "commit_event_params",
    "rest_snapshot_uuid",
]

# Column -> SQL type of the commit log, for the plain-psycopg inserts of the commit path. The casts make
# ``INSERT ... SELECT %(x)s ... FROM <cte>`` type NULL parameters (which would otherwise be text).
_COMMIT_EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("commit_id", "uuid"),
    ("table_id", "bigint"),
    ("table_identifier", "text"),
    ("event_type", "text"),
    ("attempt", "integer"),
    ("commit_user", "text"),
    ("commit_identifier", "bigint"),
    ("commit_kind", "text"),
    ("snapshot_id", "bigint"),
    ("payload", "jsonb"),
    ("messages", "bytea"),
    ("messages_version", "integer"),
    ("duration_ms", "double precision"),
    ("principal", "text"),
    ("timeline", "integer"),
    ("branch", "text"),
)


def partition_missing(error: BaseException) -> EventLogPartitionMissingError | None:
    """The typed error for ``error`` (a driver error, or SQLAlchemy's around one) if it is Postgres
    refusing a commit event no partition of the log covers; else None."""
    if not is_partition_missing(error):
        return None
    return EventLogPartitionMissingError(
        "the commit log has no partition for the time of this event: the partitions ahead were not made "
        f"(paimon-meta serve makes them; so does paimon-meta events make-partitions): "
        f"{getattr(error, 'orig', None) or error}",
        log="paimon_commit_events",
    )


def commit_event_insert_sql(
    *, key: str = "", source: str | None = None
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The INSERT of :func:`commit_event_insert` without values: (SQL, (param, SQL type) in column
    order), e.g. to prepare it once on the server."""
    names = ", ".join(c for c, _ in _COMMIT_EVENT_COLUMNS)
    values = ", ".join(f"%({key}{c})s::{t}" for c, t in _COMMIT_EVENT_COLUMNS)
    types = tuple((f"{key}{c}", t) for c, t in _COMMIT_EVENT_COLUMNS)
    # Identifiers come from this module's constants and the caller's CTE name, values are parameters.
    if source is None:
        return f"INSERT INTO paimon_commit_events ({names}) VALUES ({values})", types  # noqa: S608
    return f"INSERT INTO paimon_commit_events ({names}) SELECT {values} FROM {source}", types  # noqa: S608


def commit_event_params(event: CommitEvent, *, key: str = "") -> dict[str, Any]:
    """The parameters of :func:`commit_event_insert_sql` for ``event``.

    Raises:
        ValidationError: the event is malformed (see :meth:`CommitEvent.to_row`).
    """
    row = event.to_row()
    return {f"{key}{c}": Jsonb(row[c]) if t == "jsonb" else row[c] for c, t in _COMMIT_EVENT_COLUMNS}


def commit_event_insert(
    event: CommitEvent, *, key: str = "", source: str | None = None
) -> tuple[str, dict[str, Any]]:
    """``event`` as one INSERT in psycopg's paramstyle (for plain psycopg connections), parameter
    names prefixed with ``key``. With ``source`` (the name of a CTE the caller defines) it is
    ``INSERT ... SELECT ... FROM source``: one row per row of ``source``, so the event is written
    only if that CTE returned a row (e.g. a compare-and-set that succeeded).

    Raises:
        ValidationError: the event is malformed (see :meth:`CommitEvent.to_row`).
    """
    params = commit_event_params(event, key=key)
    return commit_event_insert_sql(key=key, source=source)[0], params


#: A publishing event ``e`` whose snapshot is still part of the table: no rollback after its timeline
#: went back to before it (a rollback to T starting timeline k removes, for every earlier timeline,
#: the snapshots after T). Without rollbacks the subquery finds no row and costs one index probe.
LIVE_SNAPSHOT_SQL = (
    "e.snapshot_id <= coalesce((SELECT min(tl.base_snapshot_id) FROM paimon_table_timelines tl "
    "WHERE tl.table_id = e.table_id AND tl.timeline > e.timeline), e.snapshot_id)"
)
#: Dedupe lookup in psycopg's paramstyle (see :meth:`EventLog.find_published`): the snapshot id that
#: holds (user, identifier, kind) on a table's main branch, if any (ix_paimon_commit_events_dedupe).
FIND_PUBLISHED_SQL = (  # constant SQL text; values are parameters
    "SELECT e.snapshot_id FROM paimon_commit_events e "  # noqa: S608
    "WHERE e.table_id = %(table_id)s AND e.branch = 'main' AND e.commit_user = %(commit_user)s "
    "AND e.commit_identifier = %(commit_identifier)s AND e.commit_kind = %(commit_kind)s "
    "AND e.event_type IN ('snapshot_published', 'recovered', 'external') AND e.snapshot_id IS NOT NULL "
    f"AND {LIVE_SNAPSHOT_SQL} "
    "ORDER BY e.event_id LIMIT 1"
)
#: The same on a branch other than main (migration 0009), in the branch's current timeline
#: ``%(timeline)s`` (its incarnation: an earlier one's snapshots are not this branch's).
FIND_PUBLISHED_ON_BRANCH_SQL = (  # constant SQL text; values are parameters
    "SELECT e.snapshot_id FROM paimon_commit_events e "
    "WHERE e.table_id = %(table_id)s AND e.branch = %(branch)s AND e.commit_user = %(commit_user)s "
    "AND e.commit_identifier = %(commit_identifier)s AND e.commit_kind = %(commit_kind)s "
    "AND e.event_type IN ('snapshot_published', 'recovered', 'external') AND e.snapshot_id IS NOT NULL "
    "AND e.timeline = %(timeline)s "
    "ORDER BY e.event_id LIMIT 1"
)


@dataclass(frozen=True, slots=True)
class CommitRef:
    """The identity of one commit; every event of the commit repeats these fields."""

    commit_id: uuid.UUID
    table_id: int
    table_identifier: str
    commit_user: str
    commit_identifier: int
    commit_kind: CommitKind
    # Who asked for the commit (a service principal); None for library and engine commits.
    principal: str | None = None
    # The branch committed to (migration 0009).
    branch: str = "main"

    @classmethod
    def new(
        cls,
        *,
        table_id: int,
        table_identifier: str,
        commit_user: str,
        commit_identifier: int,
        commit_kind: CommitKind,
        principal: str | None = None,
        branch: str = "main",
    ) -> CommitRef:
        """A ref with a fresh random ``commit_id``."""
        return cls(
            uuid.uuid4(),
            table_id,
            table_identifier,
            commit_user,
            commit_identifier,
            commit_kind,
            principal,
            branch,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitEvent:
    """Fields shared by every commit event. Use the subclasses; each fixes ``event_type``.

    ``attempt`` is the 1-based attempt during which the event happened. ``payload`` holds free-form
    JSON details (counts, manifest lists, record deltas); the typed fields of a subclass are stored in
    the payload too, under their own names, and may not be repeated there.
    """

    event_type: ClassVar[CommitEventType]

    ref: CommitRef
    attempt: int = 1
    duration_ms: float | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)
    # The table's timeline (see migration 0003): what a publishing event's snapshot id belongs to.
    timeline: int = 0

    def typed_payload(self) -> dict[str, Any]:
        """Payload entries coming from this event type's own fields."""
        return {}

    def snapshot_id_column(self) -> int | None:
        """The value of the ``snapshot_id`` column for this event."""
        return None

    def to_row(self) -> dict[str, Any]:
        """The ``paimon_commit_events`` column values for this event.

        Raises:
            ValidationError: bad attempt/duration, payload key clash, or payload not JSON-serialisable.
        """
        if self.attempt < 1:
            raise ValidationError(f"attempt must be >= 1, got {self.attempt}", attempt=self.attempt)
        if self.duration_ms is not None and self.duration_ms < 0:
            raise ValidationError(f"duration_ms must be >= 0, got {self.duration_ms}")
        typed = self.typed_payload()
        clash = sorted(set(typed) & set(self.payload))
        if clash:
            raise ValidationError(f"payload repeats typed fields {clash}", keys=clash)
        payload = {**self.payload, **typed}
        try:
            json.dumps(payload)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"event payload is not JSON-serialisable: {exc}") from exc
        ref = self.ref
        return {
            "commit_id": ref.commit_id,
            "table_id": ref.table_id,
            "table_identifier": ref.table_identifier,
            "event_type": self.event_type.value,
            "attempt": self.attempt,
            "commit_user": ref.commit_user,
            "commit_identifier": ref.commit_identifier,
            "commit_kind": ref.commit_kind.value,
            "snapshot_id": self.snapshot_id_column(),
            "payload": payload,
            "messages": None,
            "messages_version": None,
            "duration_ms": self.duration_ms,
            "principal": ref.principal,
            "timeline": self.timeline,
            "branch": ref.branch,
        }


# CommitMessage bodies larger than this are stored zstd-compressed (10,000 files: 4.4 MB -> 0.2 MB in
# ~2 ms, where sending and TOASTing the plain bytes cost the commit ~80 ms); smaller ones stay plain,
# so the Java serializer bytes of ordinary commits can be read straight out of the table.
MESSAGES_COMPRESS_ABOVE = 4096
MESSAGES_CODEC = "zstd"
_MAX_MESSAGES_SIZE = (1 << 31) - 1  # what one bytea holds; a larger claim is corruption
_MAX_RATIO = 256  # a plain size claimed beyond this many times the stored bytes is corruption


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared(CommitEvent):
    """The commit's CommitMessages were accepted; ``messages`` are their serialized bytes (Java's
    ``CommitMessageSerializer.serializeList`` at ``messages_version``), compressed with
    ``messages_codec`` when that is set (``messages_size`` is then the plain size). Build it with
    :meth:`of`."""

    event_type: ClassVar[CommitEventType] = CommitEventType.PREPARED
    messages: bytes
    messages_version: int
    messages_codec: str | None = None
    messages_size: int | None = None

    @staticmethod
    def of(*, ref: CommitRef, messages: bytes, messages_version: int, payload: Mapping[str, Any]) -> Prepared:
        """The event for plain serialized ``messages``, compressed when large."""
        if len(messages) <= MESSAGES_COMPRESS_ABOVE:
            return Prepared(ref=ref, messages=messages, messages_version=messages_version, payload=payload)
        packed = pa.compress(messages, codec=MESSAGES_CODEC, asbytes=True)
        return Prepared(
            ref=ref,
            messages=packed,
            messages_version=messages_version,
            messages_codec=MESSAGES_CODEC,
            messages_size=len(messages),
            payload=payload,
        )

    def typed_payload(self) -> dict[str, Any]:
        if self.messages_codec is None:
            return {}
        return {"messages_codec": self.messages_codec, "messages_size": self.messages_size}

    def to_row(self) -> dict[str, Any]:
        row = CommitEvent.to_row(self)
        row["messages"] = self.messages
        row["messages_version"] = self.messages_version
        return row


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedSnapshot(CommitEvent):
    """A REST commit was accepted for checking: the client wrote the manifests and built ``snapshot``
    (its JSON) itself, so there are no CommitMessages to keep; ``statistics`` are the partition deltas
    it sent. Recovery never re-commits it (the client does, with a new snapshot): if the snapshot is not
    on storage it is aborted."""

    event_type: ClassVar[CommitEventType] = CommitEventType.PREPARED
    snapshot: Mapping[str, Any]
    statistics: list[Mapping[str, Any]] = field(default_factory=list)

    def typed_payload(self) -> dict[str, Any]:
        return {"source": "rest", "snapshot": dict(self.snapshot), "statistics": list(self.statistics)}


def rest_snapshot_uuid(prepared_payload: Mapping[str, Any]) -> str | None:
    """The snapshot uuid of a REST commit's ``prepared`` payload; None for other commits (and for a
    REST snapshot without a uuid, which cannot be told from another)."""
    if prepared_payload.get("source") != "rest":
        return None
    snapshot = prepared_payload.get("snapshot")
    value = snapshot.get("uuid") if isinstance(snapshot, Mapping) else None
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConflictChecked(CommitEvent):
    """The conflict check ran against ``base_snapshot_id``; ``conflict`` says whether it failed."""

    event_type: ClassVar[CommitEventType] = CommitEventType.CONFLICT_CHECKED
    conflict: bool
    base_snapshot_id: int | None = None
    reason: str | None = None

    def typed_payload(self) -> dict[str, Any]:
        return {"conflict": self.conflict, "base_snapshot_id": self.base_snapshot_id, "reason": self.reason}


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotPublished(CommitEvent):
    """Snapshot ``snapshot_id`` is on storage; written in the transaction that advances the pointer."""

    event_type: ClassVar[CommitEventType] = CommitEventType.SNAPSHOT_PUBLISHED
    snapshot_id: int

    def snapshot_id_column(self) -> int | None:
        return self.snapshot_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Retried(CommitEvent):
    """Attempt ``attempt`` failed retryably; the next attempt starts after ``wait_ms``."""

    event_type: ClassVar[CommitEventType] = CommitEventType.RETRIED
    reason: str
    wait_ms: float

    def typed_payload(self) -> dict[str, Any]:
        return {"reason": self.reason, "wait_ms": self.wait_ms}


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed(CommitEvent):
    """The commit definitely did not land and will not be retried (terminal)."""

    event_type: ClassVar[CommitEventType] = CommitEventType.FAILED
    reason: str
    error_type: str | None = None

    def typed_payload(self) -> dict[str, Any]:
        return {"reason": self.reason, "error_type": self.error_type}


@dataclass(frozen=True, slots=True, kw_only=True)
class Aborted(CommitEvent):
    """The commit was abandoned on purpose (caller or operator) before publishing (terminal)."""

    event_type: ClassVar[CommitEventType] = CommitEventType.ABORTED
    reason: str

    def typed_payload(self) -> dict[str, Any]:
        return {"reason": self.reason}


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered(CommitEvent):
    """Recovery resolved a pending commit (terminal). ``snapshot_id`` is where it landed, if it did."""

    event_type: ClassVar[CommitEventType] = CommitEventType.RECOVERED
    resolution: str
    reason: str | None = None
    snapshot_id: int | None = None

    def typed_payload(self) -> dict[str, Any]:
        return {"resolution": self.resolution, "reason": self.reason}

    def snapshot_id_column(self) -> int | None:
        return self.snapshot_id


@dataclass(frozen=True, slots=True, kw_only=True)
class External(CommitEvent):
    """A snapshot published by another writer (e.g. Java Paimon), observed on storage."""

    event_type: ClassVar[CommitEventType] = CommitEventType.EXTERNAL
    snapshot_id: int

    def snapshot_id_column(self) -> int | None:
        return self.snapshot_id


@dataclass(frozen=True, slots=True)
class StoredCommitEvent:
    """A commit event as read back from the log."""

    event_id: int
    ref: CommitRef
    event_type: CommitEventType
    attempt: int
    snapshot_id: int | None
    payload: dict[str, Any]
    messages: bytes | None
    messages_version: int | None
    created_at: datetime
    duration_ms: float | None

    def commit_messages(self) -> list[CommitMessage] | None:
        """The CommitMessages a ``prepared`` event carries (None if it carries none), decompressed
        and decoded. ``CorruptMetadataError`` if they cannot be (naming the commit)."""
        if self.messages is None or self.messages_version is None:
            return None
        where = f"prepared event of commit {self.ref.commit_id}"
        data = self.messages
        codec = self.payload.get("messages_codec")
        if codec is not None:
            size = self.payload.get("messages_size")
            # The size is allocated up front: bound it (a Java body compresses ~20x; allow far more).
            limit = min(_MAX_MESSAGES_SIZE, max(1 << 20, _MAX_RATIO * len(data)))
            if codec != MESSAGES_CODEC or not isinstance(size, int) or not 0 <= size <= limit:
                raise CorruptMetadataError(f"{where}: bad messages codec {codec!r} / size {size!r}")
            try:
                data = pa.decompress(data, decompressed_size=size, codec=codec, asbytes=True)
            except (OSError, ValueError, pa.ArrowException) as e:
                raise CorruptMetadataError(f"{where}: messages do not decompress: {e}") from e
        try:
            return deserialize_commit_messages(data, self.messages_version)
        except PaimonMetaError as e:
            raise CorruptMetadataError(f"{where}: {e.message}") from e

    @classmethod
    def from_row(cls, row: Row[Any]) -> StoredCommitEvent:
        """Build from a row selecting all ``paimon_commit_events`` columns."""
        m = row._mapping
        ref = CommitRef(
            m["commit_id"],
            m["table_id"],
            m["table_identifier"],
            m["commit_user"],
            m["commit_identifier"],
            CommitKind(m["commit_kind"]),
            m.get("principal"),
            m.get("branch", "main"),
        )
        return cls(
            event_id=m["event_id"],
            ref=ref,
            event_type=CommitEventType(m["event_type"]),
            attempt=m["attempt"],
            snapshot_id=m["snapshot_id"],
            payload=dict(m["payload"]),
            messages=m["messages"],
            messages_version=m["messages_version"],
            created_at=m["created_at"],
            duration_ms=m["duration_ms"],
        )


@dataclass(frozen=True, slots=True)
class PendingCommit:
    """A commit with a ``prepared`` event and no terminal event (published/failed/aborted/recovered)."""

    prepared: StoredCommitEvent
    last_event_type: CommitEventType
    last_event_at: datetime
    attempts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LockEvent:
    """One lock log entry (written by :mod:`paimon_meta.metastore.lock` in the state-changing txn)."""

    lock_id: str
    event_type: LockEventType
    owner: str | None = None
    fencing_token: int | None = None
    hostname: str | None = None
    pid: int | None = None
    operator: str | None = None
    reason: str | None = None
    previous_owner: str | None = None
    previous_fencing_token: int | None = None
    wait_ms: float | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        """The ``paimon_lock_events`` column values for this event."""
        return {
            "lock_id": self.lock_id,
            "event_type": self.event_type.value,
            "owner": self.owner,
            "fencing_token": self.fencing_token,
            "hostname": self.hostname,
            "pid": self.pid,
            "operator": self.operator,
            "reason": self.reason,
            "previous_owner": self.previous_owner,
            "previous_fencing_token": self.previous_fencing_token,
            "wait_ms": self.wait_ms,
            "payload": dict(self.payload),
        }


@dataclass(frozen=True, slots=True)
class StoredLockEvent:
    """A lock event as read back from the log."""

    event_id: int
    event: LockEvent
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceEvent:
    """One step of a maintenance run (``paimon_maintenance_events``): ``started`` with the run's
    settings, then ``finished`` with what it did or ``failed`` with the error."""

    run_id: uuid.UUID
    table_id: int
    table_identifier: str
    operation: MaintenanceOperation
    event_type: MaintenanceEventType
    operator: str
    dry_run: bool
    payload: Mapping[str, Any] = field(default_factory=dict)
    principal: str | None = None

    def to_row(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "run_id": self.run_id,
            "table_id": self.table_id,
            "table_identifier": self.table_identifier,
            "operation": self.operation.value,
            "event_type": self.event_type.value,
            "operator": self.operator,
            "dry_run": self.dry_run,
            "payload": dict(self.payload),
        }


class EventLog:
    """Append to and query the event log. Stateless apart from the engine used by the readers."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @contextmanager
    def _reading(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
        else:
            with self._engine.connect() as own:
                yield own

    @staticmethod
    def append(conn: Connection, event: CommitEvent) -> int:
        """Insert ``event`` in the caller's transaction; returns its ``event_id``.

        Raises:
            ValidationError: the event is malformed (see :meth:`CommitEvent.to_row`).
            sqlalchemy.exc.IntegrityError: a database invariant refused it, e.g. a second
                ``snapshot_published`` for the same (table_id, snapshot_id).
        """
        statement = insert(CommitEventRecord).returning(CommitEventRecord.event_id)
        try:
            result = conn.execute(statement, event.to_row())
        except IntegrityError as e:
            if (missing := partition_missing(e)) is not None:
                raise missing from e
            raise
        return int(result.scalar_one())

    def append_maintenance(self, event: MaintenanceEvent) -> int:
        """Insert a maintenance event in its own transaction; returns its ``event_id``."""
        statement = insert(MaintenanceEventRecord).returning(MaintenanceEventRecord.event_id)
        with self._engine.begin() as conn:
            return int(conn.execute(statement, event.to_row()).scalar_one())

    @staticmethod
    def append_lock(conn: Connection, event: LockEvent) -> int:
        """Insert a lock event in the caller's transaction; returns its ``event_id``."""
        statement = insert(LockEventRecord).returning(LockEventRecord.event_id)
        result = conn.execute(statement, event.to_row())
        return int(result.scalar_one())

    def events_for_commit(
        self, commit_id: uuid.UUID, *, conn: Connection | None = None
    ) -> list[StoredCommitEvent]:
        """All events of one commit, oldest first."""
        query = (
            select(CommitEventRecord.__table__)
            .where(CommitEventRecord.commit_id == commit_id)
            .order_by(CommitEventRecord.event_id)
        )
        with self._reading(conn) as c:
            return [StoredCommitEvent.from_row(r) for r in c.execute(query)]

    def pending_commits(
        self, table_id: int, *, branch: str | None = None, conn: Connection | None = None
    ) -> list[PendingCommit]:
        """Commits of ``table_id`` (on ``branch``; None: on any) that were prepared and have no terminal
        event, oldest first.

        Each carries its latest ``prepared`` event (with the CommitMessages bytes).
        """
        ev = CommitEventRecord
        terminal = [t.value for t in TERMINAL_COMMIT_EVENT_TYPES]
        finished = select(ev.commit_id).where(ev.table_id == table_id, ev.event_type.in_(terminal))
        on_branch = [] if branch is None else [ev.branch == branch]
        latest_prepared = (
            select(func.max(ev.event_id))
            .where(
                ev.table_id == table_id,
                *on_branch,
                ev.event_type == CommitEventType.PREPARED.value,
                ev.commit_id.not_in(finished),
            )
            .group_by(ev.commit_id)
        )
        prepared = (
            select(CommitEventRecord.__table__).where(ev.event_id.in_(latest_prepared)).order_by(ev.event_id)
        )
        with self._reading(conn) as c:
            rows = [StoredCommitEvent.from_row(r) for r in c.execute(prepared)]
            if not rows:
                return []
            summary = (
                select(
                    ev.commit_id,
                    func.max(ev.event_id).label("last_event_id"),
                    func.max(ev.attempt).label("attempts"),
                )
                .where(ev.commit_id.in_([r.ref.commit_id for r in rows]))
                .group_by(ev.commit_id)
                .subquery()
            )
            last = select(summary.c.commit_id, summary.c.attempts, ev.event_type, ev.created_at).join(
                ev, ev.event_id == summary.c.last_event_id
            )
            latest = {r.commit_id: r for r in c.execute(last)}
        return [
            PendingCommit(
                prepared=r,
                last_event_type=CommitEventType(latest[r.ref.commit_id].event_type),
                last_event_at=latest[r.ref.commit_id].created_at,
                attempts=int(latest[r.ref.commit_id].attempts),
            )
            for r in rows
        ]

    def find_published(
        self,
        table_id: int,
        commit_user: str,
        commit_identifier: int,
        commit_kind: CommitKind,
        *,
        conn: Connection | None = None,
    ) -> StoredCommitEvent | None:
        """The event that put (user, identifier, kind) into a snapshot of a table's main branch (dedupe):
        ``snapshot_published``, ``recovered`` with a snapshot (published, recorded late) or ``external``
        (written by another engine). All three carry the snapshot id."""
        aliased = CommitEventRecord.__table__.alias("e")  # LIVE_SNAPSHOT_SQL names it "e"
        ev = aliased.c
        query = (
            select(aliased)
            .where(
                ev.table_id == table_id,
                ev.branch == "main",  # main's timelines: LIVE_SNAPSHOT_SQL
                ev.commit_user == commit_user,
                ev.commit_identifier == commit_identifier,
                ev.commit_kind == commit_kind.value,
                ev.event_type.in_(
                    [
                        CommitEventType.SNAPSHOT_PUBLISHED.value,
                        CommitEventType.RECOVERED.value,
                        CommitEventType.EXTERNAL.value,
                    ]
                ),
                ev.snapshot_id.is_not(None),
                text(LIVE_SNAPSHOT_SQL),
            )
            .order_by(ev.event_id)
            .limit(1)
        )
        with self._reading(conn) as c:
            row = c.execute(query).first()
        return None if row is None else StoredCommitEvent.from_row(row)

    def lock_events(
        self, lock_id: str, *, limit: int = 100, conn: Connection | None = None
    ) -> list[StoredLockEvent]:
        """The latest ``limit`` events of one lock, oldest first."""
        le = LockEventRecord
        query = (
            select(LockEventRecord.__table__)
            .where(le.lock_id == lock_id)
            .order_by(le.event_id.desc())
            .limit(limit)
        )
        with self._reading(conn) as c:
            rows = list(c.execute(query))
        out = []
        for row in reversed(rows):
            m = row._mapping
            event = LockEvent(
                lock_id=m["lock_id"],
                event_type=LockEventType(m["event_type"]),
                owner=m["owner"],
                fencing_token=m["fencing_token"],
                hostname=m["hostname"],
                pid=m["pid"],
                operator=m["operator"],
                reason=m["reason"],
                previous_owner=m["previous_owner"],
                previous_fencing_token=m["previous_fencing_token"],
                wait_ms=m["wait_ms"],
                payload=dict(m["payload"]),
            )
            out.append(StoredLockEvent(m["event_id"], event, m["created_at"]))
        return out
