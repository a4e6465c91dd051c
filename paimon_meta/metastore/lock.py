"""The metastore lock: Java Paimon's JDBC lock row, plus leases, heartbeats, fencing and fast hand-off.

One row of ``paimon_distributed_locks`` per held lock, keyed like Java's ``JdbcCatalogLock``
(``<catalog-key>.<database>.<table>``), so Java writers and we exclude each other:

* acquire = Java's delete-if-expired (``EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)) >
  expire_time_seconds``), then ``INSERT ... ON CONFLICT DO NOTHING``, in one statement with the lock
  events, one round trip per attempt; a row Java inserted (no owner, no token) blocks us until Java
  deletes it or it expires, and our row makes Java's plain INSERT fail. ``expire_time_seconds`` is our
  lease, so Java's own expiry arithmetic applies to our rows;
* one heartbeat thread per :class:`MetastoreLock` refreshes each lease's ``acquired_at`` every lease/3
  with an owner+token-checked UPDATE, so a live holder never looks expired to anyone, Java included;
* every lease carries a fencing token from a Postgres sequence, drawn while holding a per-lock
  transaction-scoped advisory lock that all our acquirers of that lock take, so tokens of successive
  holders of a lock strictly increase;
* :meth:`LockLease.validate_in_txn` / :meth:`LockLease.open_fenced_transaction` re-read the row
  ``FOR KEY SHARE`` inside the publishing transaction: they fail if the row is gone, someone else's,
  or expired, and once they pass nobody can delete the row (take over) until that transaction ends,
  while the heartbeat's non-key UPDATE still proceeds. A holder frozen past its lease therefore cannot
  publish;
* release = owner+token-checked DELETE plus ``pg_notify`` (and its event) in one statement; waiters
  LISTEN on a per-lock channel and retry at once, and poll (bounded interval, or until the holder's
  expiry) for Java holders, which never notify. :meth:`LockLease.release_statement` lets a caller
  release inside its own transaction (the commit path releases in the transaction that records the
  published snapshot);
* a release that fails because the metastore is unreachable is retried by the holder in the background
  (:mod:`paimon_meta.metastore.deferred`) once it answers again, owner- and token-checked as ever, until
  it succeeds, the row turns out gone or someone else's, or the lease ends: a live holder's row never
  blocks the table for the rest of its lease because Postgres restarted.

Every acquire, release, expiry takeover, forced release and detected loss is appended to
``paimon_lock_events`` in the transaction that made it happen.

The hot statements (acquire, validate, release) run on plain autocommit psycopg connections from a
:class:`~paimon_meta.db.pool.SessionPool`, several statements per round trip
(:func:`~paimon_meta.db.pool.run_batch`), with explicit transactions, the heavier ones planned once per
connection (:class:`~paimon_meta.db.pool.ServerStatement`): the commit path calls them once per commit,
and a pooled SQLAlchemy checkout plus its ping per statement cost more than the statements themselves.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, Row

from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.db.notify import Listener, ListenerPool, channel_for
from paimon_meta.db.pool import (
    RawConnection,
    ServerStatement,
    SessionPool,
    Statement,
    rollback_quietly,
    run_batch,
)
from paimon_meta.errors import LockLostError, LockNotHeldError, LockTimeoutError, ValidationError
from paimon_meta.metastore.deferred import (
    CONNECTION_FAILURES,
    DeferredReleases,
    Observer,
    ReleaseOutcome,
    Settlement,
    connection_lost,
)
from paimon_meta.metastore.events import EventLog, LockEvent, LockEventType, partition_missing

_log = logging.getLogger(__name__)

#: Java's default ``catalog-key`` (JdbcCatalogOptions.CATALOG_KEY).
DEFAULT_CATALOG_KEY = "jdbc"
#: Java's lock_id column width (JdbcCatalogOptions.LOCK_KEY_MAX_LENGTH default).
MAX_LOCK_ID_LENGTH = 255
#: Prefix of the per-lock NOTIFY channel.
CHANNEL_PREFIX = "paimon_lock"

_LOCK_NOT_AVAILABLE = "55P03"


# Our acquiring transactions of one lock id take this transaction-scoped advisory lock first (class
# key below, hash of the lock id; a collision only serialises two locks' acquirers). So among our
# acquirers of a lock, drawing a fencing token and inserting the row happen in the same order, and a
# token drawn before the INSERT can never be smaller than an earlier holder's: tokens of successive
# holders strictly increase. Java's acquirers do not take it, and draw no tokens.
_ADVISORY_CLASS = 0x50414D  # "PAM"
_SERIALISE_ACQUIRERS = "SELECT pg_advisory_xact_lock(%(class)s, hashtext(%(lock_id)s))"
# One statement: delete the row if expired (Java's predicate, verbatim:
# PostgresqlDistributedLockDialect.getTryReleaseTimedOutLock), insert ours with a fresh token, and log
# the takeover and the acquisition (in that order: the lock log is read in event order). The INSERT
# reads the DELETE's output (count(*)), so the DELETE runs to completion first, and a row deleted by
# this same statement is no conflict for the INSERT; after deleting an expired row the INSERT cannot
# lose (another inserter would wait for our transaction). Not inserted (the row is someone's): nothing
# changes but the token drawn, which is simply never used.
_ACQUIRE = (
    "WITH expired AS ("
    " DELETE FROM paimon_distributed_locks"
    " WHERE EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)) > expire_time_seconds AND lock_id = %(lock_id)s"
    " RETURNING owner, fencing_token, expire_time_seconds,"
    " EXTRACT(EPOCH FROM AGE(NOW(), acquired_at))::float8 AS age_seconds), "
    "acquired AS ("
    " INSERT INTO paimon_distributed_locks"
    " (lock_id, expire_time_seconds, owner, heartbeat_at, lease_seconds, hostname, pid, fencing_token)"
    " SELECT %(lock_id)s, %(lease)s, %(owner)s, now(), %(lease)s, %(hostname)s, %(pid)s,"
    " nextval('paimon_lock_fencing_token_seq')"
    " FROM (SELECT count(*) FROM expired) AS deleted_first"
    " ON CONFLICT (lock_id) DO NOTHING"
    " RETURNING lock_id, owner, fencing_token, hostname, pid, acquired_at), "
    "logged AS ("
    " INSERT INTO paimon_lock_events (lock_id, event_type, owner, fencing_token, hostname, pid,"
    " previous_owner, previous_fencing_token, wait_ms, payload)"
    " SELECT lock_id, event_type, owner, fencing_token, hostname, pid, previous_owner,"
    " previous_fencing_token, wait_ms, payload FROM ("
    "  SELECT 1 AS ord, a.lock_id, 'expiry_takeover' AS event_type, a.owner, a.fencing_token, a.hostname,"
    "  a.pid, e.owner AS previous_owner, e.fencing_token AS previous_fencing_token, NULL::float8 AS wait_ms,"
    "  jsonb_build_object('age_seconds', round(e.age_seconds::numeric, 3),"
    "  'expire_time_seconds', e.expire_time_seconds, 'java', e.owner IS NULL) AS payload"
    "  FROM acquired a CROSS JOIN expired e"
    "  UNION ALL"
    "  SELECT 2, a.lock_id, 'acquired', a.owner, a.fencing_token, a.hostname, a.pid, NULL, NULL,"
    "  %(wait_ms)s::float8, jsonb_build_object('lease_seconds', %(lease)s::int, 'attempt', %(attempt)s::text)"
    "  FROM acquired a) AS events ORDER BY ord) "
    "SELECT fencing_token, acquired_at FROM acquired"
)
_REMAINING = (
    "SELECT (expire_time_seconds - EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)))::float8 AS remaining "
    "FROM paimon_distributed_locks WHERE lock_id = %(lock_id)s"
)
_RENEW = (
    "UPDATE paimon_distributed_locks SET acquired_at = CURRENT_TIMESTAMP, heartbeat_at = now() "
    "WHERE lock_id = %(lock_id)s AND owner = %(owner)s AND fencing_token = %(token)s "
    "AND EXTRACT(EPOCH FROM AGE(clock_timestamp(), acquired_at)) <= expire_time_seconds "
    "RETURNING lock_id"
)
_SELECT_ROW = (
    "SELECT lock_id, owner, fencing_token, hostname, pid, acquired_at, heartbeat_at, "
    "expire_time_seconds, lease_seconds, "
    "EXTRACT(EPOCH FROM AGE(clock_timestamp(), acquired_at))::float8 AS age_seconds, held_since, "
    "EXTRACT(EPOCH FROM clock_timestamp() - coalesce(held_since, acquired_at::timestamptz))::float8 "
    "AS held_seconds "
    "FROM paimon_distributed_locks"
)
_VALIDATE = _SELECT_ROW + " WHERE lock_id = %(lock_id)s FOR KEY SHARE"
# The same, also setting the transaction's idle_in_transaction_session_timeout ('0ms' = none).
_VALIDATE_FENCED = (
    "SELECT set_config('idle_in_transaction_session_timeout', %(idle)s, true) AS idle_timeout, "
    + _SELECT_ROW[len("SELECT ") :]
    + " WHERE lock_id = %(lock_id)s FOR KEY SHARE"
)
_GET = _SELECT_ROW + " WHERE lock_id = %(lock_id)s"
_LIST = _SELECT_ROW + " ORDER BY lock_id"
# Release, its event and the wake-up of waiters in one statement: the event and the NOTIFY happen
# only if the owner+token-checked DELETE removed our row (NOTIFY is delivered when the transaction
# commits).
_RELEASE = (
    "WITH released AS ("
    " DELETE FROM paimon_distributed_locks"
    " WHERE lock_id = %(lock_id)s AND owner = %(owner)s AND fencing_token = %(token)s"
    " RETURNING lock_id), "
    "logged AS ("
    " INSERT INTO paimon_lock_events (lock_id, event_type, owner, fencing_token, hostname, pid, payload)"
    " SELECT lock_id, 'released', %(owner)s, %(token)s, %(hostname)s, %(pid)s, %(payload)s"
    " FROM released) "
    "SELECT pg_notify(%(channel)s, lock_id) FROM released"
)
_FORCE_RELEASE_DELETE = "DELETE FROM paimon_distributed_locks WHERE lock_id = %(lock_id)s"
_FORCE_RELEASE_RETURNING = (
    " RETURNING lock_id, owner, fencing_token, hostname, pid, acquired_at, heartbeat_at, "
    "expire_time_seconds, lease_seconds, "
    "EXTRACT(EPOCH FROM AGE(clock_timestamp(), acquired_at))::float8 AS age_seconds, held_since, "
    "EXTRACT(EPOCH FROM clock_timestamp() - coalesce(held_since, acquired_at::timestamptz))::float8 "
    "AS held_seconds"
)
_FORCE_RELEASE = _FORCE_RELEASE_DELETE + _FORCE_RELEASE_RETURNING
# Java's expiry predicate (PostgresqlDistributedLockDialect): delete the row only if it is expired, so a
# holder that renewed (or a new holder that took over) since the caller looked is never removed.
_FORCE_RELEASE_STALE = (
    _FORCE_RELEASE_DELETE
    + " AND EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)) > expire_time_seconds"
    + _FORCE_RELEASE_RETURNING
)
_NOTIFY = "SELECT pg_notify(%(channel)s, %(lock_id)s)"
# The release of an acquire whose answer was lost (:class:`_InDoubtAcquire`): the row is ours only if
# it carries the fencing token that attempt's own ``acquired`` event recorded (the attempt id is in its
# payload), owner- and token-checked like any release; nothing if that attempt never committed. Only the
# lock's newest ``acquired`` event is read (backwards on the (lock_id, event_id) index: bounded whatever
# the log's size): while the attempt's row stands nobody else acquires, and once it is gone (expired and
# taken over) there is nothing left to release.
_RELEASE_IN_DOUBT = (
    "WITH mine AS ("
    " SELECT fencing_token FROM ("
    "  SELECT fencing_token, owner, payload FROM paimon_lock_events"
    "  WHERE lock_id = %(lock_id)s AND event_type = 'acquired' ORDER BY event_id DESC LIMIT 1) newest"
    " WHERE owner = %(owner)s AND payload ->> 'attempt' = %(attempt)s), "
    "released AS ("
    " DELETE FROM paimon_distributed_locks"
    " WHERE lock_id = %(lock_id)s AND owner = %(owner)s AND fencing_token IN (SELECT fencing_token FROM mine)"
    " RETURNING lock_id, fencing_token), "
    "logged AS ("
    " INSERT INTO paimon_lock_events (lock_id, event_type, owner, fencing_token, hostname, pid, payload)"
    " SELECT lock_id, 'released', %(owner)s, fencing_token, %(hostname)s, %(pid)s, %(payload)s"
    " FROM released) "
    "SELECT pg_notify(%(channel)s, lock_id) FROM released"
)
_SET_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %(value)s, true)"

# The hot statements, planned once per connection (see ServerStatement).
_ACQUIRE_PREPARED = ServerStatement(
    "paimon_lock_acquire",
    _ACQUIRE,
    (
        ("lock_id", "varchar"),
        ("lease", "int4"),
        ("owner", "text"),
        ("hostname", "text"),
        ("pid", "int4"),
        ("wait_ms", "float8"),
        ("attempt", "text"),
    ),
)
_VALIDATE_PREPARED = ServerStatement(
    "paimon_lock_validate", _VALIDATE_FENCED, (("idle", "text"), ("lock_id", "varchar"))
)
_RELEASE_PREPARED = ServerStatement(
    "paimon_lock_release",
    _RELEASE,
    (
        ("lock_id", "varchar"),
        ("owner", "text"),
        ("token", "int8"),
        ("hostname", "text"),
        ("pid", "int4"),
        ("payload", "jsonb"),
        ("channel", "text"),
    ),
)


def lock_id_for(database: str, table: str, *, catalog_key: str = DEFAULT_CATALOG_KEY) -> str:
    """The lock id Java's ``JdbcCatalogLock`` uses for a table: ``<catalog-key>.<database>.<table>``."""
    return _check_lock_id(f"{catalog_key}.{database}.{table}")


