"""The metastore lock: Java Paimon's JDBC lock row, plus leases, heartbeats, fencing and fast hand-off.

One row of ``paimon_distributed_locks`` per held lock, keyed like Java's ``JdbcCatalogLock``
(``<catalog-key>.<database>.<table>``), so Java writers and we exclude each other:

* acquire = Java's delete-if-expired (``EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)) >
  expire_time_seconds``), then ``INSERT ... ON CONFLICT DO NOTHING``; a row Java inserted (no owner,
  no token) blocks us until Java deletes it or it expires, and our row makes Java's plain INSERT fail.
  ``expire_time_seconds`` is our lease, so Java's own expiry arithmetic applies to our rows;
* a heartbeat thread refreshes ``acquired_at`` every lease/3 with an owner+token-checked UPDATE, so a
  live holder never looks expired to anyone, Java included;
* every lease carries a fencing token from a Postgres sequence, drawn after the row is ours, so tokens
  of successive holders of a lock strictly increase;
* :meth:`LockLease.validate_in_txn` re-reads the row ``FOR KEY SHARE`` inside the publishing
  transaction: it fails if the row is gone, someone else's, or expired, and once it passes nobody can
  delete the row (take over) until that transaction ends, while the heartbeat's non-key UPDATE still
  proceeds. A holder frozen past its lease therefore cannot publish;
* release = owner+token-checked DELETE plus ``pg_notify`` in one transaction; waiters LISTEN on a
  per-lock channel and retry at once, and poll (bounded interval, or until the holder's expiry) for
  Java holders, which never notify.

Every acquire, release, expiry takeover, forced release and detected loss is appended to
``paimon_lock_events`` in the transaction that made it happen.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

import psycopg
from sqlalchemy import Connection, Engine, Row, text
from sqlalchemy.exc import OperationalError

from paimon_meta.catalog.events import EventLog, LockEvent, LockEventType
from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.db.notify import Listener, ListenerPool, channel_for
from paimon_meta.errors import LockLostError, LockNotHeldError, LockTimeoutError, ValidationError

_log = logging.getLogger(__name__)

#: Java's default ``catalog-key`` (JdbcCatalogOptions.CATALOG_KEY).
DEFAULT_CATALOG_KEY = "jdbc"
#: Java's lock_id column width (JdbcCatalogOptions.LOCK_KEY_MAX_LENGTH default).
MAX_LOCK_ID_LENGTH = 255
#: Prefix of the per-lock NOTIFY channel.
CHANNEL_PREFIX = "paimon_lock"

_LOCK_NOT_AVAILABLE = "55P03"

# Java's predicate, verbatim (PostgresqlDistributedLockDialect.getTryReleaseTimedOutLock).
_DELETE_EXPIRED = text(
    "DELETE FROM paimon_distributed_locks "
    "WHERE EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)) > expire_time_seconds AND lock_id = :lock_id "
    "RETURNING owner, fencing_token, expire_time_seconds, "
    "EXTRACT(EPOCH FROM AGE(NOW(), acquired_at))::float8 AS age_seconds"
)
_INSERT = text(
    "INSERT INTO paimon_distributed_locks "
    "(lock_id, expire_time_seconds, owner, heartbeat_at, lease_seconds, hostname, pid) "
    "VALUES (:lock_id, :lease, :owner, now(), :lease, :hostname, :pid) "
    "ON CONFLICT (lock_id) DO NOTHING RETURNING lock_id"
)
# Drawn only once the row is ours: a competitor's earlier nextval can then never exceed ours.
_ASSIGN_TOKEN = text(
    "UPDATE paimon_distributed_locks SET fencing_token = nextval('paimon_lock_fencing_token_seq') "
    "WHERE lock_id = :lock_id RETURNING fencing_token, acquired_at"
)
_REMAINING = text(
    "SELECT (expire_time_seconds - EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)))::float8 AS remaining "
    "FROM paimon_distributed_locks WHERE lock_id = :lock_id"
)
_RENEW = text(
    "UPDATE paimon_distributed_locks SET acquired_at = CURRENT_TIMESTAMP, heartbeat_at = now() "
    "WHERE lock_id = :lock_id AND owner = :owner AND fencing_token = :token "
    "AND EXTRACT(EPOCH FROM AGE(clock_timestamp(), acquired_at)) <= expire_time_seconds "
    "RETURNING lock_id"
)
_SELECT_ROW = (
    "SELECT lock_id, owner, fencing_token, hostname, pid, acquired_at, heartbeat_at, "
    "expire_time_seconds, lease_seconds, "
    "EXTRACT(EPOCH FROM AGE(clock_timestamp(), acquired_at))::float8 AS age_seconds "
    "FROM paimon_distributed_locks"
)
_VALIDATE = text(_SELECT_ROW + " WHERE lock_id = :lock_id FOR KEY SHARE")
_GET = text(_SELECT_ROW + " WHERE lock_id = :lock_id")
_LIST = text(_SELECT_ROW + " ORDER BY lock_id")
_RELEASE = text(
    "DELETE FROM paimon_distributed_locks "
    "WHERE lock_id = :lock_id AND owner = :owner AND fencing_token = :token RETURNING lock_id"
)
_FORCE_RELEASE = text(
    "DELETE FROM paimon_distributed_locks WHERE lock_id = :lock_id "
    "RETURNING lock_id, owner, fencing_token, hostname, pid, acquired_at, heartbeat_at, "
    "expire_time_seconds, lease_seconds, "
    "EXTRACT(EPOCH FROM AGE(clock_timestamp(), acquired_at))::float8 AS age_seconds"
)
_NOTIFY = text("SELECT pg_notify(:channel, :lock_id)")
_SET_LOCK_TIMEOUT = text("SELECT set_config('lock_timeout', :value, true)")


def lock_id_for(database: str, table: str, *, catalog_key: str = DEFAULT_CATALOG_KEY) -> str:
    """The lock id Java's ``JdbcCatalogLock`` uses for a table: ``<catalog-key>.<database>.<table>``."""
    return _check_lock_id(f"{catalog_key}.{database}.{table}")


