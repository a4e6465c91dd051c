"""Deferred releases: a holder whose release failed because the metastore was unreachable keeps trying.

A lock row outlives a failed release by up to its lease (30 s by default), and every writer of the table,
on every replica and engine, waits that long. The holder is alive and still owns the row, so it retries
the release itself, in the background, once the metastore answers again:

* the retry is the ordinary owner- and token-checked release (:meth:`LockLease.release_statement`: it
  deletes the row only if it still holds this owner and fencing token, logs ``released`` and NOTIFYs
  waiters in the same statement), so a row someone else took over, or an operator released, is never
  touched. Its event's payload says ``"after_reconnect": true`` and how many ``attempts`` it took;
* a :class:`Settlement` (the commit path's recording of a snapshot published while the connection died)
  runs in the same transaction, after the lease was validated in it (``FOR KEY SHARE``: nobody can take
  the row over until it commits), and commits with the release: the work is done under the lease or
  not at all;
* attempts are spaced by capped exponential backoff with jitter (from :data:`BACKOFF_START_SECONDS` to
  :data:`BACKOFF_CAP_SECONDS`), and end when the release commits, when the row turns out gone or someone
  else's, or at the lease's local deadline (the last successful renewal plus the lease: by then any
  acquirer deletes the row anyway, by Java's expiry rule). A holder that is really gone (killed) has no
  retrier: its row is taken over after its lease, as before.

One daemon thread per :class:`~paimon_meta.metastore.lock.MetastoreLock`, started by the first deferred
release and exiting when none is left; :meth:`DeferredReleases.close` stops it.
"""

from __future__ import annotations

import enum
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg

from paimon_meta.db.pool import RawConnection, Statement, rollback_quietly, run_batch
from paimon_meta.errors import LockLostError

_log = logging.getLogger(__name__)

#: First wait between attempts; doubled after each failure, up to the cap, with jitter.
BACKOFF_START_SECONDS = 0.05
BACKOFF_CAP_SECONDS = 1.0

#: The failures that leave a release undone for reasons of the connection, not of the row: the server
#: down, restarting or refusing connections, the session terminated, a timeout. The release is retried.
CONNECTION_FAILURES: tuple[type[BaseException], ...] = (psycopg.OperationalError, psycopg.InterfaceError)


def connection_lost(exc: BaseException, conn: psycopg.Connection[Any] | None = None) -> bool:
    """Whether ``exc`` is a failure of the connection rather than of a statement: one of
    :data:`CONNECTION_FAILURES`, or any error after which ``conn`` is closed or broken (a session the
    server ended, e.g. ``idle_in_transaction_session_timeout``, raised as an ``InternalError``)."""
    if isinstance(exc, CONNECTION_FAILURES):
        return True
    return conn is not None and (conn.closed or conn.broken)


class ReleaseOutcome(enum.StrEnum):
    """How a deferred release ended."""

    #: Our row deleted (with the settlement's statements, if any), ``released`` logged, waiters woken.
    RELEASED = "released"
    #: The row was gone or someone else's: nothing of ours left to release (the settlement not run).
    GONE = "gone"
    #: The lease ran out before the metastore answered: the row is expired, any acquirer deletes it.
    EXPIRED = "expired"
    #: The lock was closed first (process shutting down): the row expires after its lease.
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class DeferredRelease:
    """What a deferred release did, as reported to observers (metrics) once it ended.

    ``settlement``: what the :class:`Settlement` reported (e.g. ``recorded``, ``handed_over``), None
    without one. ``waited_seconds``: from the failed release to the end.
    """

    lock_id: str
    owner: str
    fencing_token: int
    outcome: ReleaseOutcome
    attempts: int
    waited_seconds: float
    settlement: str | None = None


class Settlement(Protocol):
    """Work that must commit with a deferred release, under the still-valid lease (the commit path's
    recording of a published snapshot)."""

    def statements_in(self, conn: RawConnection) -> list[Statement]:
        """Called inside the release's transaction once the lease is validated in it; may read on
        ``conn``. Returns the statements to run before the release, in the same transaction."""
        ...

    def finished(self, outcome: ReleaseOutcome, results: list[list[dict[str, Any]]] | None) -> str:
        """Called once the release ended (on the retrier's thread). ``results``: the rows of
        :meth:`statements_in` (committed) when ``outcome`` is RELEASED, else None. Returns a short
        label of what became of the work, for logs and metrics."""
        ...