def _check_lock_id(lock_id: str) -> str:
    if not lock_id or len(lock_id) > MAX_LOCK_ID_LENGTH:
        raise ValidationError(
            f"lock id must be 1..{MAX_LOCK_ID_LENGTH} characters: {lock_id!r}", lock_id=lock_id
        )
    return lock_id


# ---- lock rows -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LockInfo:
    """One row of ``paimon_distributed_locks`` as seen now. ``java`` rows have no owner or token.

    ``acquired_at`` is the row's TIMESTAMP (server-local time, refreshed by every heartbeat).
    """

    lock_id: str
    owner: str | None
    fencing_token: int | None
    hostname: str | None
    pid: int | None
    acquired_at: datetime
    heartbeat_at: datetime | None
    expire_time_seconds: int
    lease_seconds: int | None
    age_seconds: float
    lease_left_seconds: float
    stale: bool
    java: bool
    #: When the holder acquired it (migration 0018; None on an older schema) and how long ago.
    held_since: datetime | None = None
    held_seconds: float | None = None

    @classmethod
    def from_row(cls, row: Row[Any]) -> LockInfo:
        """Build from a row of the module's row-selecting queries."""
        return cls.from_mapping(dict(row._mapping))

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> LockInfo:
        """Build from the columns of the module's row-selecting queries."""
        age = float(m["age_seconds"])
        expire = int(m["expire_time_seconds"])
        return cls(
            lock_id=m["lock_id"],
            owner=m["owner"],
            fencing_token=m["fencing_token"],
            hostname=m["hostname"],
            pid=m["pid"],
            acquired_at=m["acquired_at"],
            heartbeat_at=m["heartbeat_at"],
            expire_time_seconds=expire,
            lease_seconds=m["lease_seconds"],
            age_seconds=age,
            lease_left_seconds=expire - age,
            stale=age > expire,
            java=m["owner"] is None,
            held_since=m.get("held_since"),
            held_seconds=None if m.get("held_seconds") is None else float(m["held_seconds"]),
        )