def _check_lock_id(lock_id: str) -> str:
    if not lock_id or len(lock_id) > MAX_LOCK_ID_LENGTH:
        raise ValidationError(
            f"lock id must be 1..{MAX_LOCK_ID_LENGTH} characters: {lock_id!r}", lock_id=lock_id
        )
    return lock_id


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

    @classmethod
    def from_row(cls, row: Row[Any]) -> LockInfo:
        """Build from a row of the module's row-selecting queries."""
        m = row._mapping
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
        )


class LockLease:
    """A held lock. Use as a context manager, or call :meth:`release`.

    ``check()`` is a local test (lost flag, released flag, local deadline = last successful renewal
    start + lease). ``validate_in_txn(conn)`` is the authoritative test, done by the database inside
    the caller's transaction.
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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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
        """True once :meth:`release` has run."""
        return self._released

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
        row = conn.execute(_VALIDATE, {"lock_id": self.lock_id}).first()
        if row is None:
            self._mark_lost("lock row is gone")
        elif row.owner != self.owner or row.fencing_token != self.fencing_token:
            self._mark_lost(f"lock taken by owner={row.owner!r} token={row.fencing_token}")
        elif float(row.age_seconds) > int(row.expire_time_seconds):
            self._mark_lost(f"lease expired {float(row.age_seconds) - int(row.expire_time_seconds):.3f}s ago")
        else:
            return
        raise self._lost_error()

    def assert_valid(self, conn: Connection) -> None:
        """Same as :meth:`validate_in_txn`."""
        self.validate_in_txn(conn)

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
            renewed = conn.execute(_RENEW, params).first() is not None
            if not renewed:
                current = conn.execute(_GET, {"lock_id": self.lock_id}).first()
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
        self._thread = threading.Thread(
            target=self._heartbeat_loop, name=f"paimon-lock-heartbeat:{self.lock_id}", daemon=True
        )
        self._thread.start()

    def _heartbeat_loop(self) -> None:
        interval = self.lease_seconds / 3.0
        while not self._stop.wait(interval):
            try:
                self.renew()
            except (LockLostError, LockNotHeldError):
                return
            except Exception as exc:
                # Transient (database unreachable): retry next tick; give up once the lease is over.
                _log.warning("lock %s heartbeat failed: %s", self.lock_id, exc)
                if time.monotonic() >= self._deadline:
                    self._mark_lost(f"heartbeat failing past the lease: {exc}")
                    return

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    # -- release -------------------------------------------------------------------------------

    def release(self) -> bool:
        """Delete our row (only if it still holds our owner and token) and wake the waiters.

        Returns:
            True if our row was deleted; False if it was already gone or someone else's (the lease is
            then marked lost) or this lease was released before.
        """
        with self._state:
            if self._released:
                return False
            self._released = True
        self._stop_heartbeat()
        params = {"lock_id": self.lock_id, "owner": self.owner, "token": self.fencing_token}
        held_ms = (time.monotonic() - self._acquired_monotonic) * 1000.0
        with self._lock.engine.begin() as conn:
            deleted = conn.execute(_RELEASE, params).first() is not None
            if deleted:
                EventLog.append_lock(
                    conn, self._event(LockEventType.RELEASED, payload={"held_ms": round(held_ms, 3)})
                )
                conn.execute(_NOTIFY, {"channel": self._lock.channel(self.lock_id), "lock_id": self.lock_id})
        if not deleted:
            self._mark_lost("lock row was gone or someone else's at release")
        return deleted

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
            # Do not mask the body's exception; the row expires after the lease anyway.
            _log.exception("releasing lock %s after an error failed", self.lock_id)


class MetastoreLock:
    """Acquire, inspect and force-release metastore locks over an Engine.

    Thread-safe. Holds a few dedicated LISTEN connections for waiters; call :meth:`close` (or use as a
    context manager) to close them. Leases are independent of this object's lifetime except that they
    use its engine.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        poll_interval_seconds: float = 0.5,
        max_idle_listeners: int = 4,
    ) -> None:
        if poll_interval_seconds <= 0:
            raise ValidationError("poll_interval_seconds must be > 0")
        self.engine = engine
        self.poll_interval_seconds = poll_interval_seconds
        self._listeners = ListenerPool(libpq_conninfo(engine.url), max_idle=max_idle_listeners)
        self._hostname = socket.gethostname()

    @staticmethod
    def channel(lock_id: str) -> str:
        """The NOTIFY channel waiters of ``lock_id`` listen on."""
        return channel_for(CHANNEL_PREFIX, lock_id)

    def close(self) -> None:
        """Close the idle LISTEN connections."""
        self._listeners.close()

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
        lease, _ = self._attempt(_Request(lock_id, owner, lease_seconds, now, now + 1.0))
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
        _check_args(lock_id, owner, lease_seconds)
        if timeout_seconds < 0:
            raise ValidationError("timeout_seconds must be >= 0", timeout_seconds=timeout_seconds)
        started = time.monotonic()
        request = _Request(lock_id, owner, lease_seconds, started, started + timeout_seconds)
        lease, _ = self._attempt(request)
        if lease is None:
            if time.monotonic() >= request.deadline:
                raise self._timeout_error(request)
            lease = self._wait_and_acquire(request)
        if heartbeat:
            lease._start_heartbeat()
        return lease

    def _wait_and_acquire(self, request: _Request) -> LockLease:
        try:
            with self._listeners.listening(self.channel(request.lock_id)) as listener:
                return self._wait_loop(request, listener)
        except psycopg.Error as exc:
            # No LISTEN connection (or it broke): still correct, only slower (bounded polling).
            _log.warning("lock %s: LISTEN unavailable, polling: %s", request.lock_id, exc)
            return self._wait_loop(request, None)

    def _wait_loop(self, request: _Request, listener: Listener | None) -> LockLease:
        # The first attempt here happens after LISTEN is active, so a release that commits between a
        # failed attempt and the wait still wakes us (its NOTIFY is queued on our session).
        while True:
            lease, retry_in = self._attempt(request)
            if lease is not None:
                return lease
            remaining = request.deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout_error(request)
            wait = min(remaining, self.poll_interval_seconds, retry_in)
            if listener is None:
                time.sleep(wait)
            else:
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

    def _attempt(self, request: _Request) -> tuple[LockLease | None, float]:
        """One acquire transaction: (lease, 0) or (None, seconds until a retry is worth it)."""
        lock_id = request.lock_id
        pid = os.getpid()
        # Taken before the transaction starts: the row's acquired_at (transaction start time) is later,
        # so the local deadline t0 + lease never outlives the server's view of the lease.
        t0 = time.monotonic()
        # A validating holder keeps the row FOR KEY SHARE; don't queue behind it past our deadline.
        timeout_ms = max(10, min(int((request.deadline - t0) * 1000), 5000))
        try:
            with self.engine.begin() as conn:
                conn.execute(_SET_LOCK_TIMEOUT, {"value": f"{timeout_ms}ms"})
                expired = conn.execute(_DELETE_EXPIRED, {"lock_id": lock_id}).first()
                params = {
                    "lock_id": lock_id,
                    "lease": request.lease_seconds,
                    "owner": request.owner,
                    "hostname": self._hostname,
                    "pid": pid,
                }
                if conn.execute(_INSERT, params).first() is None:
                    left = conn.execute(_REMAINING, {"lock_id": lock_id}).scalar()
                    # Wake just after the holder's expiry (matters for Java rows and crashed holders).
                    return None, 0.0 if left is None else max(0.0, float(left)) + 0.005
                token_row = conn.execute(_ASSIGN_TOKEN, {"lock_id": lock_id}).one()
                lease = LockLease(
                    self,
                    lock_id=lock_id,
                    owner=request.owner,
                    fencing_token=int(token_row.fencing_token),
                    lease_seconds=request.lease_seconds,
                    acquired_at=token_row.acquired_at,
                    renewed_at=t0,
                    hostname=self._hostname,
                    pid=pid,
                )
                if expired is not None:
                    EventLog.append_lock(conn, _takeover_event(lease, expired))
                EventLog.append_lock(
                    conn,
                    lease._event(
                        LockEventType.ACQUIRED,
                        wait_ms=round((t0 - request.started) * 1000.0, 3),
                        payload={"lease_seconds": request.lease_seconds},
                    ),
                )
        except OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
                return None, 0.0
            raise
        return lease, 0.0

    # -- inspection and operator tools -----------------------------------------------------------

    def get_lock(self, lock_id: str) -> LockInfo | None:
        """The current row for ``lock_id``, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(_GET, {"lock_id": lock_id}).first()
        return None if row is None else LockInfo.from_row(row)

    def list_locks(self) -> list[LockInfo]:
        """Every lock row, including Java's (``java=True``), with lease left and a ``stale`` flag."""
        with self.engine.connect() as conn:
            return [LockInfo.from_row(r) for r in conn.execute(_LIST)]

    def force_release(self, lock_id: str, *, operator: str, reason: str) -> LockInfo | None:
        """Delete the row whoever holds it (ours or Java's), log who and why, and wake waiters.

        The former holder's next renewal or validation fails with LockLostError. Waits for a holder's
        publishing transaction that has the row validated (``FOR KEY SHARE``) to end first.

        Returns:
            The removed row, or None if there was none.
        """
        _check_lock_id(lock_id)
        if not operator or not reason:
            raise ValidationError("force_release needs an operator and a reason")
        with self.engine.begin() as conn:
            row = conn.execute(_FORCE_RELEASE, {"lock_id": lock_id}).first()
            if row is None:
                return None
            info = LockInfo.from_row(row)
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
                    payload={
                        "age_seconds": round(info.age_seconds, 3),
                        "stale": info.stale,
                        "java": info.java,
                    },
                ),
            )
            conn.execute(_NOTIFY, {"channel": self.channel(lock_id), "lock_id": lock_id})
        return info


@dataclass(frozen=True, slots=True)
class _Request:
    lock_id: str
    owner: str
    lease_seconds: int
    started: float
    deadline: float


def _takeover_event(lease: LockLease, expired: Row[Any]) -> LockEvent:
    return lease._event(
        LockEventType.EXPIRY_TAKEOVER,
        previous_owner=expired.owner,
        previous_fencing_token=expired.fencing_token,
        payload={
            "age_seconds": round(float(expired.age_seconds), 3),
            "expire_time_seconds": int(expired.expire_time_seconds),
            "java": expired.owner is None,
        },
    )


def _check_args(lock_id: str, owner: str, lease_seconds: int) -> None:
    _check_lock_id(lock_id)
    if not owner:
        raise ValidationError("lock owner must be a non-empty string")
    if not isinstance(lease_seconds, int) or isinstance(lease_seconds, bool) or lease_seconds < 1:
        raise ValidationError(
            f"lease_seconds must be a whole number >= 1, got {lease_seconds!r}", lease_seconds=lease_seconds
        )
