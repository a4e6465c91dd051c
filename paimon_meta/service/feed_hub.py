"""One change-feed reader per replica: the live streams share it instead of each polling the log.

The hub LISTENs on ``FEED_CHANNEL`` (migration 0011's trigger NOTIFYs it from every transaction that
writes events) and, when woken or every ``FALLBACK_SECONDS`` (a notification lost while its connection
was down is caught up then), reads the log after its own position (``read_feed``: every event of the
catalog, unfiltered) into a ring of the newest ``capacity`` events, then wakes the streams waiting on it.

Invariant (the ring is gap-free): the ring holds every event of the feed after ``start`` up to ``tail``,
in feed order. It starts empty at the feed's head (``feed_head``: every event that becomes visible later
sorts after it) and is extended only by ``read_feed`` from its own tail, which never skips an event (the
horizon rule of metastore/feed.py); dropping the oldest events moves ``start`` up to the last dropped.
Hence a stream at position ``p >= start`` gets from :meth:`FeedHub.after` exactly the events after ``p``
up to the tail, and a stream behind ``start`` (it resumed from an old id, or fell behind while its
client read slowly) reads the log itself, page by page, until it is in the ring again.

The log is the source of truth; the hub is only a cache of its newest part. A hub that cannot read the
log (Postgres is down) retries with backoff; the streams meanwhile wait and send heartbeats.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.db.notify import Listener, ListenerPool
from paimon_meta.metastore.feed import FEED_CHANNEL, FeedEvent, Position, feed_head, read_feed

log = logging.getLogger(__name__)

#: Seconds between reads of the log when no notification arrives.
FALLBACK_SECONDS = 1.0
#: The least time between two reads of the log when notifications keep coming (a read takes every
#: event committed meanwhile; this bounds the hub's queries under heavy commit load).
MIN_READ_SECONDS = 0.02
#: How often the reader looks at the age of the oldest transaction on the server (what holds the feed
#: back; a metric).
OLDEST_CHECK_SECONDS = 1.0
_OLDEST_SQL = text(
    "SELECT EXTRACT(EPOCH FROM max(clock_timestamp() - xact_start))::float8 FROM pg_stat_activity "
    "WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()"
)
#: Events the ring keeps (a stream further behind reads the log itself).
DEFAULT_CAPACITY = 10_000
#: Events read per query while catching up.
_READ_BATCH = 1000
_BACKOFF_START, _BACKOFF_CAP = 0.2, 5.0
#: How often a waiting reader looks whether it was closed.
_STOP_CHECK = 0.25


@dataclass(frozen=True, slots=True)
class HubStats:
    """What the hub has done (for metrics and tests)."""

    reads: int
    events: int
    wakeups: int
    failures: int
    start: Position
    tail: Position
    size: int
    #: Age of the oldest transaction with an id on the Postgres server (that the metastore's role may
    #: see), as of the last look: events younger than it are held back (metastore/feed.py's horizon).
    oldest_transaction_seconds: float


class FeedHub:
    """The shared reader of one catalog's feed on this replica (module docstring). Thread-safe; its
    waits are asyncio-native, so a waiting stream holds no worker thread."""

    def __init__(
        self, engine: Engine, catalog_key: str, *, capacity: int = DEFAULT_CAPACITY, default: bool = False
    ) -> None:
        """``default``: ``catalog_key`` is the service's default catalog (its feed also has the governance
        events naming no catalog, metastore/feed.py)."""
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._engine, self._catalog_key, self._capacity = engine, catalog_key, capacity
        self._default = default
        self._listeners = ListenerPool(libpq_conninfo(engine.url), max_idle=1)
        self._lock = threading.Lock()
        self._events: list[FeedEvent] = []
        self._positions: list[Position] = []
        self._rendered: dict[Position, str] = {}  # of the ring's events only
        self._start: Position | None = None  # None until the first read of the tail
        self._tail: Position | None = None
        self._seq = 0
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._stop = threading.Event()
        self._started = False
        self._thread = threading.Thread(target=self._run, name="paimon-feed-hub", daemon=True)
        self._reads = self._read_events = self._wakeups = self._failures = 0
        self._oldest, self._oldest_at = 0.0, 0.0

    # ---- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the reader thread (idempotent)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._started:
            self._thread.join(timeout)
        self._listeners.close()
        self._wake()

    # ---- what streams call ---------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether the hub has read the feed's tail (before that, streams read the log themselves)."""
        return self._start is not None

    def after(self, position: Position) -> tuple[list[FeedEvent], Position] | None:
        """The ring's events after ``position`` and the position to continue from (the tail, or
        ``position`` itself when it is ahead of this replica); None when ``position`` is behind the ring
        (or the hub is not ready): then the caller reads the log itself."""
        with self._lock:
            start, tail = self._start, self._tail
            if start is None or tail is None or position < start:
                return None
            if position >= tail:
                return [], position
            i = bisect.bisect_right(self._positions, position)
            return self._events[i:], tail

    def render(self, event: FeedEvent, make: Callable[[FeedEvent], str]) -> str:
        """``make(event)``, made once per ring event for all the replica's streams (50 streams of one
        event serialise it once); an event outside the ring is made each time."""
        text = self._rendered.get(event.position)
        if text is None:
            text = make(event)
            with self._lock:
                i = bisect.bisect_left(self._positions, event.position)
                if i < len(self._positions) and self._positions[i] == event.position:
                    self._rendered[event.position] = text
        return text

    @property
    def seq(self) -> int:
        """Changes whenever events were added (pass it to :meth:`changed`)."""
        return self._seq

    async def changed(self, seen: int, timeout: float) -> None:
        """Return once events were added after ``seen`` (a :attr:`seq`), or after ``timeout`` seconds."""
        if self._seq != seen:
            return
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            if self._seq != seen:
                return
            self._waiters.add(waiter)
        try:
            with anyio.move_on_after(timeout):
                await waiter[1].wait()
        finally:
            with self._lock:
                self._waiters.discard(waiter)

    def stats(self) -> HubStats:
        with self._lock:
            start = self._start or Position(0, 0, 0)
            tail = self._tail or start
            return HubStats(
                self._reads,
                self._read_events,
                self._wakeups,
                self._failures,
                start,
                tail,
                len(self._events),
                self._oldest,
            )

    # ---- the reader thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = _BACKOFF_START
        jitter = random.Random()
        with self._listeners.listening(FEED_CHANNEL, lazy=True) as listener:
            while not self._stop.is_set():
                try:
                    self._read_once()
                    backoff = _BACKOFF_START
                except SQLAlchemyError as e:
                    self._failures += 1
                    log.warning("change feed: reading the log failed (retrying in %.1fs): %s", backoff, e)
                    self._stop.wait(backoff * (0.5 + 0.5 * jitter.random()))
                    backoff = min(_BACKOFF_CAP, backoff * 2)
                    continue
                self._wait(listener)

    def _wait(self, listener: Listener) -> None:
        """Until a notification, ``FALLBACK_SECONDS`` or :meth:`close` (checked every ``_STOP_CHECK``)."""
        deadline = time.monotonic() + FALLBACK_SECONDS
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if listener.wait(min(left, _STOP_CHECK)):
                self._wakeups += 1
                # Many commits notify at once: take the notifications that came meanwhile, and read at
                # most every MIN_READ_SECONDS (one read then takes them all).
                self._stop.wait(MIN_READ_SECONDS)
                for _ in range(10_000):
                    if not listener.wait(0):
                        break
                return

    def _read_once(self) -> None:
        if time.monotonic() - self._oldest_at >= OLDEST_CHECK_SECONDS:
            with self._engine.connect() as conn:
                self._oldest = float(conn.execute(_OLDEST_SQL).scalar() or 0.0)
            self._oldest_at = time.monotonic()
        if self._tail is None:
            tail = feed_head(self._engine)
            with self._lock:
                self._start = self._tail = tail
        assert self._tail is not None
        while not self._stop.is_set():
            events, cursor = read_feed(
                self._engine,
                catalog_key=self._catalog_key,
                default=self._default,
                after=self._tail,
                limit=_READ_BATCH,
            )
            self._reads += 1
            if cursor == self._tail:
                return
            self._append(events, cursor)
            if len(events) < _READ_BATCH:
                return

    def _append(self, events: list[FeedEvent], cursor: Position) -> None:
        with self._lock:
            self._events.extend(events)
            self._positions.extend(e.position for e in events)
            self._tail = cursor
            excess = len(self._events) - self._capacity
            if excess > 0:
                # Trim in chunks (a quarter of the capacity) so appends stay amortised O(1).
                drop = min(len(self._events), excess + self._capacity // 4)
                self._start = self._positions[drop - 1]
                for gone in self._positions[:drop]:
                    self._rendered.pop(gone, None)
                del self._events[:drop]
                del self._positions[:drop]
            self._read_events += len(events)
            self._seq += 1
        self._wake()

    def wake_all(self) -> None:
        """Wake every stream waiting for events (they look at their verdict again: a drain ends them)."""
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # its loop is closed: the stream is gone
                loop.call_soon_threadsafe(event.set)
