"""Per-request bounds on the metastore: a deadline, and cancellation of the running query.

A request of the service runs under a :class:`QueryBudget` (``bounded(budget)``; the service sets it per
route class: ``serve --statement-timeout``). Every transaction an engine with :func:`install` begins
while a budget is current starts with ``SET LOCAL statement_timeout`` = the time the budget has left
(so Postgres ends any statement at the deadline, whatever the process does), and is refused once the
budget is spent. :meth:`QueryBudget.cancel` (the client went away, or the deadline passed) marks the
budget spent and sends Postgres a cancel request for every statement its transactions are running, so a
loop of queries stops at its next query and a running one at once.

Outside a budget (background work, the CLI, tests) nothing changes. The budget travels in a context
variable: a request's worker thread (``anyio.to_thread``) sees its request's budget.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.pool import ConnectionPoolEntry

from paimon_meta.errors import RequestBoundError

log = logging.getLogger(__name__)

DEADLINE = "deadline"
DISCONNECT = "disconnect"
_KEY = "paimon_meta.budget"


class QueryBudget:
    """``seconds`` from now for the queries of one request of ``route_class`` (0 or less: no deadline,
    only cancellation). Thread-safe."""

    def __init__(self, route_class: str, seconds: float) -> None:
        self.route_class, self.seconds = route_class, seconds
        self.deadline = time.monotonic() + seconds if seconds > 0 else None
        self._reason: str | None = None
        self._lock = threading.Lock()
        self._running: set[Any] = set()  # the DBAPI connections of its open transactions

    @property
    def reason(self) -> str | None:
        """Why the budget is spent (``deadline``, ``disconnect``), or None while it is not."""
        if self._reason is None and self.deadline is not None and time.monotonic() >= self.deadline:
            self._reason = DEADLINE
        return self._reason

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def error(self) -> RequestBoundError:
        reason = self.reason or DEADLINE
        if reason == DISCONNECT:
            message = "the client went away: its request's queries were cancelled"
        else:
            message = (
                f"the request ran past its {self.seconds:g} s deadline ({self.route_class} requests, "
                "serve --statement-timeout); retry, or narrow it (a smaller page, a filter)"
            )
        return RequestBoundError(message, reason=reason, route_class=self.route_class, seconds=self.seconds)

    def check(self) -> None:
        """Raise :class:`RequestBoundError` when the budget is spent."""
        if self.reason is not None:
            raise self.error()

    def cancel(self, reason: str) -> None:
        """Spend the budget (first reason wins) and cancel the statements its transactions are running."""
        with self._lock:
            if self._reason is None:
                self._reason = reason
            running = list(self._running)
        for dbapi in running:
            try:
                dbapi.cancel_safe()
            except Exception as e:  # a cancel that cannot be sent: the statement timeout still holds
                log.warning("could not cancel a query of a %s request: %s", self.route_class, e)

    def _enter(self, dbapi: Any) -> None:
        with self._lock:
            self._running.add(dbapi)
        if self._reason is not None:  # cancelled while this transaction was starting
            self.cancel(self._reason)

    def _leave(self, dbapi: Any) -> None:
        with self._lock:
            self._running.discard(dbapi)


_CURRENT: contextvars.ContextVar[QueryBudget | None] = contextvars.ContextVar(
    "paimon_meta_query_budget", default=None
)


def current() -> QueryBudget | None:
    return _CURRENT.get()


@contextlib.contextmanager
def bounded(budget: QueryBudget | None) -> Iterator[QueryBudget | None]:
    """Run the block's metastore work under ``budget`` (None: without one)."""
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def install(engine: Engine) -> None:
    """Apply the current budget to every transaction ``engine`` begins (idempotent)."""
    if event.contains(engine, "begin", _begin):
        return
    event.listen(engine, "begin", _begin)
    event.listen(engine, "commit", _end)
    event.listen(engine, "rollback", _end)
    event.listen(engine.pool, "checkin", _checkin)


def _begin(conn: Connection) -> None:
    budget = _CURRENT.get()
    if budget is None:
        return
    budget.check()
    record = conn.connection
    dbapi = record.dbapi_connection
    if dbapi is None:
        return
    left = budget.remaining()
    if left is not None:
        # The driver opens the transaction with this statement (psycopg begins implicitly); SET LOCAL
        # ends with it.
        cursor = dbapi.cursor()
        try:
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, true)", (f"{max(1, int(left * 1000))}ms",)
            )
        finally:
            cursor.close()
    record.info[_KEY] = budget
    budget._enter(dbapi)


def _end(conn: Connection) -> None:
    if conn.closed or conn.invalidated:
        return
    record = conn.connection
    budget = record.info.pop(_KEY, None)
    if budget is not None:
        budget._leave(record.dbapi_connection)


def _checkin(dbapi: Any, record: ConnectionPoolEntry) -> None:
    budget = record.info.pop(_KEY, None)
    if budget is not None:
        budget._leave(dbapi)
