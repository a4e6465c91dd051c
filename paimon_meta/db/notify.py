"""LISTEN/NOTIFY helpers on dedicated psycopg connections.

A LISTEN has to stay on one session for as long as the wait lasts, which does not fit SQLAlchemy's
pool (a pooled connection would be pinned and could be handed to someone else mid-wait). Waiters
therefore use their own autocommit psycopg connections, kept in a small per-owner idle list so a
contended lock does not open a connection per wait. A listener whose connection breaks (a server
restart) re-opens it and LISTENs again by itself, so waiters are woken by NOTIFY again once the server
is back (:class:`Listener`).
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

from paimon_meta.errors import ValidationError

_log = logging.getLogger(__name__)

_CHANNEL_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def channel_for(prefix: str, key: str) -> str:
    """A valid channel name ``<prefix>_<hash of key>``; ``key`` may be any string."""
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]
    channel = f"{prefix}_{digest}"
    if not _CHANNEL_RE.match(channel):
        raise ValidationError(f"invalid notification channel {channel!r}", channel=channel)
    return channel


#: Waits between attempts to re-open a broken LISTEN connection: doubled after each failure, with jitter.
RECONNECT_START_SECONDS = 0.05
RECONNECT_CAP_SECONDS = 1.0


class Listener:
    """One connection LISTENing on one channel (see :meth:`ListenerPool.listening`).

    When its connection breaks (server restart, session terminated), :meth:`wait` re-opens it and
    LISTENs again, with capped exponential backoff and jitter, sleeping meanwhile (the caller polls):
    waiters get notifications again as soon as the server is back, instead of polling for the rest of
    their wait.
    """

    def __init__(
        self,
        pool: ListenerPool,
        connection: psycopg.Connection[tuple[object, ...]] | None,
        channel: str,
    ) -> None:
        self._pool = pool
        self._connection = connection
        self.channel = channel
        #: How often the connection broke, and how often it was re-opened.
        self.broken = 0
        self.reconnects = 0
        self._backoff = RECONNECT_START_SECONDS
        self._next_try = 0.0
        self._random = random.Random()

    @property
    def connection(self) -> psycopg.Connection[tuple[object, ...]] | None:
        """The LISTENing connection; None while it is broken and not re-opened yet."""
        return self._connection

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a notification; True if one arrived, or if a broken
        connection was re-opened and LISTENs again (a notification sent while it was down is lost:
        the caller must look again, as after a wake-up).

        Notifications sent after LISTEN but before this call are not lost: psycopg keeps them in a
        backlog that this call returns first.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        if self._connection is not None:
            try:
                for _ in self._connection.notifies(timeout=max(0.0, timeout), stop_after=1):
                    return True
                return False
            except psycopg.Error as exc:
                _log.warning("LISTEN %s: connection failed, re-opening it: %s", self.channel, exc)
                self._connection.close()
                self._connection = None
                self.broken += 1
                self._backoff = RECONNECT_START_SECONDS
                self._next_try = time.monotonic()
        return self._reconnect(deadline)

    def _reconnect(self, deadline: float) -> bool:
        """Try to re-open the connection until ``deadline``, at the backoff's pace; True once it LISTENs."""
        while True:
            now = time.monotonic()
            if self._next_try > now:
                if self._next_try >= deadline:
                    time.sleep(max(0.0, deadline - now))
                    return False
                time.sleep(self._next_try - now)
            try:
                self._connection = self._pool.open_listening(self.channel)
            except psycopg.Error as exc:
                _log.debug("LISTEN %s: re-opening failed: %s", self.channel, exc)
                self._next_try = time.monotonic() + self._backoff * (0.5 + 0.5 * self._random.random())
                self._backoff = min(RECONNECT_CAP_SECONDS, self._backoff * 2)
                if time.monotonic() >= deadline:
                    return False
                continue
            self.reconnects += 1
            _log.info("LISTEN %s: connection re-opened", self.channel)
            return True


class ListenerPool:
    """Dedicated LISTEN connections for one conninfo; thread-safe; close() when done."""

    def __init__(self, conninfo: str, *, max_idle: int = 4, connect_timeout: int = 10) -> None:
        self._conninfo = conninfo
        self._max_idle = max_idle
        self._connect_timeout = connect_timeout
        self._idle: list[psycopg.Connection[tuple[object, ...]]] = []
        self._mutex = threading.Lock()
        self._closed = False

    def _take(self) -> psycopg.Connection[tuple[object, ...]]:
        with self._mutex:
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed:
                    return connection
        return psycopg.connect(
            self._conninfo,
            autocommit=True,
            connect_timeout=self._connect_timeout,
            application_name="paimon_meta_listen",
        )

    def _give_back(self, connection: psycopg.Connection[tuple[object, ...]]) -> None:
        try:
            connection.execute("UNLISTEN *")
            # Drop notifications that arrived for the old channel: a stale one would only cause a
            # spurious wake-up, but there is no reason to keep it.
            for _ in connection.notifies(timeout=0):
                pass
        except psycopg.Error:
            connection.close()
            return
        with self._mutex:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(connection)
                return
        connection.close()

    def open_listening(self, channel: str) -> psycopg.Connection[tuple[object, ...]]:
        """A connection (idle or new) that LISTENs on ``channel``; an idle one that died meanwhile
        (server restart) is replaced by a fresh one.

        Raises:
            ValidationError: ``channel`` is not a plain lower-case identifier.
            psycopg.Error: no connection could be opened.
        """
        if not _CHANNEL_RE.match(channel):
            raise ValidationError(f"invalid notification channel {channel!r}", channel=channel)
        statement = sql.SQL("LISTEN {}").format(sql.Identifier(channel))
        connection = self._take()
        try:
            connection.execute(statement)
        except psycopg.OperationalError:
            # An idle connection may have died (server restart); one fresh retry.
            connection.close()
            connection = self._take()
            try:
                connection.execute(statement)
            except BaseException:
                connection.close()
                raise
        return connection

    @contextmanager
    def listening(self, channel: str, *, lazy: bool = False) -> Iterator[Listener]:
        """A :class:`Listener` whose LISTEN is active before the block starts; it re-opens its
        connection by itself if that breaks (see :class:`Listener`). ``lazy``: if no connection can be
        opened now, the listener starts without one and keeps trying in :meth:`Listener.wait` (the
        caller polls meanwhile) instead of raising.

        Raises:
            ValidationError: ``channel`` is not a plain lower-case identifier.
            psycopg.Error: no connection could be opened (not with ``lazy``).
        """
        try:
            connection: psycopg.Connection[tuple[object, ...]] | None = self.open_listening(channel)
        except psycopg.Error:
            if not lazy:
                raise
            connection = None
        listener = Listener(self, connection, channel)
        if connection is None:
            listener.broken += 1
        broken = False
        try:
            yield listener
        except psycopg.Error:
            broken = True
            raise
        finally:
            connection = listener.connection
            if connection is not None:
                if broken or connection.broken:
                    connection.close()
                else:
                    self._give_back(connection)

    def close(self) -> None:
        """Close idle connections; connections in use are closed when their wait ends."""
        with self._mutex:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