class LockLease:
    """A held lock. Use as a context manager, or call :meth:`release`.

    ``check()`` is a local test (lost flag, released flag, local deadline = last successful renewal
    start + lease). ``validate_in_txn(conn)`` / ``open_fenced_transaction(conn)`` are the
    authoritative tests, done by the database inside the caller's transaction.
    """

    def __init__(
        self,
        lock: MetastoreLock,
        *,
        lock_id: str,
        owner: str,
        fencing_token: int,
        lease_seconds: int,
        acquired_at: datetime,
        renewed_at: float,
        hostname: str,
        pid: int,
    ) -> None:
        self._lock = lock
        self.lock_id = lock_id
        self.owner = owner
        self.fencing_token = fencing_token
        self.lease_seconds = lease_seconds
        self.acquired_at = acquired_at
        self.hostname = hostname
        self.pid = pid
        self._acquired_monotonic = renewed_at
        self._deadline = renewed_at + lease_seconds
        self._state = threading.Lock()
        self._lost_reason: str | None = None
        self._released = False
        # Set once renewals must stop; ``_renewing`` is held while one runs, so stop_heartbeat() can
        # wait for an in-flight renewal instead of joining a thread.
        self._stop = threading.Event()
        self._renewing = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"LockLease(lock_id={self.lock_id!r}, owner={self.owner!r}, "
            f"fencing_token={self.fencing_token}, lost={self.lost})"
        )

    # -- state ---------------------------------------------------------------------------------

    @property
    def lost(self) -> bool:
        """True once the lease is known (or locally assumed) lost."""
        with self._state:
            return self._lost_reason is not None or time.monotonic() >= self._deadline

    @property
    def released(self) -> bool:
        """True once :meth:`release` (or a caller's release, see :meth:`release_statement`) has run."""
        return self._released

    @property
    def deadline(self) -> float:
        """``time.monotonic()`` at which the lease ends as far as this process knows (the last successful
        renewal's start plus the lease; the server's view ends no earlier)."""
        with self._state:
            return self._deadline

    @property
    def held_ms(self) -> float:
        """Milliseconds since this process started the acquiring transaction."""
        return (time.monotonic() - self._acquired_monotonic) * 1000.0

    def _mark_lost(self, reason: str) -> None:
        with self._state:
            if self._lost_reason is not None:
                return
            self._lost_reason = reason
        _log.warning(
            "lock %s lost (owner=%s token=%s): %s", self.lock_id, self.owner, self.fencing_token, reason
        )

    def _lost_error(self) -> LockLostError:
        return LockLostError(
            f"lock {self.lock_id!r} lost by {self.owner!r} (token {self.fencing_token}): {self._lost_reason}",
            lock_id=self.lock_id,
            owner=self.owner,
            fencing_token=self.fencing_token,
            reason=self._lost_reason,
        )

    def check(self) -> None:
        """Raise unless the lease is, as far as this process knows, still held.

        Raises:
            LockNotHeldError: the lease was released.
            LockLostError: a heartbeat found it gone/taken, or no renewal succeeded within the lease.
        """
        if self._released:
            raise LockNotHeldError(
                f"lock {self.lock_id!r} was released", lock_id=self.lock_id, owner=self.owner
            )
        if time.monotonic() >= self._deadline:
            self._mark_lost(f"no successful renewal within the {self.lease_seconds}s lease")
        if self._lost_reason is not None:
            raise self._lost_error()

    def _check_validated_row(self, row: Mapping[str, Any] | None) -> None:
        if row is None:
            self._mark_lost("lock row is gone")
        elif row["owner"] != self.owner or row["fencing_token"] != self.fencing_token:
            self._mark_lost(f"lock taken by owner={row['owner']!r} token={row['fencing_token']}")
        elif float(row["age_seconds"]) > int(row["expire_time_seconds"]):
            overdue = float(row["age_seconds"]) - int(row["expire_time_seconds"])
            self._mark_lost(f"lease expired {overdue:.3f}s ago")
        else:
            return
        raise self._lost_error()

    def validate_in_txn(self, conn: Connection) -> None:
        """Check, inside the caller's transaction, that the row still holds our token and is not expired.

        The row is locked ``FOR KEY SHARE`` until that transaction ends: nobody (neither our waiters nor
        Java) can delete it meanwhile, so what the transaction publishes is covered by this lease. Call it
        right before publishing, in the transaction that records the ``snapshot_published`` event. Meant
        for READ COMMITTED transactions.

        Raises:
            LockLostError: gone, taken over, or expired (the lease is then marked lost).
            LockNotHeldError: the lease was released.
        """
        self.check()
        row = conn.exec_driver_sql(_VALIDATE, {"lock_id": self.lock_id}).first()
        self._check_validated_row(None if row is None else dict(row._mapping))

    def assert_valid(self, conn: Connection) -> None:
        """Same as :meth:`validate_in_txn`."""
        self.validate_in_txn(conn)

    def open_fenced_transaction(
        self,
        conn: RawConnection,
        *,
        idle_timeout_seconds: float | None = None,
        also: Sequence[Statement] = (),
    ) -> list[list[dict[str, Any]]]:
        """BEGIN a transaction on ``conn`` and validate the lease in it (:meth:`validate_in_txn`). The
        caller commits (or rolls back) the transaction; until then nobody can take the lock over.
        ``also`` run in the transaction right after the validation, in the same round trip; their
        rows are returned (one list per statement).

        ``idle_timeout_seconds`` sets ``idle_in_transaction_session_timeout`` for this transaction: if
        the caller then sits idle that long (frozen, or stuck in slow I/O), the server ends the session
        and with it the row lock, so takeovers are delayed by at most that much. Only safe where the
        caller's publish is itself a compare-and-set (see the commit path), because the row lock is
        what protects the publish otherwise.

        Raises:
            LockLostError: gone, taken over, or expired (the transaction is rolled back).
            LockNotHeldError: the lease was released.
        """
        self.check()
        statements = self.fenced_statements(idle_timeout_seconds=idle_timeout_seconds)
        rows = run_batch(conn, [*statements, *also])
        self.check_fenced(conn, rows[: len(statements)])
        return rows[len(statements) :]

    def fenced_statements(self, *, idle_timeout_seconds: float | None = None) -> list[Statement]:
        """The statements of :meth:`open_fenced_transaction` (BEGIN and the validation), for a caller
        that sends them after statements of its own in one round trip; pass their rows to
        :meth:`check_fenced`."""
        millis = 0 if idle_timeout_seconds is None else max(1, round(idle_timeout_seconds * 1000))
        return [("BEGIN", {}), _VALIDATE_PREPARED.bind({"lock_id": self.lock_id, "idle": f"{millis}ms"})]

    def check_fenced(self, conn: RawConnection, rows: Sequence[list[dict[str, Any]]]) -> None:
        """Check the rows of :meth:`fenced_statements`; on a lost lease roll the transaction back and
        raise ``LockLostError``."""
        try:
            self._check_validated_row(rows[1][0] if rows[1] else None)
        except LockLostError:
            rollback_quietly(conn)
            raise

    # -- renewal -------------------------------------------------------------------------------

    def renew(self) -> None:
        """Refresh the row (``acquired_at``/``heartbeat_at``) if it is still ours and unexpired.

        Raises:
            LockLostError: the row is gone, taken, or already expired (an expired lease is never revived).
            LockNotHeldError: the lease was released.
            sqlalchemy.exc.SQLAlchemyError: the database could not be reached (the lease is not yet lost).
        """
        self.check()
        started = time.monotonic()
        params = {"lock_id": self.lock_id, "owner": self.owner, "token": self.fencing_token}
        with self._lock.engine.begin() as conn:
            renewed = conn.exec_driver_sql(_RENEW, params).first() is not None
            if not renewed:
                current = conn.exec_driver_sql(_GET, {"lock_id": self.lock_id}).first()
                if current is None:
                    reason = "lock row is gone"
                elif current.owner != self.owner or current.fencing_token != self.fencing_token:
                    reason = f"lock taken by owner={current.owner!r} token={current.fencing_token}"
                else:
                    reason = "lease expired before renewal"
                EventLog.append_lock(conn, self._event(LockEventType.LOST, reason=reason))
        if not renewed:
            self._mark_lost(reason)
            raise self._lost_error()
        with self._state:
            self._deadline = max(self._deadline, started + self.lease_seconds)

    def _start_heartbeat(self) -> None:
        self._lock._heartbeats.add(self)

    def _heartbeat(self) -> bool:
        """One renewal by the heartbeat thread; False once this lease needs no more renewals."""
        with self._renewing:
            if self._stop.is_set():
                return False
            try:
                self.renew()
            except (LockLostError, LockNotHeldError):
                return False
            except Exception as exc:
                # Transient (database unreachable): retry next tick; give up once the lease is over.
                _log.warning("lock %s heartbeat failed: %s", self.lock_id, exc)
                if time.monotonic() >= self._deadline:
                    self._mark_lost(f"heartbeat failing past the lease: {exc}")
                    return False
            return True

    def stop_heartbeat(self) -> None:
        """Stop renewing (before releasing: a renewal after the row is gone would log a loss). Returns
        once no renewal of this lease is running or can start."""
        self._stop.set()
        self._lock._heartbeats.discard(self)
        if not self._renewing.acquire(timeout=self.lease_seconds):
            _log.warning("lock %s: a heartbeat renewal is still running", self.lock_id)
            return
        self._renewing.release()

    # -- release -------------------------------------------------------------------------------

    def release_statement(self, extra: Mapping[str, Any] | None = None) -> Statement:
        """The release (owner+token-checked DELETE, ``released`` event, NOTIFY) as one statement, for
        a caller that releases inside its own transaction. It returns one row iff our row was deleted;
        report that to :meth:`confirm_release` once the transaction committed. Stop the heartbeat
        first (:meth:`stop_heartbeat`). ``extra``: more fields of the event's payload."""
        return _RELEASE_PREPARED.bind(
            {
                "lock_id": self.lock_id,
                "owner": self.owner,
                "token": self.fencing_token,
                "hostname": self.hostname,
                "pid": self.pid,
                "payload": Jsonb({"held_ms": round(self.held_ms, 3), **(extra or {})}),
                "channel": self._lock.channel(self.lock_id),
            },
        )

    def confirm_release(self, deleted: bool) -> None:
        """Record that a caller's transaction running :meth:`release_statement` committed."""
        with self._state:
            self._released = True
        self._stop.set()
        if not deleted:
            self._mark_lost("lock row was gone or someone else's at release")

    def release(self) -> bool:
        """Delete our row (only if it still holds our owner and token) and wake the waiters.

        Returns:
            True if our row was deleted; False if it was already gone or someone else's (the lease is
            then marked lost) or this lease was released before.

        Raises:
            psycopg.OperationalError, psycopg.InterfaceError: the metastore could not be reached; the
                release goes on in the background (:meth:`release_later`) once it answers again.
        """
        with self._state:
            if self._released:
                return False
            self._released = True
        self.stop_heartbeat()
        try:
            with self._lock.connection() as conn:
                deleted = bool(run_batch(conn, [self.release_statement()])[0])
        except CONNECTION_FAILURES as exc:
            # The metastore is unreachable (or the session died): keep trying in the background, so
            # the row does not block the table for the rest of the lease once it answers again.
            self._lock._deferred.add(self, error=exc)
            raise
        if not deleted:
            self._mark_lost("lock row was gone or someone else's at release")
        return deleted

    def release_later(self, *, settlement: Settlement | None = None, error: object = "") -> None:
        """Hand the release to the lock's background retrier (:mod:`paimon_meta.metastore.deferred`)
        after a release (or the transaction that was to release) failed with ``error``. With
        ``settlement``, its statements commit with the release, in a transaction that validated the
        lease first. The lease counts as released from now on (no renewals, :meth:`check` refuses)."""
        with self._state:
            already = self._released
            self._released = True
        if already:
            # Nothing left to release here; the work cannot commit under this lease any more.
            if settlement is not None:
                settlement.finished(ReleaseOutcome.GONE, None)
            return
        self.stop_heartbeat()
        self._lock._deferred.add(self, settlement=settlement, error=error)

    def _event(self, event_type: LockEventType, **fields: Any) -> LockEvent:
        return LockEvent(
            lock_id=self.lock_id,
            event_type=event_type,
            owner=self.owner,
            fencing_token=self.fencing_token,
            hostname=self.hostname,
            pid=self.pid,
            **fields,
        )

    def __enter__(self) -> LockLease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.release()
            return
        try:
            self.release()
        except Exception:
            # Do not mask the body's exception; a connection failure is retried in the background.
            _log.exception("releasing lock %s after an error failed", self.lock_id)


