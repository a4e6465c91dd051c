"""LISTEN/NOTIFY helpers on dedicated psycopg connections.

A LISTEN has to stay on one session for as long as the wait lasts, which does not fit SQLAlchemy's
pool (a pooled connection would be pinned and could be handed to someone else mid-wait). Waiters
therefore use their own autocommit psycopg connections, kept in a small per-owner idle list so a
contended lock does not open a connection per wait.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
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


class Listener:
    """One connection LISTENing on one channel (see :meth:`ListenerPool.listening`)."""

    def __init__(self, connection: psycopg.Connection[tuple[object, ...]], channel: str) -> None:
        self._connection = connection
        self.channel = channel

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a notification; True if one arrived.

        Notifications sent after LISTEN but before this call are not lost: psycopg keeps them in a
        backlog that this call returns first.
        """
        for _ in self._connection.notifies(timeout=max(0.0, timeout), stop_after=1):
            return True
        return False


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

    @contextmanager
    def listening(self, channel: str) -> Iterator[Listener]:
        """A :class:`Listener` whose LISTEN is active before the block starts.

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
            connection.execute(statement)
        broken = False
        try:
            yield Listener(connection, channel)
        except psycopg.Error:
            broken = True
            raise
        finally:
            if broken:
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
