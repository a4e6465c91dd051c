"""Which metastore failures are transient, and which of them are safe to repeat.

The service answers 503 + ``Retry-After`` (never 500) for every transient failure, and repeats a request
on the server first when that is safe. The driver raises these failures as psycopg errors, wrapped by
SQLAlchemy (``exc.orig``) and sometimes by paimon_meta (``MetastoreUnavailableError`` from the driver
error): :func:`fault_of` walks the chain.

Kinds, and what a repeat may do:

- ``unavailable``: no connection could be made (refused, reset during the handshake, the server starting
  up or shutting down, SQLAlchemy's pool timing out). Nothing was sent: any request may be repeated.
- ``serialization``/``deadlock``: Postgres rolled the transaction back (40001, 40P01). Nothing of it
  took effect: any request may be repeated.
- ``lock_timeout``/``canceled``: a statement waited past ``lock_timeout``/``statement_timeout`` (55P03,
  57014); its transaction was rolled back.
- ``reset``: the connection died mid-operation (admin shutdown, crash, a network reset). A COMMIT may or
  may not have happened: only reads may be repeated.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import psycopg
import psycopg.errors as pg
import sqlalchemy.exc as sa


class FaultKind(enum.StrEnum):
    UNAVAILABLE = "unavailable"
    SERIALIZATION = "serialization"
    DEADLOCK = "deadlock"
    LOCK_TIMEOUT = "lock_timeout"
    CANCELED = "canceled"
    RESET = "reset"


#: Kinds after which nothing of the request took effect (any request may be repeated).
NOTHING_DONE = frozenset(
    {
        FaultKind.UNAVAILABLE,
        FaultKind.SERIALIZATION,
        FaultKind.DEADLOCK,
        FaultKind.LOCK_TIMEOUT,
        FaultKind.CANCELED,
    }
)

# psycopg 3 prefixes a failed connection attempt with this (the libpq message follows).
_CONNECT_FAILED = "connection failed"
# What libpq says when a server is starting up or shutting down and refuses new sessions.
_REFUSING = (
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "Connection refused",
)


@dataclass(frozen=True, slots=True)
class Fault:
    """A transient metastore failure: its kind and the driver's one-line message."""

    kind: FaultKind
    message: str

    @property
    def nothing_done(self) -> bool:
        return self.kind in NOTHING_DONE

    def repeatable(self, *, read_only: bool) -> bool:
        """Whether the request that met it may be run again: always for a read, and for a write only
        when nothing of it took effect."""
        return read_only or self.nothing_done


def fault_of(error: BaseException) -> Fault | None:
    """The transient metastore failure behind ``error`` (itself, its ``orig`` or its causes), or None
    when it is none (a bug, a constraint violation, bad SQL: those are not retried and not 503)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kind = _kind(current)
        if kind is not None:
            return Fault(kind, _first_line(current))
        orig = getattr(current, "orig", None)
        # Explicit causes only: a bug raised while handling a driver error is a bug, not a fault.
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return None


#: Errors whose class says the kind, checked in order (subclasses of OperationalError before it).
_BY_CLASS: tuple[tuple[type[BaseException], FaultKind], ...] = (
    (sa.TimeoutError, FaultKind.UNAVAILABLE),  # the pool: every connection busy for pool_timeout
    (pg.SerializationFailure, FaultKind.SERIALIZATION),
    (pg.DeadlockDetected, FaultKind.DEADLOCK),
    (pg.LockNotAvailable, FaultKind.LOCK_TIMEOUT),
    (pg.QueryCanceled, FaultKind.CANCELED),
    (pg.CannotConnectNow, FaultKind.UNAVAILABLE),
)


def _kind(e: BaseException) -> FaultKind | None:
    for cls, kind in _BY_CLASS:
        if isinstance(e, cls):
            return kind
    if isinstance(e, psycopg.OperationalError):
        # Admin/crash shutdown, a reset, a closed connection used again, or a failed connection
        # attempt (no SQLSTATE: libpq's own message).
        text = str(e)
        if e.sqlstate is None and (text.startswith(_CONNECT_FAILED) or any(r in text for r in _REFUSING)):
            return FaultKind.UNAVAILABLE
        return FaultKind.RESET
    if isinstance(e, psycopg.InterfaceError):  # e.g. "the connection is closed"
        return FaultKind.RESET
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