class _Heartbeats:
    """One daemon thread per :class:`MetastoreLock` renewing every lease it handed out, each every
    lease/3 (a thread per lease would be started and joined on every commit). The thread exits after
    a minute without leases and is started again by the next one."""

    _IDLE_EXIT_SECONDS = 60.0

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[LockLease, float] = {}
        self._thread: threading.Thread | None = None

    def add(self, lease: LockLease) -> None:
        with self._cond:
            self._due[lease] = time.monotonic() + lease.lease_seconds / 3.0
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="paimon-lock-heartbeat", daemon=True)
                self._thread.start()
            self._cond.notify()

    def discard(self, lease: LockLease) -> None:
        with self._cond:
            self._due.pop(lease, None)

    def _next_due(self) -> list[LockLease] | None:
        """Wait for the leases due now; None when the thread should exit."""
        with self._cond:
            while True:
                now = time.monotonic()
                if not self._due:
                    if not self._cond.wait(self._IDLE_EXIT_SECONDS) and not self._due:
                        self._thread = None
                        return None
                    continue
                due = [lease for lease, at in self._due.items() if at <= now]
                if due:
                    for lease in due:
                        self._due[lease] = now + lease.lease_seconds / 3.0
                    return due
                self._cond.wait(min(self._due.values()) - now)

    def _run(self) -> None:
        while (due := self._next_due()) is not None:
            for lease in due:
                if not lease._heartbeat():
                    self.discard(lease)


