"""The metastore guard: the Postgres lock (lease, heartbeat, fencing), the event log and the table pointer.

Per session (one lock hold):

1. acquire the table's lock row (Java-compatible key ``<catalog-key>.<db>.<table>``);
2. reconcile: every snapshot on storage beyond the table pointer is recorded before anything is decided
   (``recovered`` when it carries a pending commit of ours, ``external`` otherwise), so dedupe by the event
   log sees everything storage has;
3. the coordinator dedupes, checks, stages; ``before_publish`` opens the publishing transaction and
   validates the lease in it (``FOR KEY SHARE`` on the lock row: no takeover until it ends);
4. the coordinator creates ``snapshot-N`` on storage; ``published`` advances the pointer (compare-and-set
   N-1 -> N) and appends ``snapshot_published`` in that same transaction, then commits;
5. release (owner- and token-checked, NOTIFY waiters).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine

from paimon_meta.catalog.events import (
    Aborted,
    CommitRef,
    ConflictChecked,
    EventLog,
    External,
    Failed,
    Prepared,
    Recovered,
    Retried,
    SnapshotPublished,
)
from paimon_meta.catalog.lock import LockLease, MetastoreLock
from paimon_meta.catalog.registry import Registry, TableRow
from paimon_meta.commit.guard import CommitGuard, CommitRecord, GuardSession
from paimon_meta.errors import LockNotHeldError
from paimon_meta.spec.snapshot import CommitKind, Snapshot
from paimon_meta.table.snapshots import SnapshotManager

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LockSettings:
    lease_seconds: int = 30
    acquire_timeout_seconds: float = 60.0


def reconcile(
    registry: Registry, events: EventLog, table_row: TableRow, snapshots: SnapshotManager
) -> list[tuple[int, str]]:
    """Record every snapshot on storage newer than the table pointer. Call it holding the table lock.

    Returns ``(snapshot_id, event_type)`` per snapshot recorded. Idempotent: the pointer only moves
    forward, by compare-and-set, in the transaction that records each snapshot.
    """
    engine = registry.engine
    pointer = registry.get_table_row_by_id(table_row.table_id).latest_snapshot_id or 0
    latest = snapshots.latest_snapshot_id()
    if latest is None or latest <= pointer:
        return []
    pending = {
        (p.prepared.ref.commit_user, p.prepared.ref.commit_identifier, p.prepared.ref.commit_kind): p
        for p in events.pending_commits(table_row.table_id)
    }
    recorded: list[tuple[int, str]] = []
    for sid in range(pointer + 1, latest + 1):
        if not snapshots.snapshot_exists(sid):
            # Expired while the metastore was not looking: nothing to record, but the pointer must pass it.
            with engine.begin() as conn:
                Registry.advance_pointer(conn, table_row.table_id, sid - 1 if sid > 1 else None, sid)
            continue
        snap = snapshots.snapshot(sid)
        match = pending.get((snap.commit_user, snap.commit_identifier, snap.commit_kind))
        with engine.begin() as conn:
            Registry.advance_pointer(conn, table_row.table_id, sid - 1 if sid > 1 else None, sid)
            if match is not None:
                events.append(
                    conn,
                    Recovered(
                        ref=match.prepared.ref,
                        attempt=match.attempts or 1,
                        resolution="published",
                        reason="snapshot found on storage without its published event",
                        snapshot_id=sid,
                        payload=_snapshot_payload(snap),
                    ),
                )
                recorded.append((sid, "recovered"))
            else:
                ref = CommitRef.new(
                    table_id=table_row.table_id,
                    table_identifier=table_row.identifier,
                    commit_user=snap.commit_user,
                    commit_identifier=snap.commit_identifier,
                    commit_kind=snap.commit_kind,
                )
                events.append(conn, External(ref=ref, snapshot_id=sid, payload=_snapshot_payload(snap)))
                recorded.append((sid, "external"))
    if recorded:
        log.info("reconciled %s: %s", table_row.identifier, recorded)
    return recorded


def _snapshot_payload(snap: Snapshot) -> dict[str, Any]:
    return {
        "snapshot_uuid": snap.uuid,
        "base_manifest_list": snap.base_manifest_list,
        "delta_manifest_list": snap.delta_manifest_list,
        "record_delta": snap.delta_record_count,
        "total_records": snap.total_record_count,
        "time_millis": snap.time_millis,
    }


@dataclass(slots=True)
class _Session(GuardSession):
    guard: MetastoreGuard
    ref: CommitRef
    lease: LockLease
    _conn: Connection | None = None
    _txn: Any = None

    def find_committed(
        self, user: str, identifier: int, kind: CommitKind, latest: Snapshot | None
    ) -> int | None:
        found = self.guard.events.find_published(self.ref.table_id, user, identifier, kind)
        return None if found is None else found.snapshot_id

    def before_publish(self) -> None:
        # Opens the publishing transaction: the lease is validated in it and the lock row stays
        # key-share locked until ``published`` commits, so nobody takes over while we publish.
        conn = self.guard.engine.connect()
        self._conn, self._txn = conn, conn.begin()
        self.lease.validate_in_txn(conn)

    def record(self, event_type: str, *, attempt: int, **details: Any) -> None:
        self.guard.event(str(self.ref.commit_id), event_type, attempt=attempt, **details)

    def published(self, snapshot: Snapshot, *, attempt: int, details: dict[str, Any]) -> None:
        if self._conn is None:
            raise LockNotHeldError("published() without before_publish()")
        Registry.advance_pointer(
            self._conn, self.ref.table_id, snapshot.id - 1 if snapshot.id > 1 else None, snapshot.id
        )
        EventLog.append(
            self._conn,
            SnapshotPublished(ref=self.ref, attempt=attempt, snapshot_id=snapshot.id, payload=details),
        )
        self._txn.commit()
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            if self._txn is not None and self._txn.is_active:
                self._txn.rollback()
            self._conn.close()
        self._conn, self._txn = None, None


@dataclass(slots=True)
class MetastoreGuard(CommitGuard):
    """Guards commits of one table with the metastore. One per coordinator (one commit user)."""

    engine: Engine
    lock: MetastoreLock
    events: EventLog
    registry: Registry
    table_row: TableRow
    snapshots: SnapshotManager
    lock_id: str
    settings: LockSettings = field(default_factory=LockSettings)
    owner: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}")
    _refs: dict[str, CommitRef] = field(default_factory=dict)
    _started: dict[str, float] = field(default_factory=dict)

    def prepared(self, record: CommitRecord) -> None:
        ref = CommitRef(
            uuid.UUID(record.commit_id),
            self.table_row.table_id,
            self.table_row.identifier,
            record.commit_user,
            record.commit_identifier,
            record.kind,
        )
        self._refs[record.commit_id] = ref
        self._started[record.commit_id] = time.monotonic()
        with self.engine.begin() as conn:
            EventLog.append(
                conn,
                Prepared(
                    ref=ref,
                    messages=record.messages,
                    messages_version=record.messages_version,
                    payload=dict(record.counts),
                ),
            )

    @contextmanager
    def session(self, commit_id: str, attempt: int) -> Iterator[GuardSession]:
        ref = self._refs[commit_id]
        waited = time.monotonic()
        lease = self.lock.acquire(
            self.lock_id,
            owner=self.owner,
            lease_seconds=self.settings.lease_seconds,
            timeout_seconds=self.settings.acquire_timeout_seconds,
        )
        session = _Session(self, ref, lease)
        try:
            log.debug("lock %s acquired in %.1f ms", self.lock_id, (time.monotonic() - waited) * 1000)
            reconcile(self.registry, self.events, self.table_row, self.snapshots)
            yield session
        finally:
            session._close()
            lease.release()

    def event(self, commit_id: str, event_type: str, *, attempt: int, **details: Any) -> None:
        ref = self._refs.get(commit_id)
        if ref is None:
            return
        duration = details.pop("duration_ms", None)
        event: Any
        if event_type == "conflict_checked":
            conflict = details.pop("outcome", "ok") == "conflict"
            reason = details.pop("reason", None)
            event = ConflictChecked(
                ref=ref,
                attempt=attempt,
                duration_ms=duration,
                conflict=conflict,
                reason=reason,
                payload=details,
            )
        elif event_type == "retried":
            event = Retried(
                ref=ref,
                attempt=attempt,
                reason=str(details.pop("reason", "")),
                wait_ms=float(details.pop("wait_ms", 0.0)),
                payload=details,
            )
        elif event_type == "deduplicated":
            event = Aborted(
                ref=ref,
                attempt=attempt,
                reason=f"deduplicated: already committed as snapshot {details.get('snapshot_id')}",
                payload=details,
            )
        else:
            raise ValueError(f"unknown event type {event_type!r}")
        with self.engine.begin() as conn:
            EventLog.append(conn, event)

    def finished(self, commit_id: str, *, outcome: str, **details: Any) -> None:
        ref = self._refs.pop(commit_id, None)
        started = self._started.pop(commit_id, None)
        if ref is None or outcome != "failed":
            # published: its event is written; deduplicated: ``aborted`` is written; unknown: stays pending
            # on purpose, for recovery to resolve by reading storage.
            return
        duration = None if started is None else (time.monotonic() - started) * 1000
        with self.engine.begin() as conn:
            EventLog.append(
                conn,
                Failed(
                    ref=ref,
                    duration_ms=duration,
                    reason=str(details.get("reason", "")),
                    error_type=details.get("error"),
                ),
            )
