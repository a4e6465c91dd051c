"""The outbox's lease and position: one publisher of a catalog's change feed per sink, and how far it got.

A publisher (``service/outbox.py``) sends the feed (``metastore/feed.py``) to a broker. Two facts live
here, in Postgres:

* The lease: a session-level advisory lock (``pg_try_advisory_lock``) keyed by (catalog key, sink), held
  on a dedicated connection for as long as the publisher runs. Replicas that do not get it try again
  later; when the holder dies its session ends and the lock with it, so another replica takes over.
* The position (``paimon_outbox_positions``, migration 0012): the feed position of the last event the
  broker acknowledged. It is written on the lease's own connection, so a publisher whose session (and
  with it the lock) is gone cannot write it (invariant: only the lock holder advances the position), and
  only forward (a position is never moved back, even by a stale writer).

Invariant of the outbox: the position is advanced only after the broker acknowledged every event up to
it; a publisher that dies between the ack and the write makes its successor publish those events again,
which the broker drops as duplicates (their ids are the same).

Many catalogs (issue 35): a replica runs a publisher per catalog, and their leases share one
:class:`LeaseSession` (one connection per replica, not one per catalog). The session holds each lease's
lock; it tells its leases apart itself (an advisory lock is re-entrant within a session: two publishers of
one catalog in one process must not both hold it), and a failure of its connection loses every lease it
held at once (its generation changes: each lease learns it at its next call, as with a connection of its
own).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from paimon_meta.errors import LockLostError
from paimon_meta.metastore.feed import START, Position

_log = logging.getLogger(__name__)

_READ = (
    "SELECT txid, rank, event_id, published FROM paimon_outbox_positions WHERE catalog_key = %s AND sink = %s"
)
# Forward only: a row is replaced only by a later position (row comparison, the feed's order).
_ADVANCE = (
    "INSERT INTO paimon_outbox_positions AS p "
    "(catalog_key, sink, txid, rank, event_id, published, updated_by) "
    "VALUES (%(catalog_key)s, %(sink)s, %(txid)s, %(rank)s, %(event_id)s, %(published)s, %(by)s) "
    "ON CONFLICT (catalog_key, sink) DO UPDATE SET txid = excluded.txid, rank = excluded.rank, "
    "event_id = excluded.event_id, published = p.published + excluded.published, updated_at = now(), "
    "updated_by = excluded.updated_by "
    "WHERE (p.txid, p.rank, p.event_id) < (excluded.txid, excluded.rank, excluded.event_id)"
)


def lease_key(catalog_key: str, sink: str) -> int:
    """The advisory lock key of the outbox of ``catalog_key`` to ``sink`` (a signed 64-bit hash)."""
    digest = hashlib.sha256(f"paimon_meta.outbox:{catalog_key}:{sink}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class LeaseSession:
    """One autocommit connection holding the advisory locks of several :class:`OutboxLease` (thread-safe:
    one statement at a time). ``generation`` counts the connections it opened: a lease taken on one is
    lost when another replaces it."""

    def __init__(self, conninfo: str, *, connect_timeout: int = 5) -> None:
        self._conninfo = conninfo
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[TupleRow] | None = None
        self.generation = 0
        #: The lock keys held now, each by one lease (by its id()).
        self._held: dict[int, int] = {}

    def _connection(self) -> psycopg.Connection[TupleRow]:
        if self._conn is None or self._conn.closed:
            self._held.clear()
            self.generation += 1
            self._conn = psycopg.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                application_name="paimon_meta_outbox",
            )
            # A position lost with a crash of the server only makes the next publisher start earlier
            # (replays the broker drops): its writes need not wait for the WAL's flush.
            self._conn.execute("SET synchronous_commit TO off")
        return self._conn

    def _reset(self) -> None:
        """The connection failed: close it (every lock of it goes with its session)."""
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None
        self._held.clear()

    def try_lock(self, owner: object, key: int) -> int | None:
        """Take ``key`` for ``owner``; the generation it is held in, or None (another session or another
        owner of this one holds it).

        Raises:
            psycopg.Error: the metastore did not answer.
        """
        with self._lock:
            holder = self._held.get(key)
            if holder is not None:
                return self.generation if holder == id(owner) else None
            try:
                conn = self._connection()
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            except psycopg.Error:
                self._reset()
                raise
            if not (row and row[0]):
                return None
            self._held[key] = id(owner)
            return self.generation

    def execute(self, owner: object, key: int, generation: int, sql: str, params: Any = None) -> Any:
        """Run ``sql`` for the holder of ``key`` taken in ``generation``; its first row (or None).

        Raises:
            LockLostError: ``owner`` does not hold ``key`` in this connection any more.
            psycopg.Error: the statement failed (the connection and every lock of it are dropped).
        """
        with self._lock:
            if generation != self.generation or self._held.get(key) != id(owner) or self._conn is None:
                raise LockLostError("outbox lease lost with its session", key=key)
            try:
                cursor = self._conn.execute(sql, params)
                return cursor.fetchone() if cursor.description is not None else None
            except psycopg.Error:
                self._reset()
                raise

    def unlock(self, owner: object, key: int, generation: int) -> None:
        """Give ``key`` up if ``owner`` holds it in ``generation`` (a dead session released it already)."""
        with self._lock:
            if generation != self.generation or self._held.get(key) != id(owner):
                return
            del self._held[key]
            if self._conn is not None and not self._conn.closed:
                try:
                    self._conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                except psycopg.Error:
                    self._reset()

    def close(self) -> None:
        with self._lock:
            self._reset()


class OutboxLease:
    """The right to publish ``catalog_key``'s feed to ``sink``: an advisory lock on a dedicated
    autocommit connection, which also reads and advances the position. Not thread-safe: one owner."""

    def __init__(
        self,
        conninfo: str,
        catalog_key: str,
        sink: str,
        *,
        holder: str,
        connect_timeout: int = 5,
        session: LeaseSession | None = None,
    ):
        """``session``: the connection shared with the other leases of this process (None: one of its
        own, opened at the first try and closed at release)."""
        self.catalog_key = catalog_key
        self.sink = sink
        self.holder = holder
        self._conninfo = conninfo
        self._connect_timeout = connect_timeout
        self._key = lease_key(catalog_key, sink)
        self._conn: psycopg.Connection[TupleRow] | None = None
        self.held = False
        self._session = session
        self._generation = 0

    def try_acquire(self) -> bool:
        """Take the lease if no other session holds it; True when this one holds it (now or already).

        Raises:
            psycopg.Error: the metastore did not answer.
        """
        if self.held:
            return True
        if self._session is not None:
            generation = self._session.try_lock(self, self._key)
            self.held = generation is not None
            self._generation = generation or 0
            return self.held
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                application_name="paimon_meta_outbox",
            )
            # A position lost with a crash of the server only makes the next publisher start earlier
            # (replays the broker drops): its writes need not wait for the WAL's flush.
            self._conn.execute("SET synchronous_commit TO off")
        try:
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()
        except psycopg.Error:
            self.release()
            raise
        self.held = bool(row and row[0])
        return self.held

    def position(self) -> Position:
        """The position saved for this outbox (START when none was).

        Raises:
            LockLostError: the lease is not held (its session is gone).
        """
        try:
            row = self._run(_READ, (self.catalog_key, self.sink))
        except psycopg.Error as exc:
            self.release()
            raise LockLostError(f"outbox lease of {self.sink!r} lost: {exc}", sink=self.sink) from exc
        return START if row is None else Position(int(row[0]), int(row[1]), int(row[2]))

    def advance(self, position: Position, published: int) -> None:
        """Save ``position`` (every event up to it acknowledged by the broker; ``published`` of them
        since the last save), if it is after the saved one.

        Raises:
            LockLostError: the lease is not held (its session is gone): the position was not saved.
        """
        params = {
            "catalog_key": self.catalog_key,
            "sink": self.sink,
            "txid": position.txid,
            "rank": position.rank,
            "event_id": position.event_id,
            "published": published,
            "by": self.holder,
        }
        try:
            self._run(_ADVANCE, params)
        except psycopg.Error as exc:
            self.release()
            raise LockLostError(f"outbox lease of {self.sink!r} lost: {exc}", sink=self.sink) from exc

    def check(self) -> None:
        """Raise unless the lease's session is still there (then the lock is still held: it ends only
        with the session).

        Raises:
            LockLostError: the session is gone; the lease is released.
        """
        try:
            self._run("SELECT 1")
        except psycopg.Error as exc:
            self.release()
            raise LockLostError(f"outbox lease of {self.sink!r} lost: {exc}", sink=self.sink) from exc

    def _run(self, sql: str, params: Any = None) -> Any:
        """``sql`` on the lease's session; its first row (or None).

        Raises:
            LockLostError: the lease is not held (released, or its session is gone).
            psycopg.Error: the statement failed.
        """
        if self._session is not None:
            if not self.held:
                raise LockLostError(f"outbox lease of {self.sink!r} not held", sink=self.sink)
            try:
                return self._session.execute(self, self._key, self._generation, sql, params)
            except LockLostError:
                self.held = False
                raise
        cursor = self._holding().execute(sql, params)
        return cursor.fetchone() if cursor.description is not None else None

    def _holding(self) -> psycopg.Connection[TupleRow]:
        if not self.held or self._conn is None or self._conn.closed:
            self.release()
            raise LockLostError(f"outbox lease of {self.sink!r} not held", sink=self.sink)
        return self._conn

    def release(self) -> None:
        """Give the lease up: unlock, then close the session. (Closing alone frees the lock only once the
        server has ended the backend, a moment later: a successor trying at once would be refused.)"""
        held, self.held = self.held, False
        if self._session is not None:
            if held:
                self._session.unlock(self, self._key, self._generation)
            return
        if self._conn is not None:
            if held and not self._conn.closed:
                with contextlib.suppress(psycopg.Error):  # a dead session has released it already
                    self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
            self._conn.close()
            self._conn = None
