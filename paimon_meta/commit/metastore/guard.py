"""The metastore guard: the Postgres lock (lease, heartbeat, fencing), the event log and the table pointer.

Per commit (one ``commit()`` kind), on one plain psycopg connection of the lock's session pool, several
statements per round trip:

1. ``prepared`` (the serialized messages), in the first lock attempt's transaction (after the delta
   manifests are written: they are garbage until a snapshot names them);
2. acquire the table's lock row (Java-compatible key ``<catalog-key>.<db>.<table>``), then, in the
   acquiring transaction's last round trip, read the table pointer and the dedupe lookup of this commit
   in one query;
3. reconcile, only when storage is ahead of the pointer (``snapshot-(pointer+1)`` exists): every such
   snapshot is recorded (``recovered`` when it carries a pending commit of ours, ``external``
   otherwise) and the dedupe lookup is redone, so dedupe by the event log sees everything storage has;
4. the coordinator dedupes, checks, stages; ``before_publish`` opens the publishing transaction and
   validates the lease in it (``FOR KEY SHARE`` on the lock row: no takeover until it ends);
5. the coordinator creates ``snapshot-N`` on storage and the hints; ``published`` then commits, in
   that one transaction: the audit events held back during the session (``conflict_checked``), the
   pointer compare-and-set N-1 -> N with ``snapshot_published`` (inserted only if the CAS matched), and
   the release (owner- and token-checked delete, its event, NOTIFY to waiters);
6. a session that did not publish (dedupe, conflict, lost race, error) releases the lock at its end,
   with its held-back events, in one transaction.

When the metastore connection dies at 5. (a Postgres restart), ``snapshot-N`` is durable and its record
is not (or its COMMIT's answer was lost). The commit has succeeded (storage is the truth); the holder
settles its record in place rather than leaving it, and the lock row, to the next holder after the lease:
the lease goes to the lock's background retrier (:mod:`paimon_meta.metastore.deferred`) with a
:class:`_DeferredRecording`, which, once the metastore answers, validates the lease in a transaction,
reads the pointer and, if it is still N-1, commits the held-back events, the compare-and-set with
``snapshot_published`` and the statistics together with the release (if it is N, the lost COMMIT had
committed: only the release). The lease validated in that transaction keeps I1/I2 as at 5.: nobody else
can record N meanwhile (reconcile runs only under the lock), and the compare-and-set records it once.
If the lease is lost by then, the commit is handed to recovery at once: the holder takes the lock if it
is free and reconciles (``recovered``); if someone holds it, that holder records it (every holder
reconciles storage beyond the pointer when it starts). A log line says which.

A commit whose connection dies while it waits at 2. goes on waiting on a fresh connection
(:meth:`MetastoreGuard.acquire_through_outages`): nothing of it was staged yet, and its ``prepared``
event, committed with its first attempt, is not sent again.

Group commit (:class:`LockHold`, used by ``paimon_meta.commit.metastore.group``):
consecutive sessions of several
commits share one lease and one connection. The first acquires as in 2.; each later one opens with one
round trip: its ``prepared`` event (committed), then the pointer and its dedupe lookup, and its
publishing transaction opened with the lease validated in it (4., done first: the row lock then held
keeps it valid). When the group's next commit is known as one publishes, that opening rides on the
publish (5.): the next commit's ``prepared`` event commits in the same transaction as this one's record,
and its pointer, fencing and resolution are read right after, in the same round trip (one round trip
and one transaction per commit). ``published`` and a session end (6.) keep the lock. The hold releases
it when the group ends, and drops it (a fresh acquire next) after any failure that may have left the
connection or the lease in doubt. Every commit still has its own events, pointer compare-and-set and
fencing check, so the invariants hold per commit.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import sqlalchemy.exc
from sqlalchemy import Connection, Engine

from paimon_meta.commit.guard import CommitGuard, CommitRecord, GuardSession
from paimon_meta.commit.manifests import run_together
from paimon_meta.db.models import PRINCIPAL_SETTING_SQL
from paimon_meta.db.pool import RawConnection, ServerStatement, Statement, rollback_quietly, run_batch
from paimon_meta.errors import (
    CommitConflictError,
    CommitFailedError,
    LockLostError,
    LockNotHeldError,
    LockTimeoutError,
    SnapshotPointerConflictError,
    TableNotFoundError,
    TableRowChangedError,
)
from paimon_meta.metastore.branches import (
    ADVANCE_BRANCH_POINTER_SQL,
    BRANCH_POINTER_SQL,
    MAIN,
    advance_branch_pointer,
    branch_pointer,
    put_branch,
)
from paimon_meta.metastore.deferred import ReleaseOutcome, connection_lost
from paimon_meta.metastore.events import (
    FIND_PUBLISHED_ON_BRANCH_SQL,
    FIND_PUBLISHED_SQL,
    Aborted,
    CommitEvent,
    CommitRef,
    ConflictChecked,
    EventLog,
    External,
    Failed,
    PendingCommit,
    Prepared,
    Recovered,
    Retried,
    SnapshotPublished,
    commit_event_insert,
    commit_event_insert_sql,
    commit_event_params,
    partition_missing,
    rest_snapshot_uuid,
)
from paimon_meta.metastore.lock import LockLease, MetastoreLock
from paimon_meta.metastore.registry import ADVANCE_POINTER_SQL, POINTER_SQL, Registry, TableRow
from paimon_meta.metastore.statistics import apply_statements
from paimon_meta.metastore.timelines import removed_identities, snapshot_identity
from paimon_meta.model.partition_statistics import PartitionDelta
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.table.snapshots import SnapshotManager

log = logging.getLogger(__name__)

# The latest terminal event of one commit (recovery writes ``recovered``/``aborted`` on the original id).
RESOLVED_SQL = (
    "SELECT event_type, snapshot_id FROM paimon_commit_events WHERE commit_id = %(commit_id)s "
    "AND event_type IN ('aborted', 'recovered', 'failed') ORDER BY event_id DESC LIMIT 1"
)
_RESOLVED = ServerStatement("paimon_commit_resolved", RESOLVED_SQL, (("commit_id", "uuid"),))

# Pointer and dedupe lookup of one commit in one query, read right after the lock is ours.
_POINTER_AND_PUBLISHED = ServerStatement(
    "paimon_commit_pointer",
    "SELECT t.latest_snapshot_id AS pointer, t.timeline, (" + FIND_PUBLISHED_SQL + ") AS published, "
    "t.catalog_key, t.database_name, t.table_name, t.location, t.schema_id "
    "FROM paimon_tables t WHERE t.table_id = %(table_id)s",
    (("table_id", "int8"), ("commit_user", "text"), ("commit_identifier", "int8"), ("commit_kind", "text")),
)
# The record: pointer compare-and-set N-1 -> N and, only if it matched, the snapshot_published event (a
# pointer moved by someone else records nothing; the unique index forbids a second published event
# for a snapshot id). Returns the event id, or no row.
_PUBLISHED_INSERT, _PUBLISHED_TYPES = commit_event_insert_sql(key="p_", source="cas")
_RECORD = ServerStatement(
    "paimon_commit_record",
    f"WITH cas AS ({ADVANCE_POINTER_SQL}) {_PUBLISHED_INSERT} RETURNING event_id",
    (("table_id", "int8"), ("expected_prev", "int8"), ("new_snapshot_id", "int8"), *_PUBLISHED_TYPES),
)
# On a branch other than main (migration 0009): the branch's pointer row (absent: created by reconcile,
# see MetastoreSession.latest_snapshot_id) and the dedupe lookup in the branch's current timeline.
_BRANCH_POINTER_AND_PUBLISHED = ServerStatement(
    "paimon_commit_branch_pointer",
    "SELECT b.latest_snapshot_id AS pointer, coalesce(b.timeline, 0) AS timeline, "
    "b.branch IS NOT NULL AS has_branch_row, (SELECT e.snapshot_id FROM paimon_commit_events e "
    "WHERE e.table_id = t.table_id AND e.branch = %(branch)s AND e.commit_user = %(commit_user)s "
    "AND e.commit_identifier = %(commit_identifier)s AND e.commit_kind = %(commit_kind)s "
    "AND e.event_type IN ('snapshot_published', 'recovered', 'external') AND e.snapshot_id IS NOT NULL "
    "AND e.timeline = b.timeline ORDER BY e.event_id LIMIT 1) AS published, "
    "t.catalog_key, t.database_name, t.table_name, t.location "
    "FROM paimon_tables t LEFT JOIN paimon_table_branches b "
    "ON b.table_id = t.table_id AND b.branch = %(branch)s WHERE t.table_id = %(table_id)s",
    (
        ("table_id", "int8"),
        ("branch", "text"),
        ("commit_user", "text"),
        ("commit_identifier", "int8"),
        ("commit_kind", "text"),
    ),
)
_BRANCH_RECORD = ServerStatement(
    "paimon_commit_branch_record",
    f"WITH cas AS ({ADVANCE_BRANCH_POINTER_SQL}) {_PUBLISHED_INSERT} RETURNING event_id",
    (
        ("table_id", "int8"),
        ("branch", "text"),
        ("expected_prev", "int8"),
        ("new_snapshot_id", "int8"),
        *_PUBLISHED_TYPES,
    ),
)


# A commit whose connection died while it waited for the lock waits on a fresh one: first retry after
# this long, doubled up to the cap (with jitter) while the metastore refuses connections.
_RECONNECT_START_SECONDS = 0.05
_RECONNECT_CAP_SECONDS = 1.0

# Connection-level failures of the metastore (server down or restarting, session terminated, timeouts).
_METASTORE_FAILURES = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
)


@contextmanager
def _metastore_step(step: str, lock_id: str) -> Iterator[None]:
    """A metastore failure before the snapshot is created is a definite failure of the attempt: the
    holder can no longer prove it holds the lock, so it must not publish. Raised as LockLostError,
    which the coordinator retries (with backoff, on a fresh connection) like a lost lease."""
    try:
        yield
    except _METASTORE_FAILURES as e:
        raise LockLostError(
            f"metastore failed while {step}: {e}", lock_id=lock_id, reason=f"metastore failure: {step}"
        ) from e


@dataclass(frozen=True, slots=True)
class LockSettings:
    lease_seconds: int = 30
    acquire_timeout_seconds: float = 60.0


def reconcile(
    registry: Registry,
    events: EventLog,
    table_row: TableRow,
    snapshots: SnapshotManager,
    *,
    exclude: uuid.UUID | None = None,
    branch: str = MAIN,
) -> list[tuple[int, str]]:
    """Record every snapshot on storage newer than the table pointer (``branch``'s: ``snapshots`` is
    then that branch's manager). Call it holding the table lock.

    A snapshot is recorded ``recovered`` on the pending commit of its (user, identifier, kind) -- the
    oldest such one if several (a commit and its re-sends) -- and ``external`` if none. ``exclude``:
    the commit of the session reconciling, which cannot have published anything yet (it is just
    starting under the lock): a re-send of a commit that died after its snapshot must not be credited
    with that snapshot, or the original stays pending and is resolved onto it a second time.

    Returns ``(snapshot_id, event_type)`` per snapshot recorded. Idempotent: the pointer only moves
    forward, by compare-and-set, in the transaction that records each snapshot.
    """
    engine = registry.engine
    current: TableRow | None = None
    if branch != MAIN:
        pointer, timeline = _branch_pointer_or_new(engine, table_row.table_id, branch, snapshots)
    else:
        current = registry.get_table_row_by_id(table_row.table_id)
        pointer, timeline = current.latest_snapshot_id or 0, current.timeline
    latest = snapshots.latest_snapshot_id()
    if latest is None or latest <= pointer:
        return []
    if current is not None and timeline > 0:  # main's rollbacks (a branch's timeline is its incarnation)
        latest = _finish_rollback(engine, current, snapshots, pointer, latest)
        if latest is None or latest <= pointer:
            return []
    pending, rest = _pending_by_key(events, table_row, exclude, branch)

    def advance(conn: Connection, sid: int) -> None:
        prev = sid - 1 if sid > 1 else None
        if branch == MAIN:
            Registry.advance_pointer(conn, table_row.table_id, prev, sid)
        elif not advance_branch_pointer(conn, table_row.table_id, branch, prev, sid):
            raise SnapshotPointerConflictError(
                f"{table_row.identifier} branch {branch!r}: pointer is not {prev}",
                table_id=table_row.table_id,
                expected=prev,
                new=sid,
            )

    recorded: list[tuple[int, str]] = []
    for sid in range(pointer + 1, latest + 1):
        if not snapshots.snapshot_exists(sid):
            # Expired while the metastore was not looking: nothing to record, but the pointer must pass it.
            with engine.begin() as conn:
                advance(conn, sid)
            continue
        snap = snapshots.snapshot(sid)
        match = rest.get(snap.uuid or "") or pending.get(snap.dedupe_key)
        with engine.begin() as conn:
            advance(conn, sid)
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
                        timeline=timeline,
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
                    branch=branch,
                )
                external = External(
                    ref=ref, snapshot_id=sid, payload=_snapshot_payload(snap), timeline=timeline
                )
                events.append(conn, external)
                recorded.append((sid, "external"))
    if recorded:
        log.info("reconciled %s (branch %s): %s", table_row.identifier, branch, recorded)
    return recorded


def _branch_pointer_or_new(
    engine: Engine, table_id: int, branch: str, snapshots: SnapshotManager
) -> tuple[int, int]:
    """``branch``'s (pointer or 0, timeline); a branch made before migration 0009 (or whose row a crash
    left out: metastore.branches B2) gets its row here, under the lock, pointing before its earliest
    snapshot on storage but one: the snapshot it was made from is not a commit on it, later ones are
    recorded by the caller (``external``)."""
    with engine.begin() as conn:
        row = branch_pointer(conn, table_id, branch)
        if row is None:
            earliest = snapshots.earliest_snapshot_id()
            row = put_branch(conn, table_id, branch, earliest)
    return row.latest_snapshot_id or 0, row.timeline


def _pending_by_key(
    events: EventLog, table_row: TableRow, exclude: uuid.UUID | None, branch: str = MAIN
) -> tuple[dict[tuple[str, int, CommitKind], PendingCommit], dict[str, PendingCommit]]:
    """The table's pending commits (but ``exclude``) as reconcile matches them to snapshots: a REST
    commit by its snapshot's uuid (a REST client reuses one (user, identifier, kind) for many commits,
    and a retry is a new commit), every other commit by its (user, identifier, kind), the oldest first."""
    pending: dict[tuple[str, int, CommitKind], PendingCommit] = {}
    rest: dict[str, PendingCommit] = {}
    for p in events.pending_commits(table_row.table_id, branch=branch):  # oldest first
        if p.prepared.ref.commit_id == exclude:
            continue
        uuid_of_rest = rest_snapshot_uuid(p.prepared.payload)
        if uuid_of_rest is not None:
            rest[uuid_of_rest] = p
        elif p.prepared.payload.get("source") != "rest":
            ref = p.prepared.ref
            pending.setdefault((ref.commit_user, ref.commit_identifier, ref.commit_kind), p)
    return pending, rest


def _finish_rollback(
    engine: Engine, row: TableRow, snapshots: SnapshotManager, pointer: int, latest: int
) -> int | None:
    """Delete, newest first, the snapshots beyond the pointer that the rollback which started the
    table's timeline removed but did not get to delete (it died); returns the latest id left. Held
    under the table lock, like the rollback itself."""
    removed = removed_identities(engine, row.table_id, row.timeline)
    if not removed:
        return latest
    for sid in range(latest, pointer, -1):
        if not snapshots.snapshot_exists(sid):
            continue
        if snapshot_identity(snapshots.snapshot(sid)) not in removed:
            break  # a snapshot of the new timeline: leftovers are only ever above it
        snapshots.file_io.delete(snapshots.snapshot_path(sid))
        log.warning("%s: deleted snapshot %s left by an interrupted rollback", row.identifier, sid)
    return snapshots.latest_snapshot_id()


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
class MetastoreSession(GuardSession):
    guard: MetastoreGuard
    ref: CommitRef
    lease: LockLease
    conn: RawConnection
    pointer: int | None = None
    timeline: int = 0  # read with the pointer; a rollback (which takes this lock) is what changes it
    # False: a branch without its pointer row yet (reconcile makes it before anything is decided).
    branch_row: bool = True
    # Snapshot holding this session's own (user, identifier, kind), from the last lookup.
    published_as: int | None = None
    held_back: list[Statement] = field(default_factory=list)
    # The partition deltas of the snapshot to publish (None: unknown; the totals become incomplete).
    statistics: list[PartitionDelta] | None = None
    fenced: bool = False
    # Group commit: the lock outlives this session (the hold releases it), unless the hold's ``more``
    # (asked when publishing) says no commit follows: then the publishing transaction releases it.
    hold: LockHold | None = None
    # Whether this session's publish keeps the lock for another commit: decided once, when it
    # publishes (None until then), by the hold's ``more``; a batch's sessions keep it (the batch
    # records them all in one transaction and the hold releases the lock).
    keeps_lock: bool | None = None
    # The record of a snapshot published while the metastore connection died: settled under the lease
    # by the lock's retrier once the session ends (see the module docstring).
    unrecorded: _DeferredRecording | None = None
    # The session ended by handing its lease to the retrier (the hold must acquire afresh).
    deferred: bool = False
    # ``latest_snapshot_id`` answered the pointer without checking storage (see there).
    unverified: bool = False

    def _keeps(self) -> bool:
        """Whether this session's publish keeps the lock for another commit (decided once)."""
        if self.keeps_lock is None:
            hold = self.hold
            self.keeps_lock = hold is not None and (hold.more is None or hold.more())
        return self.keeps_lock

    def defer_hints(self) -> bool:
        # Only when another commit of the group follows under this lock: it writes LATEST past ours.
        return self.hold is not None and self.hold.more is not None and self._keeps()

    def set_statistics(self, deltas: Sequence[PartitionDelta]) -> None:
        self.statistics = list(deltas)

    def load_pointer(self, rows: list[dict[str, Any]] | None = None) -> None:
        """Pointer and dedupe lookup in one query (read under the lock); ``rows`` if it already ran."""
        if rows is None:
            rows = run_batch(self.conn, [self.guard.pointer_query(self.ref)])[0]
        if not rows:
            raise TableNotFoundError(
                f"table {self.ref.table_identifier} is no longer registered", table_id=self.ref.table_id
            )
        row, known = rows[0], self.guard.table_row
        # The lock taken is the one of the row's name: under it the name cannot change (a rename holds
        # the old name's lock), so checking it here makes a row read before the lock (a service caches
        # rows) as good as one read under it.
        current = (row["catalog_key"], row["database_name"], row["table_name"], row["location"])
        if current != (known.catalog_key, known.database, known.name, known.location):
            raise TableRowChangedError(
                f"table {known.identifier} (id {known.table_id}) is now {row['database_name']}."
                f"{row['table_name']} at {row['location']}: read its row again",
                table_id=known.table_id,
            )
        expected = self.guard.schema_id
        if expected is not None and row.get("schema_id", expected) != expected:
            # Another replica changed the schema (under this lock) since the row was read: the commit was
            # validated and staged on the old one. Nothing is published; the caller reads the row again.
            raise TableRowChangedError(
                f"table {known.identifier} (id {known.table_id}) has schema {row['schema_id']} now, not "
                f"{expected}: read its row again",
                table_id=known.table_id,
            )
        self.pointer, self.published_as = row["pointer"], row["published"]
        self.timeline = row["timeline"]
        self.branch_row = row.get("has_branch_row", True)

    def latest_snapshot_id(self) -> int | None:
        """The latest snapshot id: the pointer, once the log is known to hold everything storage has.

        Everyone who commits through the metastore advances the pointer under this lock, so storage can
        only be ahead of it by snapshots another engine (or a crashed writer) created, and snapshots are
        contiguous: storage is ahead iff ``snapshot-(pointer+1)`` exists.

        Invariant (S3 floor): on a store whose create-if-absent is a real compare-and-set
        (``atomic_create``: S3's ``PUT If-None-Match: *``, a local ``link``), that existence check is
        not made up front; the pointer is answered as is (``storage_unverified``). It is safe because
        the only thing built on this answer is the create of ``snapshot-(pointer+1)``, which fails
        exactly when that file exists (412), i.e. exactly when the check would have found storage
        ahead. So a create that succeeds proves storage was not ahead: the log held every snapshot, and
        the dedupe lookup (I1) and the conflict check (I4) that ran against the log saw everything.
        A create that fails is a definite failure of the attempt (nothing of ours is named); the guard
        is told (``storage_may_be_ahead``) and the next session checks, reconciles (``recovered`` /
        ``external``) and redoes the lookup, exactly as before: a re-sent commit whose first send's
        snapshot is on storage unrecorded is deduplicated there, never published twice. (The check
        costs a HEAD under the lock on every commit; the 412 path costs one retry, only when another
        engine or a crashed writer left a snapshot.)

        Otherwise (no real create-if-absent, a branch without its pointer row, a session after a lost
        create): the existence check, then reconcile if storage is ahead (the log must equal storage
        before anything is decided) and the lookup redone."""
        snapshots = self.guard.snapshots
        guard = self.guard
        if self.branch_row and not guard.verify_storage and guard.trusts_create():
            self.unverified = True
            return self.pointer
        self.unverified = False
        if self.branch_row and not snapshots.snapshot_exists((self.pointer or 0) + 1):
            guard.verify_storage = False
            return self.pointer
        reconcile(
            self.guard.registry,
            self.guard.events,
            self.guard.table_row,
            snapshots,
            exclude=self.ref.commit_id,
            branch=self.guard.branch,
        )
        self.load_pointer()
        guard.verify_storage = False
        return self.pointer

    def verified_latest_snapshot_id(self) -> int | None:
        """:meth:`latest_snapshot_id` with storage checked (and reconciled) whatever the store."""
        self.guard.verify_storage = True
        return self.latest_snapshot_id()

    def storage_unverified(self) -> bool:
        return self.unverified

    def find_committed(
        self, user: str, identifier: int, kind: CommitKind, latest: Snapshot | None
    ) -> int | None:
        ref = self.ref
        if (user, identifier, kind) == (ref.commit_user, ref.commit_identifier, ref.commit_kind):
            return self.published_as
        row = self.conn.execute(
            FIND_PUBLISHED_SQL if ref.branch == MAIN else FIND_PUBLISHED_ON_BRANCH_SQL,
            {
                "table_id": ref.table_id,
                "commit_user": user,
                "commit_identifier": identifier,
                "commit_kind": kind.value,
                "branch": ref.branch,
                "timeline": self.timeline,
            },
        ).fetchone()
        return None if row is None else int(row["snapshot_id"])

    def before_publish(self) -> None:
        # Opens the publishing transaction: the lease is validated in it and the lock row stays
        # key-share locked until ``published`` commits, so nobody takes over while we publish. Where
        # the store's create-if-absent is a real compare-and-set, a publisher that then stalls longer
        # than its lease has its session ended by the server (idle_in_transaction_session_timeout), so
        # a frozen holder delays a takeover by at most one lease: that is safe because snapshot-N can
        # still be created only once (I2), and the next holder reconciles whatever it finds. Where it
        # is not, the row lock is all that protects the publish, so it is kept as long as the session.
        if self.fenced:
            # Opened with the session (group commit: see LockHold.session), the lease validated and the
            # resolution checked then; the row lock held since keeps both true.
            self.lease.check()
            return
        (resolved,) = self.lease.open_fenced_transaction(
            self.conn,
            idle_timeout_seconds=self.fence_idle_timeout(),
            also=[_RESOLVED.bind({"commit_id": self.ref.commit_id})],  # same round trip
        )
        self.fenced = True
        self.refuse_if_resolved(resolved[0] if resolved else None)

    def fence_idle_timeout(self) -> float | None:
        return _fence_idle_timeout(self.guard, self.lease)

    def refuse_if_resolved(self, row: dict[str, Any] | None) -> None:
        """I5: a commit that recovery already resolved must never publish. Recovery resolves a commit
        whose writer looked dead (prepared long ago, no live lock); a writer that was only frozen wakes up
        here. Checked inside the fenced transaction, so recovery (which takes the same lock) cannot
        resolve it between this check and our publish. ``row``: the commit's latest terminal event."""
        if row is None:
            return
        if row["snapshot_id"] is not None:
            # Recovery finished it into a snapshot: this attempt is void; the next one's dedupe finds it.
            raise LockLostError(
                f"commit {self.ref.commit_id} was finished by recovery as snapshot {row['snapshot_id']}",
                commit_id=str(self.ref.commit_id),
            )
        raise CommitFailedError(
            f"commit {self.ref.commit_id} was {row['event_type']} by recovery while this writer was stalled; "
            "it will not be published",
            commit_id=str(self.ref.commit_id),
            resolution=row["event_type"],
        )

    def record(self, event_type: str, *, attempt: int, **details: Any) -> None:
        event = self.guard.build_event(str(self.ref.commit_id), event_type, attempt=attempt, **details)
        if event is not None:
            # Held back to the session's last transaction (publish or release): one commit less each.
            self.held_back.append(commit_event_insert(event, key=f"h{len(self.held_back)}_"))

    def published(self, snapshot: Snapshot, *, attempt: int, details: dict[str, Any]) -> None:
        if not self.fenced:
            raise LockNotHeldError("published() without before_publish()")
        record, *stats = self.record_statements(snapshot, attempt=attempt, details=details)
        release: list[Statement] = []
        ahead: _Ahead | None = None
        if not self._keeps():
            self.lease.stop_heartbeat()  # a renewal racing the release would log a spurious loss
            release = [self.lease.release_statement()]
        elif self.hold is not None:
            ahead = self.hold.ahead(self.lease)  # the group's next commit, opened in this round trip
        at_record = len(self.held_back)
        statements = [
            *self.held_back,
            record,
            *stats,
            *release,
            *(ahead.prepared if ahead else ()),
            ("COMMIT", {}),
            *(ahead.opening if ahead else ()),
        ]
        try:
            results = run_batch(self.conn, statements)  # on error: rolled back; the session end releases
        except psycopg.Error as e:
            if connection_lost(e, self.conn):
                # snapshot-N is durable; its record is not (or the COMMIT's answer was lost): close()
                # hands it to the lock's retrier, to be recorded under this lease once the metastore
                # answers. (A statement's own error leaves it to the next holder's reconcile, as a
                # retry would fail the same way while the row blocks the table.)
                self.unrecorded = _DeferredRecording(
                    self.guard, [snapshot.id], [*self.held_back, record, *stats], [at_record]
                )
            raise
        self.fenced = False
        self.held_back.clear()
        if release:
            self.lease.confirm_release(bool(results[at_record + 1 + len(stats)]))
        if ahead is not None and self.hold is not None:
            self.hold.opened(ahead, results[len(results) - len(ahead.opening) :])
        self.recorded(snapshot, results[at_record])

    def _defer(self, unrecorded: _DeferredRecording) -> None:
        """Hand the lease and the unrecorded publish to the lock's retrier (module docstring)."""
        self.unrecorded = None
        self.fenced = False
        rollback_quietly(self.conn)  # the connection is broken: this closes it
        self.held_back.clear()
        self.deferred = True
        log.warning(
            "%s: snapshot %s is published but recording it failed with the metastore connection; "
            "it is recorded under the lease (token %s) once the metastore answers",
            self.ref.table_identifier,
            unrecorded.describe(),
            self.lease.fencing_token,
        )
        self.lease.release_later(settlement=unrecorded, error="recording failed")

    def record_statements(
        self, snapshot: Snapshot, *, attempt: int, details: dict[str, Any]
    ) -> list[Statement]:
        """The pointer's compare-and-set with the ``snapshot_published`` event, then the partition
        statistics (applied only if it moved the pointer to this snapshot)."""
        prev = snapshot.id - 1 if snapshot.id > 1 else None
        _, cas_params = Registry.advance_pointer_sql(self.ref.table_id, prev, snapshot.id)
        event = SnapshotPublished(
            ref=self.ref, attempt=attempt, snapshot_id=snapshot.id, payload=details, timeline=self.timeline
        )
        if self.ref.branch != MAIN:
            # The partition statistics are main's: a branch's commit leaves them as they are.
            params = {**cas_params, "branch": self.ref.branch, **commit_event_params(event, key="p_")}
            return [_BRANCH_RECORD.bind(params)]
        record = _RECORD.bind({**cas_params, **commit_event_params(event, key="p_")})
        stats = (
            []
            if self.statistics is None
            else apply_statements(self.ref.table_id, snapshot.id, self.statistics)
        )
        return [record, *stats]

    def recorded(self, snapshot: Snapshot, cas_rows: list[dict[str, Any]]) -> None:
        """After the transaction of :meth:`record_statements` committed: ``cas_rows`` is what its
        compare-and-set returned (none: the pointer was not where this snapshot expected it)."""
        if not cas_rows:
            prev = snapshot.id - 1 if snapshot.id > 1 else None
            actual = self.conn.execute(*self.guard.pointer_sql()).fetchone()
            raise SnapshotPointerConflictError(
                f"table {self.ref.table_identifier}: pointer is "
                f"{None if actual is None else actual['latest_snapshot_id']}, expected {prev}",
                table_id=self.ref.table_id,
                expected=prev,
                actual=None if actual is None else actual["latest_snapshot_id"],
                new=snapshot.id,
            )
        self.pointer = snapshot.id

    def close(self) -> None:
        """End the session: roll back an unpublished publishing transaction, then release the lock
        with the held-back events (one transaction), unless ``published`` already did. A publish whose
        recording failed with the connection goes, with the lease, to the lock's retrier instead."""
        if self.unrecorded is not None:
            self._defer(self.unrecorded)
            return
        if self.fenced:
            rollback_quietly(self.conn)
            self.fenced = False
        if self.lease.released:
            return
        if self.hold is not None:
            if self.held_back:
                run_batch(self.conn, [("BEGIN", {}), *self.held_back, ("COMMIT", {})])
                self.held_back.clear()
            return
        self.lease.stop_heartbeat()
        try:
            results = run_batch(
                self.conn, [("BEGIN", {}), *self.held_back, self.lease.release_statement(), ("COMMIT", {})]
            )
        except psycopg.Error:
            log.warning("releasing %s on the session connection failed; retrying", self.lease.lock_id)
            try:
                self.lease.release()  # a fresh connection; the held-back audit events are lost
            except Exception:
                # Never mask the session's own outcome. A connection failure is retried in the
                # background until the metastore answers (at most until the lease ends).
                log.warning(
                    "releasing %s failed; retrying in the background", self.lease.lock_id, exc_info=True
                )
        else:
            self.lease.confirm_release(bool(results[-2]))
        self.held_back.clear()


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
    # The service principal the commits are made for (recorded on every commit and lock event).
    principal: str | None = None
    _refs: dict[str, CommitRef] = field(default_factory=dict)
    _started: dict[str, float] = field(default_factory=dict)
    # Prepared events not sent yet: they travel with the first lock attempt of the commit.
    _unsent: dict[str, CommitEvent] = field(default_factory=dict)
    # Group commit: while set, sessions take (or reuse) the hold's lease instead of their own.
    hold: LockHold | None = None
    # The branch committed to (migration 0009): ``snapshots`` is its manager, its pointer is its row of
    # paimon_table_branches (main: paimon_tables'), its events carry it; the lock stays the table's.
    branch: str = MAIN
    # Set when a create of snapshot-N lost after an unverified latest id (MetastoreSession.
    # latest_snapshot_id): the next session checks storage before anything is decided.
    verify_storage: bool = False
    # The registry schema id the commits' table object was chosen by, when it may be behind the registry
    # (a service's cached row, ``ServiceState.commit_table``): checked under the lock (``load_pointer``).
    # None: not checked (the table object was read for this commit).
    schema_id: int | None = None

    def trusts_create(self) -> bool:
        """Whether the store's create-if-absent is a real compare-and-set (then a session need not
        check storage before staging: see ``MetastoreSession.latest_snapshot_id``)."""
        return self.snapshots.file_io.capabilities.atomic_create

    def storage_may_be_ahead(self) -> None:
        self.verify_storage = True

    def after_release(self, action: Callable[[], None], *, key: str | None = None) -> None:
        if self.hold is not None:
            self.hold.after_release(action, key=key)
        else:
            action()

    def pointer_sql(self) -> tuple[str, dict[str, Any]]:
        """The committed-to branch's pointer (column ``latest_snapshot_id``; no row: none)."""
        if self.branch == MAIN:
            return POINTER_SQL, {"table_id": self.table_row.table_id}
        return BRANCH_POINTER_SQL, {"table_id": self.table_row.table_id, "branch": self.branch}

    def pointer_query(self, ref: CommitRef) -> Statement:
        """The pointer and the dedupe lookup of ``ref``'s (user, identifier, kind), as one query."""
        if ref.branch != MAIN:
            return _BRANCH_POINTER_AND_PUBLISHED.bind(
                {
                    "table_id": ref.table_id,
                    "branch": ref.branch,
                    "commit_user": ref.commit_user,
                    "commit_identifier": ref.commit_identifier,
                    "commit_kind": ref.commit_kind.value,
                },
            )
        return _POINTER_AND_PUBLISHED.bind(
            {
                "table_id": ref.table_id,
                "commit_user": ref.commit_user,
                "commit_identifier": ref.commit_identifier,
                "commit_kind": ref.commit_kind.value,
            },
        )

    def _write(self, *events: CommitEvent) -> None:
        """Best effort: audit events outside a session (``retried``, ``failed``) must not turn the
        commit's own outcome into a metastore error; a lost ``failed`` leaves the commit pending for
        recovery, which resolves it from storage."""
        statements = [commit_event_insert(e, key=f"e{i}_") for i, e in enumerate(events)]
        try:
            with self.lock.connection() as conn:
                run_batch(conn, [("BEGIN", {}), *statements, ("COMMIT", {})])
        except _METASTORE_FAILURES:
            log.warning("could not record %s", [e.event_type.value for e in events], exc_info=True)
        except psycopg.errors.CheckViolation as err:
            if (missing := partition_missing(err)) is None:
                raise
            log.warning("could not record %s: %s", [e.event_type.value for e in events], missing)

    def prepared(self, record: CommitRecord) -> None:
        ref = CommitRef(
            uuid.UUID(record.commit_id),
            self.table_row.table_id,
            self.table_row.identifier,
            record.commit_user,
            record.commit_identifier,
            record.kind,
            self.principal,
            self.branch,
        )
        self._refs[record.commit_id] = ref
        self._started[record.commit_id] = time.monotonic()
        self._unsent[record.commit_id] = Prepared.of(
            ref=ref,
            messages=record.messages,
            messages_version=record.messages_version,
            payload=dict(record.counts)
            if record.overwrite is None
            else {**record.counts, "overwrite": record.overwrite},
        )

    def prepared_snapshot(self, ref: CommitRef, event: CommitEvent) -> None:
        """Like :meth:`prepared` for a commit whose ``prepared`` event is built by the caller (a REST
        commit's :class:`PreparedSnapshot`); ``ref`` must carry this guard's table and principal."""
        self._refs[str(ref.commit_id)] = ref
        self._started[str(ref.commit_id)] = time.monotonic()
        self._unsent[str(ref.commit_id)] = event

    def ref(self, commit_id: str) -> CommitRef:
        """The commit ``commit_id`` as announced to this guard (:meth:`prepared`); KeyError if it is
        unknown or finished."""
        return self._refs[commit_id]

    def knows(self, commit_id: str) -> bool:
        """Whether ``commit_id`` was announced to this guard and has not finished."""
        return commit_id in self._refs

    def prepared_statements(self, commit_id: str) -> list[Statement]:
        """The statements that write ``commit_id``'s ``prepared`` event if it was not sent yet (and set
        the connection's principal), to run in a transaction before its lock is used to publish; once
        that transaction committed, call :meth:`prepared_sent`.

        Keeps step 3's invariant: the ``prepared`` event is durable before anything of the commit can be
        published (recovery can finish or abort it from there)."""
        # The prepared event commits in the first lock attempt's transaction (with the lock row, or
        # alone when the lock is busy), or in a held lock's opening round trip. It stays unsent until
        # that transaction committed (acquired, or timed out waiting), so a commit that fails before
        # (metastore down) writes it with its ``failed`` event, or the retry sends it.
        event = self._unsent.get(commit_id)
        # The connection is pooled: always (re)set whose lock events it writes.
        principal = (PRINCIPAL_SETTING_SQL, {"principal": self.principal or ""})
        return [principal] if event is None else [principal, commit_event_insert(event, key="prep_")]

    def prepared_sent(self, commit_id: str) -> None:
        """The transaction carrying :meth:`prepared_statements` of ``commit_id`` committed: its
        ``prepared`` event is durable and is never sent again."""
        self._unsent.pop(commit_id, None)

    def acquire_for(
        self,
        conn: RawConnection,
        commit_id: str,
        *,
        owner: str,
        timeout_seconds: float | None = None,
        on_waiting: Callable[[], None] | None = None,
    ) -> tuple[LockLease, list[dict[str, Any]]]:
        """Acquire the table lock on ``conn`` for ``commit_id``: its prepared event (if not sent yet)
        travels with the first attempt, its pointer and dedupe lookup with the acquiring one. Returns
        the lease and the pointer rows. The prepared event is forgotten only once it committed (the
        first attempt committed, or the acquire timed out after it): after any other failure the
        retry sends it again. ``on_waiting``: called once that first attempt committed (from then on
        the commit is waiting for the lock). ``timeout_seconds``: instead of the settings' timeout."""

        def first_committed() -> None:
            # A wait that then dies with its connection (a restart) must not make the retry write the
            # prepared event a second time.
            self.prepared_sent(commit_id)
            if on_waiting is not None:
                on_waiting()

        timeout = self.settings.acquire_timeout_seconds if timeout_seconds is None else timeout_seconds
        try:
            lease, after = self.lock.acquire_on(
                conn,
                self.lock_id,
                owner=owner,
                lease_seconds=self.settings.lease_seconds,
                timeout_seconds=timeout,
                first=self.prepared_statements(commit_id),
                after=[self.pointer_query(self._refs[commit_id])],
                first_committed=first_committed,
            )
        except LockTimeoutError:
            self.prepared_sent(commit_id)  # committed by the first attempt
            raise
        self.prepared_sent(commit_id)
        return lease, after[0]

    def acquire_through_outages(
        self,
        commit_id: str,
        *,
        owner: str,
        connect: Callable[[], RawConnection],
        discard: Callable[[], None],
    ) -> tuple[RawConnection, LockLease, list[dict[str, Any]]]:
        """:meth:`acquire_for` on a connection from ``connect``. If the connection dies while the commit
        waits for the lock (its first attempt committed: a metastore restart), the wait goes on: the
        dead connection is dropped (``discard``) and a fresh one is asked for, with capped exponential
        backoff and jitter while the metastore refuses, until the acquire timeout. The writers queued
        on a table thus take the lock as soon as the metastore is back (its holder's release arrives by
        NOTIFY or a poll), instead of after the coordinator's retry backoff. A failure before the wait
        began (the metastore down when the commit arrives) is raised at once, as before.

        Returns (connection, lease, pointer rows)."""
        deadline = time.monotonic() + self.settings.acquire_timeout_seconds
        delay = _RECONNECT_START_SECONDS
        waiting = False

        def began() -> None:
            nonlocal waiting
            waiting = True

        while True:
            conn: RawConnection | None = None
            try:
                conn = connect()
                remaining = max(0.0, deadline - time.monotonic())
                lease, rows = self.acquire_for(
                    conn, commit_id, owner=owner, timeout_seconds=remaining, on_waiting=began
                )
                return conn, lease, rows
            except psycopg.Error as e:
                discard()
                if not waiting or not connection_lost(e, conn) or time.monotonic() + delay >= deadline:
                    raise
                log.info(
                    "lock %s: the connection died while waiting (%s); waiting on a fresh one", self.lock_id, e
                )
            time.sleep(delay * (0.5 + 0.5 * random.random()))  # equal jitter
            delay = min(_RECONNECT_CAP_SECONDS, delay * 2)

    @contextmanager
    def session(self, commit_id: str, attempt: int) -> Iterator[MetastoreSession]:
        if self.hold is not None:
            with self.hold.session(self, commit_id) as held:
                yield held
            return
        ref = self._refs[commit_id]
        # One connection for the whole hold. Any metastore failure until the snapshot is created
        # fails the attempt definitely (LockLostError); later ones never reach here (the coordinator
        # treats a failure to record a durable snapshot as success).
        connections = ExitStack()  # the session's connection (and any that died while waiting)
        with _metastore_step("holding the lock", self.lock_id), connections:
            waited = time.monotonic()
            conn, lease, rows = self.acquire_through_outages(
                commit_id,
                owner=self.owner,
                connect=lambda: connections.enter_context(self.lock.connection()),
                discard=connections.close,
            )
            session = MetastoreSession(self, ref, lease, conn)
            try:
                log.debug("lock %s acquired in %.1f ms", self.lock_id, (time.monotonic() - waited) * 1000)
                session.load_pointer(rows)
                yield session
            finally:
                session.close()

    def build_event(
        self, commit_id: str, event_type: str, *, attempt: int, **details: Any
    ) -> CommitEvent | None:
        """The log event for a coordinator report (``conflict_checked``, ``retried``, ``deduplicated``);
        None for a commit this guard does not know."""
        ref = self._refs.get(commit_id)
        if ref is None:
            return None
        duration = details.pop("duration_ms", None)
        if event_type == "conflict_checked":
            conflict = details.pop("outcome", "ok") == "conflict"
            reason = details.pop("reason", None)
            return ConflictChecked(
                ref=ref,
                attempt=attempt,
                duration_ms=duration,
                conflict=conflict,
                base_snapshot_id=details.pop("base_snapshot_id", None),
                reason=reason,
                payload=details,
            )
        if event_type == "retried":
            return Retried(
                ref=ref,
                attempt=attempt,
                reason=str(details.pop("reason", "")),
                wait_ms=float(details.pop("wait_ms", 0.0)),
                payload=details,
            )
        if event_type == "deduplicated":
            return Aborted(
                ref=ref,
                attempt=attempt,
                reason=f"deduplicated: already committed as snapshot {details.get('snapshot_id')}",
                payload=details,
            )
        raise ValueError(f"unknown event type {event_type!r}")

    def event(self, commit_id: str, event_type: str, *, attempt: int, **details: Any) -> None:
        event = self.build_event(commit_id, event_type, attempt=attempt, **details)
        if event is not None:
            self._write(event)

    def finished(self, commit_id: str, *, outcome: str, **details: Any) -> None:
        ref = self._refs.pop(commit_id, None)
        started = self._started.pop(commit_id, None)
        # Never sent: the commit failed before asking for the lock (e.g. writing its manifests).
        unsent = self._unsent.pop(commit_id, None)
        if ref is None or outcome != "failed":
            # published: its event is written; deduplicated: ``aborted`` is written; unknown: stays pending
            # on purpose, for recovery to resolve by reading storage.
            return
        duration = None if started is None else (time.monotonic() - started) * 1000
        failed = Failed(
            ref=ref,
            duration_ms=duration,
            reason=str(details.get("reason", "")),
            error_type=details.get("error"),
        )
        self._write(*([unsent] if unsent is not None else []), failed)