class MetastoreLock:
    """Acquire, inspect and force-release metastore locks over an Engine.

    Thread-safe. Holds a few dedicated LISTEN connections for waiters and a :class:`SessionPool` for
    the hot statements; call :meth:`close` (or use as a context manager) to close them. Leases are
    independent of this object's lifetime except that they use its engine and pool.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        poll_interval_seconds: float = 0.5,
        max_idle_listeners: int = 4,
        max_idle_sessions: int = 8,
    ) -> None:
        if poll_interval_seconds <= 0:
            raise ValidationError("poll_interval_seconds must be > 0")
        self.engine = engine
        self.poll_interval_seconds = poll_interval_seconds
        conninfo = libpq_conninfo(engine.url)
        self._listeners = ListenerPool(conninfo, max_idle=max_idle_listeners)
        self._sessions = SessionPool(conninfo, max_idle=max_idle_sessions)
        self._heartbeats = _Heartbeats()
        self._deferred = DeferredReleases(self.connection)
        self._hostname = socket.gethostname()

    @staticmethod
    def channel(lock_id: str) -> str:
        """The NOTIFY channel waiters of ``lock_id`` listen on."""
        return channel_for(CHANNEL_PREFIX, lock_id)

    @property
    def sessions(self) -> SessionPool:
        """This lock's pool of plain autocommit connections (shared with the service's one-round-trip
        reads, ``Principals.authenticate``)."""
        return self._sessions

    @contextmanager
    def connection(self) -> Iterator[RawConnection]:
        """A plain autocommit connection of this lock's :class:`SessionPool`."""
        with self._sessions.connection() as conn:
            yield conn

    #: How long :meth:`close` lets deferred releases finish (a process stopping right after a restart).
    CLOSE_DRAIN_SECONDS = 2.0

    def close(self) -> None:
        """Give deferred releases up to :data:`CLOSE_DRAIN_SECONDS` to finish, then close the idle LISTEN
        and session connections (rows still unreleased expire after their leases)."""
        self._deferred.close(drain_seconds=self.CLOSE_DRAIN_SECONDS)
        self._listeners.close()
        self._sessions.close()

    # -- deferred releases -------------------------------------------------------------------------

    def observe_deferred(self, observer: Observer) -> None:
        """Call ``observer`` with the :class:`~paimon_meta.metastore.deferred.DeferredRelease` of every
        deferred release that ends (metrics; see :mod:`paimon_meta.metastore.lock_metrics`)."""
        self._deferred.observe(observer)

    @property
    def deferred_pending(self) -> int:
        """Releases that failed and are being retried in the background."""
        return self._deferred.pending

    def wait_deferred(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the deferred releases to end; True if none is left."""
        return self._deferred.wait_idle(timeout)

    def __enter__(self) -> MetastoreLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- acquire -------------------------------------------------------------------------------

    def try_acquire(
        self, lock_id: str, *, owner: str, lease_seconds: int = 30, heartbeat: bool = True
    ) -> LockLease | None:
        """One attempt: the lease, or None if someone (possibly Java) holds an unexpired row."""
        _check_args(lock_id, owner, lease_seconds)
        now = time.monotonic()
        with self.connection() as conn:
            lease, _ = self._attempt(_Request(lock_id, owner, lease_seconds, now, now + 1.0), conn)
        if lease is not None and heartbeat:
            lease._start_heartbeat()
        return lease

    def acquire(
        self,
        lock_id: str,
        *,
        owner: str,
        lease_seconds: int = 30,
        timeout_seconds: float = 60.0,
        heartbeat: bool = True,
    ) -> LockLease:
        """Block until the lock is ours (or ``timeout_seconds`` pass) and return the lease.

        ``lease_seconds`` (whole seconds, as Java's ``expire_time_seconds``) is how long the row stays
        valid without a renewal; with ``heartbeat`` a daemon thread renews it every lease/3.

        Raises:
            LockTimeoutError: not acquired in time (fields: lock_id, owner, timeout_seconds, holder).
            ValidationError: bad lock id, owner, lease or timeout.
        """
        with self.connection() as conn:
            lease, _ = self.acquire_on(
                conn,
                lock_id,
                owner=owner,
                lease_seconds=lease_seconds,
                timeout_seconds=timeout_seconds,
                heartbeat=heartbeat,
            )
        return lease

    def acquire_on(
        self,
        conn: RawConnection,
        lock_id: str,
        *,
        owner: str,
        lease_seconds: int = 30,
        timeout_seconds: float = 60.0,
        heartbeat: bool = True,
        first: Sequence[Statement] = (),
        after: Sequence[Statement] = (),
        first_committed: Callable[[], None] | None = None,
    ) -> tuple[LockLease, list[list[dict[str, Any]]]]:
        """:meth:`acquire` on ``conn`` (a connection of :meth:`connection`), carrying the caller's
        statements in its round trips:

        * ``first``: statements run inside the first attempt's transaction, before the lock row is
          touched, and committed with it whether or not that attempt got the lock (a transaction that
          failed, e.g. on ``lock_timeout``, is retried with them). They are committed exactly once
          before this call returns or raises ``LockTimeoutError``; if one fails, so does this call.
        * ``after``: statements run right after the acquiring transaction committed, in its last round
          trip; their rows are returned (one list per statement).
        * ``first_committed``: called as soon as the ``first`` statements committed, so a caller whose
          wait then fails otherwise (the connection died while waiting: a metastore restart) knows
          they must not be sent again.

        Raises:
            LockTimeoutError: not acquired in time (the ``first`` statements are committed).
            ValidationError: bad lock id, owner, lease or timeout.
        """
        _check_args(lock_id, owner, lease_seconds)
        if timeout_seconds < 0:
            raise ValidationError("timeout_seconds must be >= 0", timeout_seconds=timeout_seconds)
        started = time.monotonic()
        request = _Request(
            lock_id,
            owner,
            lease_seconds,
            started,
            started + timeout_seconds,
            list(first),
            list(after),
            first_committed=first_committed,
        )
        lease = self._acquire(request, conn)
        if heartbeat:
            lease._start_heartbeat()
        return lease, request.after_rows

    def _acquire(self, request: _Request, conn: RawConnection) -> LockLease:
        lease, _ = self._attempt(request, conn)
        if lease is not None:
            return lease
        if time.monotonic() >= request.deadline:
            raise self._timeout_error(request)
        with ExitStack() as stack:
            # Lazy: without a LISTEN connection now (too many connections, a restart) the listener
            # keeps trying while we poll; still correct, only slower until it LISTENs.
            listener = stack.enter_context(
                self._listeners.listening(self.channel(request.lock_id), lazy=True)
            )
            if listener.connection is None:
                _log.warning("lock %s: LISTEN unavailable, polling until it is", request.lock_id)
            return self._wait_loop(request, conn, listener)
        raise AssertionError("unreachable")  # ExitStack does not swallow exceptions

    def _wait_loop(self, request: _Request, conn: RawConnection, listener: Listener) -> LockLease:
        # The first attempt here happens after LISTEN is active, so a release that commits between a
        # failed attempt and the wait still wakes us (its NOTIFY is queued on our session).
        while True:
            lease, retry_in = self._attempt(request, conn)
            if lease is not None:
                return lease
            remaining = request.deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout_error(request)
            wait = min(remaining, self.poll_interval_seconds, retry_in)
            # A broken LISTEN connection is re-opened by the listener itself (with backoff; polling
            # meanwhile), and its return counts as a wake-up: a NOTIFY may have been missed.
            listener.wait(wait)

    def _timeout_error(self, request: _Request) -> LockTimeoutError:
        holder = self.get_lock(request.lock_id)
        held_by = "" if holder is None else f" (held by {holder.owner or 'a Java writer'!r})"
        waited = request.deadline - request.started
        return LockTimeoutError(
            f"lock {request.lock_id!r} not acquired by {request.owner!r} within {waited:.3f}s{held_by}",
            lock_id=request.lock_id,
            owner=request.owner,
            timeout_seconds=waited,
            holder=holder,
        )

    def _attempt(self, request: _Request, conn: RawConnection) -> tuple[LockLease | None, float]:
        """One acquiring transaction, in one round trip: (lease, 0) or (None, seconds until a retry is
        worth it). The caller's ``first`` statements run in it (until they committed once), its
        ``after`` statements right after its COMMIT (their rows are kept only when the lock is ours).
        The transaction commits whether or not the row became ours (then nothing but ``first``
        changed)."""
        lock_id = request.lock_id
        pid = os.getpid()
        # Taken before the transaction starts: the row's acquired_at (transaction start time) is later,
        # so the local deadline t0 + lease never outlives the server's view of the lease.
        t0 = time.monotonic()
        # A validating holder keeps the row FOR KEY SHARE; don't queue behind it past our deadline.
        timeout_ms = max(10, min(int((request.deadline - t0) * 1000), 5000))
        params = {
            "lock_id": lock_id,
            "lease": request.lease_seconds,
            "owner": request.owner,
            "hostname": self._hostname,
            "pid": pid,
            "wait_ms": round((t0 - request.started) * 1000.0, 3),
            "attempt": uuid.uuid4().hex,
        }
        first = request.first
        try:
            results = run_batch(
                conn,
                [
                    ("BEGIN", {}),
                    (_SET_LOCK_TIMEOUT, {"value": f"{timeout_ms}ms"}),
                    (_SERIALISE_ACQUIRERS, {"class": _ADVISORY_CLASS, "lock_id": lock_id}),
                    *first,
                    _ACQUIRE_PREPARED.bind(params),
                    (_REMAINING, {"lock_id": lock_id}),
                    ("COMMIT", {}),
                    *request.after,
                ],
            )
        except psycopg.errors.LockNotAvailable:
            return None, 0.0  # rolled back, ``first`` included: the next attempt carries it again
        except Exception as exc:
            if connection_lost(exc, conn):
                # In doubt: the transaction may have committed with our row in it, and no lease of ours
                # knows its token. Unreleased, it would block the table, this caller's own retry
                # included, for the whole lease; so it is released in the background once the metastore
                # answers (nothing is deleted if the attempt never committed).
                self._deferred.add(
                    _InDoubtAcquire(self, request, str(params["attempt"]), t0 + request.lease_seconds),
                    error=exc,
                )
            elif (missing := partition_missing(exc)) is not None:
                # a commit's prepared event carried by the acquire (``first``): rolled back with it,
                # nothing published; typed (a 503 over HTTP) instead of the driver's CheckViolation
                raise missing from exc
            raise
        request.first = []
        if first and request.first_committed is not None:
            request.first_committed()
        ours = results[3 + len(first) :]
        token_rows, remaining = ours[0], ours[1]
        if not token_rows:
            left = remaining[0]["remaining"] if remaining else None
            # Wake just after the holder's expiry (matters for Java rows and crashed holders).
            return None, 0.0 if left is None else max(0.0, float(left)) + 0.005
        request.after_rows = ours[3:]
        return (
            LockLease(
                self,
                lock_id=lock_id,
                owner=request.owner,
                fencing_token=int(token_rows[0]["fencing_token"]),
                lease_seconds=request.lease_seconds,
                acquired_at=token_rows[0]["acquired_at"],
                renewed_at=t0,
                hostname=self._hostname,
                pid=pid,
            ),
            0.0,
        )

    # -- inspection and operator tools -----------------------------------------------------------

    def get_lock(self, lock_id: str) -> LockInfo | None:
        """The current row for ``lock_id``, or None."""
        with self.engine.connect() as conn:
            row = conn.exec_driver_sql(_GET, {"lock_id": lock_id}).first()
        return None if row is None else LockInfo.from_row(row)

    def list_locks(self) -> list[LockInfo]:
        """Every lock row, including Java's (``java=True``), with lease left and a ``stale`` flag."""
        with self.engine.connect() as conn:
            return [LockInfo.from_row(r) for r in conn.exec_driver_sql(_LIST)]

    def force_release(
        self, lock_id: str, *, operator: str, reason: str, stale_only: bool = False
    ) -> LockInfo | None:
        """Delete the row whoever holds it (ours or Java's), log who and why (a ``force_released``
        event in the deleting transaction), and wake waiters.

        The former holder's next renewal or validation fails with LockLostError. Waits for a holder's
        publishing transaction that has the row validated (``FOR KEY SHARE``) to end first.

        ``stale_only``: delete the row only if Java's expiry rule says it is expired (one any acquirer
        would delete anyway); a row renewed or taken over since the caller looked is left alone. The
        event's payload then also says ``"forced": False``.

        Returns:
            The removed row, or None if there was none (with ``stale_only``: or it was not stale).
        """
        _check_lock_id(lock_id)
        if not operator or not reason:
            raise ValidationError("force_release needs an operator and a reason")
        with self.engine.begin() as conn:
            statement = _FORCE_RELEASE_STALE if stale_only else _FORCE_RELEASE
            row = conn.exec_driver_sql(statement, {"lock_id": lock_id}).first()
            if row is None:
                return None
            info = LockInfo.from_row(row)
            payload: dict[str, Any] = {
                "age_seconds": round(info.age_seconds, 3),
                "stale": True if stale_only else info.stale,
                "java": info.java,
            }
            if stale_only:
                payload["forced"] = False
            EventLog.append_lock(
                conn,
                LockEvent(
                    lock_id=lock_id,
                    event_type=LockEventType.FORCE_RELEASED,
                    hostname=self._hostname,
                    pid=os.getpid(),
                    operator=operator,
                    reason=reason,
                    previous_owner=info.owner,
                    previous_fencing_token=info.fencing_token,
                    payload=payload,
                ),
            )
            conn.exec_driver_sql(_NOTIFY, {"channel": self.channel(lock_id), "lock_id": lock_id})
        return info


class _InDoubtAcquire:
    """A :class:`~paimon_meta.metastore.deferred.Releasable` for an acquire whose answer was lost
    (the connection died with its transaction sent): the deferred retrier deletes the row it may have
    inserted, identified by the attempt id in its ``acquired`` event (``_RELEASE_IN_DOUBT``), until
    the lease that row would have had runs out.

    Invariant: only a row no lease of this process knows is deleted: the attempt raised, so no
    :class:`LockLease` was made for its token, and a later acquire, ours or anyone's, inserts a row
    with another token (tokens are drawn from a sequence)."""

    def __init__(self, lock: MetastoreLock, request: _Request, attempt: str, deadline: float) -> None:
        self.lock_id = request.lock_id
        self.owner = request.owner
        self.fencing_token = 0  # unknown here: the statement finds it from the attempt's event
        self._lock = lock
        self._attempt = attempt
        self._deadline = deadline

    @property
    def deadline(self) -> float:
        return self._deadline

    def release_statement(self, extra: dict[str, Any] | None = None) -> Statement:
        return (
            _RELEASE_IN_DOUBT,
            {
                "lock_id": self.lock_id,
                "owner": self.owner,
                "attempt": self._attempt,
                "hostname": self._lock._hostname,
                "pid": os.getpid(),
                "payload": Jsonb({"in_doubt_acquire": self._attempt, **(extra or {})}),
                "channel": self._lock.channel(self.lock_id),
            },
        )

    def fenced_statements(self, *, idle_timeout_seconds: float | None = None) -> list[Statement]:
        raise NotImplementedError("an in-doubt acquire carries no settlement")

    def check_fenced(self, conn: RawConnection, rows: Sequence[list[dict[str, Any]]]) -> None:
        raise NotImplementedError("an in-doubt acquire carries no settlement")

    def confirm_release(self, deleted: bool) -> None:
        """Nothing to record: no lease was made for the attempt."""


@dataclass(slots=True)
class _Request:
    lock_id: str
    owner: str
    lease_seconds: int
    started: float
    deadline: float
    first: list[Statement] = field(default_factory=list)
    after: list[Statement] = field(default_factory=list)
    after_rows: list[list[dict[str, Any]]] = field(default_factory=list)
    first_committed: Callable[[], None] | None = None


def _check_args(lock_id: str, owner: str, lease_seconds: int) -> None:
    _check_lock_id(lock_id)
    if not owner:
        raise ValidationError("lock owner must be a non-empty string")
    if not isinstance(lease_seconds, int) or isinstance(lease_seconds, bool) or lease_seconds < 1:
        raise ValidationError(
            f"lease_seconds must be a whole number >= 1, got {lease_seconds!r}", lease_seconds=lease_seconds
        )
