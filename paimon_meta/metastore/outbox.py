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
"""

from __future__ import annotations

import contextlib
import hashlib
import logging

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


class OutboxLease:
    """The right to publish ``catalog_key``'s feed to ``sink``: an advisory lock on a dedicated
    autocommit connection, which also reads and advances the position. Not thread-safe: one owner."""

    def __init__(self, conninfo: str, catalog_key: str, sink: str, *, holder: str, connect_timeout: int = 5):
        self.catalog_key = catalog_key
        self.sink = sink
        self.holder = holder
        self._conninfo = conninfo
        self._connect_timeout = connect_timeout
        self._key = lease_key(catalog_key, sink)
        self._conn: psycopg.Connection[TupleRow] | None = None
        self.held = False

    def try_acquire(self) -> bool:
        """Take the lease if no other session holds it; True when this one holds it (now or already).

        Raises:
            psycopg.Error: the metastore did not answer.
        """
        if self.held:
            return True
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
        conn = self._holding()
        try:
            row = conn.execute(_READ, (self.catalog_key, self.sink)).fetchone()
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
        conn = self._holding()
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
            conn.execute(_ADVANCE, params)
        except psycopg.Error as exc:
            self.release()
            raise LockLostError(f"outbox lease of {self.sink!r} lost: {exc}", sink=self.sink) from exc

    def check(self) -> None:
        """Raise unless the lease's session is still there (then the lock is still held: it ends only
        with the session).

        Raises:
            LockLostError: the session is gone; the lease is released.
        """
        conn = self._holding()
        try:
            conn.execute("SELECT 1")
        except psycopg.Error as exc:
            self.release()
            raise LockLostError(f"outbox lease of {self.sink!r} lost: {exc}", sink=self.sink) from exc

    def _holding(self) -> psycopg.Connection[TupleRow]:
        if not self.held or self._conn is None or self._conn.closed:
            self.release()
            raise LockLostError(f"outbox lease of {self.sink!r} not held", sink=self.sink)
        return self._conn

    def release(self) -> None:
        """Give the lease up: unlock, then close the session. (Closing alone frees the lock only once the
        server has ended the backend, a moment later: a successor trying at once would be refused.)"""
        held, self.held = self.held, False
        if self._conn is not None:
            if held and not self._conn.closed:
                with contextlib.suppress(psycopg.Error):  # a dead session has released it already
                    self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
            self._conn.close()
            self._conn = None