@dataclass(slots=True)
class _Ahead:
    """The opening round trip of a group's next session, sent with the publish of the one before:
    ``prepared`` (committed with that publish) and ``opening`` (after it); ``rows``: the opening's
    results once that round trip ran."""

    guard: MetastoreGuard
    commit_id: str
    prepared: list[Statement]
    opening: list[Statement]
    fence_count: int
    rows: list[list[dict[str, Any]]] | None = None


def _fence_idle_timeout(guard: MetastoreGuard, lease: LockLease) -> float | None:
    atomic = guard.snapshots.file_io.capabilities.atomic_create
    return float(lease.lease_seconds) if atomic else None


@dataclass(slots=True)
class _DeferredRecording:
    """The record of snapshots published while the metastore connection died (module docstring): a
    :class:`~paimon_meta.metastore.deferred.Settlement` run by the lock's retrier once the metastore
    answers, in the transaction that validated the lease and then releases it.

    ``statements``: the held-back events, each snapshot's pointer compare-and-set with its
    ``snapshot_published`` event (at the indexes ``record_at``) and statistics, in order, exactly as the
    failed transaction had them (no COMMIT). ``snapshot_ids``: contiguous, in order."""

    guard: MetastoreGuard
    snapshot_ids: list[int]
    statements: list[Statement]
    record_at: list[int]
    # What statements() found: "redo" (pointer at the first snapshot's parent), "done" (at the last:
    # the failed COMMIT had committed) or "moved" (neither).
    found: str = ""

    def describe(self) -> str:
        ids = self.snapshot_ids
        return str(ids[0]) if len(ids) == 1 else f"{ids[0]}..{ids[-1]}"

    def statements_in(self, conn: RawConnection) -> list[Statement]:
        """In the retrier's transaction, the lease validated: what to commit with the release."""
        rows = run_batch(conn, [self.guard.pointer_sql()])[0]
        pointer = rows[0]["latest_snapshot_id"] if rows else None
        first, last = self.snapshot_ids[0], self.snapshot_ids[-1]
        if pointer == (first - 1 if first > 1 else None):
            self.found = "redo"
            return list(self.statements)
        self.found = "done" if pointer is not None and pointer >= last else "moved"
        return []

    def finished(self, outcome: ReleaseOutcome, results: list[list[dict[str, Any]]] | None) -> str:
        """Once the retrier is done: log what became of the record; hand it to recovery at once if it
        could not be made under the lease. Returns ``recorded``, ``already_recorded``, ``reconciled``,
        ``left_to_holder`` or ``left_to_recovery`` (the metric's label)."""
        table = self.guard.table_row.identifier
        what = f"snapshot {self.describe()} of {table}"
        if outcome is ReleaseOutcome.RELEASED and self.found == "redo" and results is not None:
            if all(results[i] for i in self.record_at):
                log.info(
                    "%s: deferred recording finished (recorded under the lease after reconnecting)", what
                )
                return "recorded"
        elif outcome is ReleaseOutcome.RELEASED and self.found == "done":
            log.info("%s: deferred recording finished (the failed transaction had committed it)", what)
            return "already_recorded"
        if outcome is ReleaseOutcome.CLOSED:
            log.warning(
                "%s: deferred recording handed over: the lock closed first; the table's next lock holder "
                "or `paimon-meta recover` records it",
                what,
            )
            return "left_to_recovery"
        return self._hand_over(what)

    def _hand_over(self, what: str) -> str:
        """Recovery at once: take the lock if it is free and reconcile storage into the log."""
        guard = self.guard
        try:
            lease = guard.lock.try_acquire(
                guard.lock_id, owner=guard.owner, lease_seconds=guard.settings.lease_seconds, heartbeat=False
            )
        except Exception as e:
            log.warning(
                "%s: deferred recording handed over: the lease was lost and the metastore is unreachable "
                "(%s); the table's next lock holder or `paimon-meta recover` records it",
                what,
                e,
            )
            return "left_to_recovery"
        if lease is None:
            log.info(
                "%s: deferred recording handed over to the lock's current holder (it records snapshots "
                "beyond the pointer when it starts)",
                what,
            )
            return "left_to_holder"
        try:
            with lease:
                recorded = reconcile(
                    guard.registry, guard.events, guard.table_row, guard.snapshots, branch=guard.branch
                )
        except Exception:
            log.warning(
                "%s: deferred recording handed over: reconciling failed; the table's next lock holder or "
                "`paimon-meta recover` records it",
                what,
                exc_info=True,
            )
            return "left_to_recovery"
        log.info("%s: deferred recording handed over to recovery, which recorded %s", what, recorded)
        return "reconciled"


