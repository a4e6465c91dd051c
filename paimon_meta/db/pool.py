"""Plain psycopg sessions for the hot statements of the commit path: a small connection pool, statements
planned once per connection, and several statements per round trip.

The lock's acquire, validate and release, the commit's pointer compare-and-set and its events run once
per commit; a pooled SQLAlchemy checkout plus its ping per statement cost more than the statements
themselves. So they run on plain autocommit psycopg connections of a :class:`SessionPool`, several
statements per round trip (:func:`run_batch`) with explicit transactions, the heavier ones planned
once per connection (:class:`ServerStatement`). Users: :mod:`paimon_meta.metastore.lock` (which owns
one pool per :class:`~paimon_meta.metastore.lock.MetastoreLock`), the registry, the statistics and the
metastore commit path (``paimon_meta.commit.metastore``).
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg
from psycopg import pq
from psycopg.rows import dict_row


class RawConnection(psycopg.Connection[dict[str, Any]]):
    """A plain psycopg connection of a :class:`SessionPool` (autocommit, rows as dicts) that remembers
    which :class:`ServerStatement` are prepared on its session."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prepared: set[str] = set()


@dataclass(frozen=True, slots=True)
class ServerStatement:
    """A hot statement planned once per connection: PREPAREd on the session the first time that
    connection runs it (one extra round trip, then never again), EXECUTEd by name inside batches. The
    simple protocol of :func:`run_batch` carries no server-side parameters, and re-planning a CTE on
    every call measured ~0.25 ms of server CPU per statement."""

    name: str
    #: The statement in psycopg's ``%(param)s`` paramstyle.
    sql: str
    #: (param, SQL type) in the order of ``$1, $2, ...``; every param of ``sql`` must be listed.
    types: tuple[tuple[str, str], ...]

    def prepare_sql(self) -> str:
        sql = self.sql
        for i, (param, _) in enumerate(self.types, 1):
            sql = sql.replace(f"%({param})s", f"${i}")
        return f"PREPARE {self.name}({', '.join(t for _, t in self.types)}) AS {sql}"

    def bind(self, params: Mapping[str, Any]) -> Bound:
        """This statement with ``params``, for :func:`run_batch`."""
        execute = f"EXECUTE {self.name}(" + ", ".join(f"%({p})s" for p, _ in self.types) + ")"
        return Bound(execute, params, self)


class Bound(NamedTuple):
    """A :class:`ServerStatement` with its parameters (an ``EXECUTE``)."""

    sql: str
    params: Mapping[str, Any]
    statement: ServerStatement


#: One SQL statement in psycopg's ``%(name)s`` paramstyle with its parameters, or a bound
#: :class:`ServerStatement`.
Statement = tuple[str, Mapping[str, Any]] | Bound


class SessionPool:
    """Plain autocommit psycopg connections (rows as dicts) for one conninfo; thread-safe.

    Connections are reused LIFO. A server restart must not fail the next commit, so a connection is
    checked before it is handed out, without the round trip a pooled ``pool_pre_ping`` costs on every
    checkout: an idle connection has nothing to read unless the server closed it (a terminated backend
    sends an error and EOF), which a zero-timeout poll of its socket sees; only one idle longer than
    ``ping_after_idle_seconds`` (a peer that vanished without closing) is pinged.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        max_idle: int = 8,
        ping_after_idle_seconds: float = 2.0,
        connect_timeout: int = 10,
    ) -> None:
        self._conninfo = conninfo
        self._max_idle = max_idle
        self._ping_after = ping_after_idle_seconds
        self._connect_timeout = connect_timeout
        self._idle: list[tuple[RawConnection, float]] = []
        self._mutex = threading.Lock()
        self._closed = False

    def _connect(self) -> RawConnection:
        return RawConnection.connect(
            self._conninfo,
            autocommit=True,
            row_factory=dict_row,
            # No automatic preparation by psycopg: once it has prepared statements of its own it answers
            # a ROLLBACK with DEALLOCATE ALL, which would drop our ServerStatements too.
            prepare_threshold=None,
            connect_timeout=self._connect_timeout,
            application_name="paimon_meta_commit",
        )

    def _take(self) -> RawConnection:
        while True:
            with self._mutex:
                if not self._idle:
                    break
                conn, idle_since = self._idle.pop()
            if conn.closed or conn.broken:
                continue
            if time.monotonic() - idle_since < self._ping_after and not _readable(conn):
                return conn
            try:
                conn.execute("SELECT 1")
            except psycopg.Error:
                conn.close()
                continue
            return conn
        return self._connect()

    def _give_back(self, conn: RawConnection) -> None:
        if conn.closed or conn.broken:
            return
        if conn.info.transaction_status != pq.TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                conn.close()
                return
        with self._mutex:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    @contextmanager
    def connection(self) -> Iterator[RawConnection]:
        """A connection for the duration of the block; an open transaction is rolled back after it."""
        conn = self._take()
        try:
            yield conn
        finally:
            self._give_back(conn)

    def close(self) -> None:
        """Close idle connections; connections in use are closed when given back."""
        with self._mutex:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()


def _readable(conn: RawConnection) -> bool:
    """Whether the server sent something to an idle connection (it closed or is closing it)."""
    try:
        ready, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(ready)


def run_batch(conn: RawConnection, statements: Sequence[Statement]) -> list[list[dict[str, Any]]]:
    """Run ``statements`` in one round trip; returns the rows of each (``[]`` for row-less ones).

    One simple-protocol query of ``;``-separated statements with client-side binding (psycopg's
    ``ClientCursor`` quotes every value): measured against a psycopg pipeline of the same statements,
    half the client CPU at the same server CPU, and the server's idle-in-transaction timer stays armed
    after it (a pipeline ends with a Flush that disarms it). A failure rolls back a transaction the
    statements left open (the server skipped the statements after the failing one) and re-raises.
    """
    missing = {s.statement.name: s.statement for s in statements if isinstance(s, Bound)}
    for name in conn.prepared:
        missing.pop(name, None)
    cur = psycopg.ClientCursor(conn, row_factory=dict_row)
    try:
        if missing:
            # Its own round trip, outside any transaction of the batch (PREPARE is not transactional:
            # recorded only once it ran, so a failed batch can never leave one half-known).
            cur.execute("; ".join(s.prepare_sql() for s in missing.values()))
            conn.prepared.update(missing)
        cur.execute("; ".join(cur.mogrify(stmt[0], dict(stmt[1])) for stmt in statements))
        results: list[list[dict[str, Any]]] = []
        while True:
            results.append(cur.fetchall() if cur.description is not None else [])
            if not cur.nextset():
                break
    except psycopg.Error:
        rollback_quietly(conn)
        raise
    return results


def rollback_quietly(conn: RawConnection) -> None:
    """End a transaction left open on ``conn`` (after a failure); never raises."""
    if conn.closed or conn.broken or conn.info.transaction_status == pq.TransactionStatus.IDLE:
        return
    try:
        conn.execute("ROLLBACK")
    except psycopg.Error:
        conn.close()
