"""No request holds a worker longer than its deadline: each request runs under a budget of its route
class (paimon_meta.db.budget), watched while it runs.

Route classes (``serve --statement-timeout CLASS=SECONDS``; 0 turns a class's deadline off):

- ``feed``: pages of the change feed (``GET .../events`` without ``Accept: text/event-stream``);
- ``read``: every other GET or HEAD (catalog reads, listings, audit routes, the console's pages);
- ``write``: every other method (creates, alters, drops, commits).

Each transaction of the request starts with ``statement_timeout`` = what its budget has left, so
Postgres ends a statement at the deadline (the request answers 503 + ``Retry-After`` with the
protocol's error body). A read is also cancelled as soon as its deadline passes or its client goes
away (the watcher below sends Postgres a cancel request for its running statement; a loop of queries
stops at its next one). A write is never abandoned midway because its client left: its outcome must
be settled, so it only has the statement timeout (and its lock's own timeouts).

Live streams (SSE) are not requests of a class: each read of the log a stream makes is bounded by the
``feed`` class's deadline and the feed's scan cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import anyio
from starlette.types import Message, Receive

from paimon_meta.db.budget import DEADLINE, DISCONNECT, QueryBudget
from paimon_meta.errors import ValidationError
from paimon_meta.rest import paths

FEED: Final = "feed"
READ: Final = "read"
WRITE: Final = "write"
CLASSES = (FEED, READ, WRITE)
#: Seconds per class when ``serve`` names none (README "Hardening").
DEFAULT_STATEMENT_TIMEOUTS: Mapping[str, float] = {FEED: 10.0, READ: 30.0, WRITE: 120.0}
_FEED_SUFFIX = paths.CATALOG_EVENTS.rsplit("}", 1)[-1]  # "/events"
_FEED_PREFIX = paths.CATALOG_EVENTS.split("{", 1)[0]  # "/v1/"


def route_class(method: str, path: str) -> str:
    """The class of a request (module docstring)."""
    if method not in ("GET", "HEAD"):
        return WRITE
    if path.startswith(_FEED_PREFIX) and path.endswith(_FEED_SUFFIX) and path.count("/") == 3:
        return FEED
    return READ


def parse_statement_timeouts(specs: list[str] | None) -> dict[str, float]:
    """``CLASS=SECONDS`` items over the defaults (``serve --statement-timeout``)."""
    out = dict(DEFAULT_STATEMENT_TIMEOUTS)
    for spec in specs or ():
        name, sep, value = spec.partition("=")
        name = name.strip()
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not sep or name not in CLASSES or not 0 <= seconds <= 86_400:
            raise ValidationError(
                f"--statement-timeout {spec!r}: expected CLASS=SECONDS with CLASS one of "
                f"{', '.join(CLASSES)} and SECONDS between 0 (no deadline) and 86400",
                field="--statement-timeout",
            )
        out[name] = seconds
    return out


class Watcher:
    """Watches one request while it runs: owns the connection's ``receive`` (the app reads its messages
    through :meth:`receive`), and cancels ``budget`` when the client disconnects (reads only) or when
    its deadline passes (reads only; a write keeps only its statement timeout)."""

    def __init__(self, receive: Receive, budget: QueryBudget, *, cancel_reads: bool) -> None:
        self._receive, self.budget, self.cancel_reads = receive, budget, cancel_reads
        self._pending: list[Message] = []
        self._arrived = anyio.Event()
        self.disconnected = False

    async def run(self) -> None:
        """Until the client disconnects (or, for a read, the deadline passes); cancelled when the
        request is over."""
        left = self.budget.remaining()
        with anyio.move_on_after(left if left is not None and self.cancel_reads else None):
            while True:
                message = await self._receive()
                if message["type"] == "http.disconnect":
                    self.disconnected = True
                    if self.cancel_reads:
                        self.budget.cancel(DISCONNECT)
                    self._pending.append(message)
                    self._arrived.set()
                    return
                self._pending.append(message)
                self._arrived.set()
        self.budget.cancel(DEADLINE)

    async def receive(self) -> Message:
        while not self._pending:
            await self._arrived.wait()
            if not self._pending:
                self._arrived = anyio.Event()
        message = self._pending[0]
        if message["type"] != "http.disconnect":  # a disconnect is answered to every later call
            self._pending.pop(0)
        if not self._pending:
            self._arrived = anyio.Event()
        return message