class LockHold:
    """One table lock held across the consecutive commits of a group (group commit).

    Used by one thread. Set it as ``guard.hold`` of each commit's :class:`MetastoreGuard` (all guards of
    the same table and lock id) while that commit runs; :meth:`release` once the group is over. The
    lease is taken by the first session and kept (heartbeat running) until :meth:`release`, or dropped
    (released on a fresh connection, or left to expire) after a session failed in a way that may leave
    the connection or the lease in doubt: the next session then acquires again, like a new holder.
    """

    def __init__(
        self,
        lock: MetastoreLock,
        lock_id: str,
        *,
        owner: str,
        settings: LockSettings,
        more: Callable[[], bool] | None = None,
        follow: Callable[[], tuple[MetastoreGuard, str] | None] | None = None,
    ) -> None:
        self.lock = lock
        # Asked when a commit publishes: False when no commit of the group follows, so that commit's
        # publishing transaction releases the lock (one round trip less than releasing afterwards).
        self.more = more
        # Asked when ``more`` said yes: the guard and commit id of the commit that runs next under this
        # hold (its ``prepared`` record handed to the guard), if known: its session's opening round trip
        # then rides on this publish (see :meth:`ahead`).
        self.follow = follow
        self._ahead: _Ahead | None = None
        self.lock_id = lock_id
        self.owner = owner
        self.settings = settings
        self.lease: LockLease | None = None
        self._conn: RawConnection | None = None
        self._conn_cm: Any = None
        self.acquisitions = 0
        self.sessions = 0
        # Run once the hold releases the lock (MetastoreGuard.after_release); keyed: only the last.
        self._after: list[Callable[[], None]] = []
        self._after_keyed: dict[str, Callable[[], None]] = {}

    def after_release(self, action: Callable[[], None], *, key: str | None = None) -> None:
        """Run ``action`` when this hold ends (:meth:`release`), after the lock is released; of the
        actions with one ``key``, only the last given (the group's LATEST hint: its newest snapshot)."""
        if key is None:
            self._after.append(action)
        else:
            self._after_keyed[key] = action

    def _run_after(self) -> None:
        actions = [*self._after, *self._after_keyed.values()]
        self._after, self._after_keyed = [], {}
        try:
            run_together(actions)  # independent: one round trip on S3 for all
        except Exception:  # hints and clean-up only: never a commit's outcome
            log.warning("an action after releasing %s failed", self.lock_id, exc_info=True)

    @property
    def held(self) -> bool:
        return self.lease is not None and not self.lease.released and not self.lease.lost

    def _connection(self) -> RawConnection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._close_connection()
            self._conn_cm = self.lock.connection()
            self._conn = self._conn_cm.__enter__()
        assert self._conn is not None
        return self._conn

    def _close_connection(self) -> None:
        cm, self._conn_cm, self._conn = self._conn_cm, None, None
        if cm is not None:
            try:
                cm.__exit__(None, None, None)
            except Exception:  # giving a broken connection back must not mask anything
                log.debug("returning the group's connection failed", exc_info=True)

    def _opening(self, guard: MetastoreGuard, commit_id: str, lease: LockLease) -> _Ahead:
        """A held session's opening: the prepared event (to commit: durable before anything of the
        commit can publish), then the pointer with the commit's dedupe lookup, and the publishing
        transaction opened with the lease validated in it (step 4's fencing, done before staging
        instead of after: the row lock then held until the record commits keeps it valid, as it does
        between the two otherwise) and the commit's resolution (I5) read in it."""
        ref = guard.ref(commit_id)
        fence = lease.fenced_statements(idle_timeout_seconds=_fence_idle_timeout(guard, lease))
        opening = [guard.pointer_query(ref), *fence, _RESOLVED.bind({"commit_id": ref.commit_id})]
        return _Ahead(guard, commit_id, guard.prepared_statements(commit_id), opening, len(fence))

    def ahead(self, lease: LockLease) -> _Ahead | None:
        """Asked by a publishing session that keeps the lock: the next commit's opening, to send in its
        round trip (its prepared event before the COMMIT, the rest after), or None."""
        nxt = None if self.follow is None else self.follow()
        if nxt is None or lease is not self.lease:
            return None
        guard, commit_id = nxt
        if guard.lock_id != self.lock_id or not guard.knows(commit_id):
            return None
        return self._opening(guard, commit_id, lease)

    def opened(self, ahead: _Ahead, rows: list[list[dict[str, Any]]]) -> None:
        """The round trip carrying ``ahead`` committed: its prepared event is durable, and the
        connection is in the next session's publishing transaction."""
        ahead.guard.prepared_sent(ahead.commit_id)
        ahead.rows = rows
        self._ahead = ahead

    def _take_ahead(self, guard: MetastoreGuard | None, commit_id: str) -> _Ahead | None:
        """The opening already sent for this session, if it is the one it was sent for; any other
        (the next session is not the one announced) has its transaction rolled back."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        if ahead.guard is guard and ahead.commit_id == commit_id and self.held and self._conn is not None:
            return ahead
        if self._conn is not None:
            rollback_quietly(self._conn)
        return None

    @contextmanager
    def session(self, guard: MetastoreGuard, commit_id: str) -> Iterator[MetastoreSession]:
        if guard.lock_id != self.lock_id:
            raise ValueError(f"hold of {self.lock_id!r} used for {guard.lock_id!r}")
        ref = guard.ref(commit_id)
        with _metastore_step("holding the lock", self.lock_id):
            ahead = self._take_ahead(guard, commit_id)
            conn = self._connection()
            if not self.held:
                self._drop()
                conn, lease, rows = guard.acquire_through_outages(
                    commit_id, owner=self.owner, connect=self._connection, discard=self._close_connection
                )
                self.lease = lease
                self.acquisitions += 1
                session = MetastoreSession(guard, ref, lease, conn, hold=self)
                resolved = None
            else:
                # The lock is ours already: the opening round trip (see _opening), unless it was sent
                # with the previous commit's publish.
                held = self.lease
                assert held is not None
                session = MetastoreSession(guard, ref, held, conn, hold=self)
                try:
                    held.check()
                    if ahead is not None and ahead.rows is not None:
                        opened = ahead.rows
                    else:
                        ahead = self._opening(guard, commit_id, held)
                        results = run_batch(
                            conn, [("BEGIN", {}), *ahead.prepared, ("COMMIT", {}), *ahead.opening]
                        )
                        guard.prepared_sent(commit_id)
                        opened = results[2 + len(ahead.prepared) :]
                    rows = opened[0]
                    held.check_fenced(conn, opened[1 : 1 + ahead.fence_count])
                except BaseException:
                    self._drop()  # lease lost, or the connection in doubt: the retry acquires afresh
                    raise
                session.fenced = True
                resolved = opened[-1][0] if opened[-1] else None
            self.sessions += 1
            try:
                session.load_pointer(rows)
                session.refuse_if_resolved(resolved)
                yield session
            except BaseException as e:
                # A conflict ends the session as planned; anything else may have lost the lease or left
                # the connection in doubt, and a fresh acquire is cheap next to a doubt.
                self._end(session, keep=isinstance(e, CommitConflictError))
                raise
            self._end(session, keep=True)

    def open_batch(self, entries: Sequence[tuple[MetastoreGuard, str]]) -> list[MetastoreSession | Exception]:
        """Batch commit (see ``commit.group``): open a session for each ``(guard, commit_id)`` under the
        lock this hold has, in one round trip: every commit's ``prepared`` event (committed first:
        durable before anything of theirs can publish), each one's pointer and dedupe lookup, the
        publishing transaction opened with the lease validated in it (one fencing for all: the row
        stays key-share locked until :meth:`record_batch` commits), and each one's resolution (I5),
        read in it. An entry whose row changed, whose table is gone or that recovery resolved gets
        its exception instead of a session (nothing of it is staged).

        Raises (the lock dropped: lease lost, the connection in doubt) when nothing could be opened."""
        held = self.lease
        if not self.held or held is None:
            raise LockNotHeldError(f"batch of {self.lock_id!r} without the lock held")
        self._take_ahead(None, "")  # an opening sent for a single commit is not this batch's
        conn = self._connection()
        try:
            held.check()
            guard0 = entries[0][0]
            refs = [guard.ref(commit_id) for guard, commit_id in entries]
            prepared = [stmt for guard, commit_id in entries for stmt in guard.prepared_statements(commit_id)]
            lookups = [guard.pointer_query(ref) for (guard, _), ref in zip(entries, refs, strict=True)]
            fence = held.fenced_statements(idle_timeout_seconds=_fence_idle_timeout(guard0, held))
            resolutions = [_RESOLVED.bind({"commit_id": ref.commit_id}) for ref in refs]
            results = run_batch(
                conn, [("BEGIN", {}), *prepared, ("COMMIT", {}), *lookups, *fence, *resolutions]
            )
            for guard, commit_id in entries:
                guard.prepared_sent(commit_id)
            at = 2 + len(prepared)
            rows = results[at : at + len(lookups)]
            held.check_fenced(conn, results[at + len(lookups) : at + len(lookups) + len(fence)])
            resolved = results[at + len(lookups) + len(fence) :]
        except BaseException:
            self._drop()
            raise
        sessions: list[MetastoreSession | Exception] = []
        for (guard, _), ref, pointer_rows, resolution in zip(entries, refs, rows, resolved, strict=True):
            session = MetastoreSession(guard, ref, held, conn, hold=self, fenced=True, keeps_lock=True)
            try:
                session.load_pointer(pointer_rows)
                session.refuse_if_resolved(resolution[0] if resolution else None)
            except Exception as e:
                session.fenced = False  # the transaction is the batch's: not this session's to end
                sessions.append(e)
                continue
            sessions.append(session)
        self.sessions += len(entries)
        return sessions

    def record_batch(
        self,
        published: Sequence[tuple[MetastoreSession, Snapshot, int, dict[str, Any]]],
        others: Sequence[MetastoreSession],
    ) -> None:
        """Commit the batch's publishing transaction: every session's held-back events and, for each
        ``(session, snapshot, attempt, details)`` in order, its pointer compare-and-set, event and
        statistics. ``others``: the sessions that publish nothing (deduplicated, conflicting).
        Raises ``SnapshotPointerConflictError`` for the first snapshot whose compare-and-set failed
        (the batch's snapshots are durable whatever the log says: recovery records them)."""
        statements: list[Statement] = []
        for session in others:
            statements += session.held_back
        at: list[int] = []
        for session, snapshot, attempt, details in published:
            statements += session.held_back
            at.append(len(statements))
            statements += session.record_statements(snapshot, attempt=attempt, details=details)
        conn = self._connection()
        try:
            results = run_batch(conn, [*statements, ("COMMIT", {})])
        except psycopg.Error as e:
            if published and self.lease is not None and connection_lost(e, conn):
                # The snapshots are durable, their records not: recorded under this lease by the
                # lock's retrier once the metastore answers (module docstring); the hold starts afresh.
                unrecorded = _DeferredRecording(
                    published[0][0].guard, [entry[1].id for entry in published], statements, at
                )
                lease, self.lease = self.lease, None
                self._ahead = None
                self._close_connection()
                log.warning(
                    "%s: batch of snapshots %s is published but recording it failed with the metastore "
                    "connection; it is recorded under the lease (token %s) once the metastore answers",
                    self.lock_id,
                    unrecorded.describe(),
                    lease.fencing_token,
                )
                lease.release_later(settlement=unrecorded, error=e)
            raise
        finally:
            for session in (*others, *(entry[0] for entry in published)):
                session.fenced = False
                session.held_back.clear()
        for (session, snapshot, _, _), index in zip(published, at, strict=True):
            session.recorded(snapshot, results[index])

    def lease_check(self) -> None:
        """Raise ``LockLostError`` unless the lease is still ours (fencing, before publishing)."""
        if self.lease is None:
            raise LockNotHeldError(f"{self.lock_id!r} is not held")
        self.lease.check()

    def abandon(self) -> None:
        """Give the lock up after a failure in doubt (an open transaction is rolled back first); the
        next session acquires it again."""
        self._drop()

    def _end(self, session: MetastoreSession, *, keep: bool) -> None:
        try:
            session.close()
        except Exception:
            log.warning("ending a group session of %s failed", self.lock_id, exc_info=True)
            keep = False
        if not keep or session.deferred:  # deferred: the lease went to the lock's retrier
            self._drop()

    def _drop(self) -> None:
        self._ahead = None
        if self._conn is not None:
            # A publishing transaction left open (an opening sent ahead) holds the lock row: end it
            # before the release below, on another connection, waits for that row.
            rollback_quietly(self._conn)
        lease, self.lease = self.lease, None
        if lease is not None and not lease.released:
            try:
                lease.release()  # a fresh connection of the pool
            except Exception:
                # A connection failure is retried in the background until the metastore answers.
                log.warning("releasing %s failed; retrying in the background", self.lock_id, exc_info=True)
        self._close_connection()

    def release(self) -> None:
        """End the group: release the lock (with its ``released`` event and NOTIFY) on the group's
        connection, and give the connection back."""
        try:
            self._release()
        finally:
            self._run_after()

    def _release(self) -> None:
        lease = self.lease
        if lease is None or lease.released:
            self._close_connection()
            self.lease = None
            return
        lease.stop_heartbeat()
        try:
            conn = self._connection()
            if self._ahead is not None:  # opened for a commit that did not come (a bound ended the hold)
                self._ahead = None
                rollback_quietly(conn)
            results = run_batch(conn, [lease.release_statement()])
            lease.confirm_release(bool(results[0]))
        except Exception:
            log.warning("releasing %s on the group's connection failed; retrying", self.lock_id)
            self._drop()
            return
        self.lease = None
        self._close_connection()
