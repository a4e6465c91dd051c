"""Shared plumbing of the operations tools: who the operator is, the table lock, durations, progress.

Every tool that changes a table's files (recovery, expiration, orphan cleanup) holds the table's
metastore lock while it decides and deletes, so it never races a commit made through the lock. Writers
that ignore the metastore (Java without the JDBC lock, pypaimon) are not excluded; see docs/AUDIT.md.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import PaimonMetaError, ValidationError
from paimon_meta.metastore.events import MaintenanceEvent
from paimon_meta.metastore.lock import LockLease
from paimon_meta.metastore.registry import TableRow

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.table.table import FileStoreTable

log = logging.getLogger(__name__)

#: Receives one human-readable line per step of long work (the CLI prints them to stderr).
Progress = Callable[[str], Any]

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")
_AGE_UNITS = {
    "": 1.0,
    "ms": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


class RefusedError(PaimonMetaError):
    """The operation was refused to protect a live writer (e.g. releasing a heartbeating lock)."""


def quiet(_line: str) -> None:
    """A :data:`Progress` that drops everything."""


def parse_age(value: str) -> float:
    """``"60s"``, ``"15 min"``, ``"1h"``, ``"1d"``, ``"250ms"`` -> seconds. A bare number is seconds.

    Raises:
        ValidationError: not a duration.
    """
    m = _AGE.match(value.lower())
    if m is None or m.group(2) not in _AGE_UNITS:
        raise ValidationError(
            f"{value!r} is not a duration (examples: 90s, 15min, 2h, 1d; a bare number means seconds)",
            value=value,
        )
    return float(m.group(1)) * _AGE_UNITS[m.group(2)]


def operator_identity() -> str:
    """``user@host`` of whoever runs the tool: recorded with every forced lock release."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers with an arbitrary uid)
        user = os.environ.get("USER") or f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def ops_owner(purpose: str) -> str:
    """A lock owner string for a tool run: says what took the lock, who ran it and where."""
    return f"paimon-meta {purpose}:{operator_identity()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def db_now(engine: Engine) -> datetime:
    """The metastore's clock (event timestamps are the server's, so ages are computed against it)."""
    with engine.connect() as conn:
        value: datetime = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
    return value


def resolve_table(catalog: MetastoreCatalog, identifier: str) -> tuple[TableRow, FileStoreTable]:
    """The registry row and the table of ``db.table`` (``TableNotFoundError`` if not registered)."""
    from paimon_meta.model.identifier import split_identifier

    db, name = split_identifier(identifier)
    row = catalog.registry.get_table_row(db, name)
    return row, catalog.get_table(identifier)


def all_table_identifiers(catalog: MetastoreCatalog) -> list[str]:
    """Every registered table of the catalog, as ``db.table``, sorted."""
    return [f"{db}.{t}" for db in catalog.list_databases() for t in catalog.list_tables(db)]


@contextmanager
def table_lock(
    catalog: MetastoreCatalog,
    row: TableRow,
    purpose: str,
    *,
    progress: Progress = quiet,
    timeout_seconds: float | None = None,
) -> Iterator[LockLease]:
    """Hold the table's metastore lock (lease + heartbeat) for the body.

    The lock is the one every writer of the catalog takes (Java's ``<catalog-key>.<db>.<table>``), so
    while the body runs no commit of ours, and no Java writer using the JDBC lock, can publish.
    """
    lock_id = catalog.registry.lock_id(row.database, row.name)
    settings = catalog.lock_settings
    timeout = settings.acquire_timeout_seconds if timeout_seconds is None else timeout_seconds
    holder = catalog.lock.get_lock(lock_id)
    if holder is not None:
        who = holder.owner or "a Java writer"
        state = "stale, waiting for its lease to expire" if holder.stale else "waiting"
        progress(f"lock {lock_id} is held by {who} ({state}, up to {timeout:.0f}s)")
    lease = catalog.lock.acquire(
        lock_id,
        owner=ops_owner(purpose),
        lease_seconds=settings.lease_seconds,
        timeout_seconds=timeout,
    )
    with lease:
        yield lease


class MaintenanceRun:
    """The audit record of one maintenance run (``paimon_maintenance_events``): ``started`` with its
    settings when created; :meth:`record` of ``finished`` or, on an exception, ``failed``. Recording
    problems are logged, never raised: the run's effect on storage is what matters, and a lost
    ``finished`` leaves an ``unfinished`` row that says so."""

    def __init__(
        self,
        catalog: MetastoreCatalog,
        row: TableRow,
        operation: MaintenanceOperation,
        *,
        dry_run: bool,
        principal: str | None = None,
    ) -> None:
        self.events = catalog.events
        self.row = row
        self.operation = operation
        self.dry_run = dry_run
        self.run_id = uuid.uuid4()
        self.operator = operator_identity()
        self.principal = principal

    def record(self, event_type: MaintenanceEventType, payload: dict[str, Any]) -> None:
        event = MaintenanceEvent(
            run_id=self.run_id,
            table_id=self.row.table_id,
            table_identifier=self.row.identifier,
            operation=self.operation,
            event_type=event_type,
            operator=self.operator,
            dry_run=self.dry_run,
            payload=payload,
            principal=self.principal,
        )
        try:
            self.events.append_maintenance(event)
        except SQLAlchemyError:  # auditing must not turn a done run into a failure
            log.warning(
                "could not record %s %s of %s", self.operation, event_type, self.row.identifier, exc_info=True
            )


@contextmanager
def maintenance_run(
    catalog: MetastoreCatalog,
    row: TableRow,
    operation: MaintenanceOperation,
    *,
    dry_run: bool,
    settings: dict[str, Any],
    principal: str | None = None,
) -> Iterator[MaintenanceRun]:
    """Record a maintenance run around the body: ``started`` (``settings``) now, ``failed`` (the error)
    if the body raises, else whatever the body passes to ``run.record(FINISHED, ...)``."""
    run = MaintenanceRun(catalog, row, operation, dry_run=dry_run, principal=principal)
    run.record(MaintenanceEventType.STARTED, settings)
    try:
        yield run
    except BaseException as e:
        run.record(MaintenanceEventType.FAILED, {"error": type(e).__name__, "message": str(e)})
        raise