class Releasable(Protocol):
    """What the retrier needs of a lease (:class:`~paimon_meta.metastore.lock.LockLease`)."""

    lock_id: str
    owner: str
    fencing_token: int

    @property
    def deadline(self) -> float: ...

    def release_statement(self, extra: dict[str, Any] | None = None) -> Statement: ...

    def fenced_statements(self, *, idle_timeout_seconds: float | None = None) -> list[Statement]: ...

    def check_fenced(self, conn: RawConnection, rows: Sequence[list[dict[str, Any]]]) -> None: ...

    def confirm_release(self, deleted: bool) -> None: ...


@dataclass(slots=True)
class _Task:
    lease: Releasable
    settlement: Settlement | None
    failed_at: float
    due: float
    attempts: int = 0
    backoff: float = BACKOFF_START_SECONDS
    last_error: str = ""
    ended: bool = False
    done: threading.Event = field(default_factory=threading.Event)


Observer = Callable[[DeferredRelease], None]


class DeferredReleases:
    """The background retrier of failed releases of one lock (module docstring). Thread-safe."""

    _IDLE_EXIT_SECONDS = 30.0

    def __init__(self, connection: Callable[[], AbstractContextManager[RawConnection]]) -> None:
        self._connection = connection
        self._cond = threading.Condition()
        self._tasks: list[_Task] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self._observers: list[Observer] = []
        self._running: _Task | None = None
        self._random = random.Random()

    def observe(self, observer: Observer) -> None:
        """Call ``observer`` with the :class:`DeferredRelease` of every deferred release that ends (on
        the retrier's thread; it must not block). Used for metrics."""
        with self._cond:
            self._observers.append(observer)

    @property
    def pending(self) -> int:
        """Deferred releases not ended yet."""
        with self._cond:
            return len(self._tasks)

    def add(self, lease: Releasable, *, settlement: Settlement | None = None, error: object = "") -> None:
        """Retry releasing ``lease`` (whose release just failed with ``error``) until it ends (module
        docstring); with ``settlement``, commit its statements with the release."""
        now = time.monotonic()
        task = _Task(lease, settlement, failed_at=now, due=now, last_error=str(error))
        with self._cond:
            if self._closed:
                closed = True
            else:
                closed = False
                self._tasks.append(task)
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="paimon-lock-deferred-release", daemon=True
                    )
                    self._thread.start()
                self._cond.notify_all()
        if closed:
            self._end(task, ReleaseOutcome.CLOSED, None)

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until no deferred release is pending; True if none is."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def close(self, drain_seconds: float = 0.0) -> None:
        """Give pending releases up to ``drain_seconds`` to end, then stop; the rest end CLOSED (their
        rows expire after their leases). An attempt running meanwhile still ends on its own."""
        if drain_seconds > 0:
            self.wait_idle(drain_seconds)
        with self._cond:
            self._closed = True
            left = [t for t in self._tasks if t is not self._running]
            self._tasks = [t for t in self._tasks if t is self._running]
            self._cond.notify_all()
        for task in left:
            self._end(task, ReleaseOutcome.CLOSED, None)

    # -- the retrier thread ----------------------------------------------------------------------

    def _next(self) -> _Task | None:
        """The next task due (it stays queued, marked running, until it ends); None when the thread
        should exit."""
        with self._cond:
            self._running = None
            while True:
                if self._closed:
                    self._thread = None
                    return None
                if not self._tasks:
                    if not self._cond.wait(self._IDLE_EXIT_SECONDS) and not self._tasks:
                        self._thread = None
                        return None
                    continue
                task = min(self._tasks, key=lambda t: t.due)
                wait = task.due - time.monotonic()
                if wait <= 0:
                    self._running = task
                    return task
                self._cond.wait(wait)

    def _run(self) -> None:
        while (task := self._next()) is not None:
            if time.monotonic() >= task.lease.deadline:
                self._finish(task, ReleaseOutcome.EXPIRED, None)
                continue
            task.attempts += 1
            try:
                outcome, results = self._attempt(task)
            except Exception as exc:  # connection failures above all; anything else is retried too
                task.last_error = f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, CONNECTION_FAILURES):
                    _log.warning("deferred release of %s failed", task.lease.lock_id, exc_info=True)
                # Equal jitter: at least half the backoff, so retries of many holders spread out.
                delay = task.backoff * (0.5 + 0.5 * self._random.random())
                task.backoff = min(BACKOFF_CAP_SECONDS, task.backoff * 2)
                with self._cond:
                    task.due = time.monotonic() + delay
                    closed = self._closed
                if closed:
                    self._finish(task, ReleaseOutcome.CLOSED, None)
                continue
            self._finish(task, outcome, results)

    def _attempt(self, task: _Task) -> tuple[ReleaseOutcome, list[list[dict[str, Any]]] | None]:
        lease = task.lease
        extra = {
            "after_reconnect": True,
            "attempts": task.attempts,
            "deferred_ms": round((time.monotonic() - task.failed_at) * 1000.0, 3),
        }
        with self._connection() as conn:
            if task.settlement is None:
                deleted = bool(run_batch(conn, [lease.release_statement(extra)])[0])
                return (ReleaseOutcome.RELEASED if deleted else ReleaseOutcome.GONE), None
            fenced = lease.fenced_statements()
            try:
                lease.check_fenced(conn, run_batch(conn, fenced))
            except LockLostError:  # gone, someone else's, or expired: rolled back, the lease marked lost
                return ReleaseOutcome.GONE, None
            try:
                statements = task.settlement.statements_in(conn)
                results = run_batch(conn, [*statements, lease.release_statement(extra), ("COMMIT", {})])
            except BaseException:
                rollback_quietly(conn)
                raise
        # The row was validated FOR KEY SHARE in this transaction: the owner+token-checked delete found it.
        return (ReleaseOutcome.RELEASED if results[len(statements)] else ReleaseOutcome.GONE), results[
            : len(statements)
        ]

    def _finish(
        self, task: _Task, outcome: ReleaseOutcome, results: list[list[dict[str, Any]]] | None
    ) -> None:
        # Ended (settlement and observers included) before it leaves the queue: wait_idle() returning
        # means the work is done, not only the row.
        self._end(task, outcome, results)
        with self._cond:
            if task in self._tasks:
                self._tasks.remove(task)
            self._cond.notify_all()  # wait_idle

    def _end(self, task: _Task, outcome: ReleaseOutcome, results: list[list[dict[str, Any]]] | None) -> None:
        with self._cond:
            if task.ended:
                return
            task.ended = True
        lease = task.lease
        if outcome in (ReleaseOutcome.RELEASED, ReleaseOutcome.GONE):
            lease.confirm_release(outcome is ReleaseOutcome.RELEASED)
        waited = time.monotonic() - task.failed_at
        if outcome is ReleaseOutcome.RELEASED:
            _log.info(
                "released %s (token %s) after reconnecting: %d attempts, %.0f ms after the failed release",
                lease.lock_id,
                lease.fencing_token,
                task.attempts,
                waited * 1000,
            )
        else:
            _log.warning(
                "deferred release of %s (token %s) ended %s after %d attempts (%.0f ms; last error: %s)",
                lease.lock_id,
                lease.fencing_token,
                outcome.value,
                task.attempts,
                waited * 1000,
                task.last_error or "-",
            )
        settled: str | None = None
        if task.settlement is not None:
            try:
                settled = task.settlement.finished(outcome, results)
            except Exception:
                _log.exception("settling the deferred work of %s failed", lease.lock_id)
                settled = "error"
        report = DeferredRelease(
            lease.lock_id, lease.owner, lease.fencing_token, outcome, task.attempts, waited, settled
        )
        with self._cond:
            observers = list(self._observers)
        for observer in observers:
            try:
                observer(report)
            except Exception:
                _log.exception("a deferred-release observer failed")
        task.done.set()
