"""Audit queries behind ``paimon-meta commits``, ``events`` and ``snapshots`` (docs/AUDIT.md has the
same questions as SQL to paste into psql). All statements are constant SQL with bound parameters."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text

from paimon_meta.errors import ValidationError
from paimon_meta.ops.common import resolve_table

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.table.table import FileStoreTable

_HISTORY = text(
    "SELECT h.commit_id, h.commit_user, h.commit_identifier, h.commit_kind, h.outcome, h.snapshot_id, "
    "h.attempts, h.retries, h.conflicts, h.conflict_check_ms, h.elapsed_ms::float8 AS elapsed_ms, "
    "h.final_reason, h.first_event_at, h.last_event_at, h.principal "
    "FROM paimon_commit_history h WHERE h.table_id = :table_id "
    "ORDER BY h.first_event_at DESC, h.commit_id LIMIT :limit OFFSET :offset"
)
#: Only the events of tables of one catalog (``:catalog_key``; NULL: every catalog): a table id is of the
#: catalog whose table (registered, or in its recycle bin) has it (issue 35: ``db.t`` of two catalogs).
_OF_CATALOG = (
    "(CAST(:catalog_key AS text) IS NULL OR table_id IN ("
    "SELECT t.table_id FROM paimon_tables t WHERE t.catalog_key = :catalog_key"
    " UNION ALL SELECT d.table_id FROM paimon_dropped_tables d WHERE d.catalog_key = :catalog_key)) "
)
_EVENTS = text(
    "SELECT event_id, created_at, table_identifier, commit_id, event_type, attempt, commit_user, "
    "commit_identifier, commit_kind, snapshot_id, duration_ms, payload "
    "FROM paimon_commit_events "
    "WHERE (CAST(:table AS text) IS NULL OR table_identifier = :table) "
    "AND (CAST(:commit_id AS uuid) IS NULL OR commit_id = :commit_id) AND "
    + _OF_CATALOG
    + "ORDER BY event_id DESC LIMIT :limit OFFSET :offset"
)
_LOCK_EVENTS = text(
    "SELECT event_id, created_at, lock_id, event_type, owner, fencing_token, hostname, pid, operator, "
    "reason, previous_owner, previous_fencing_token, wait_ms, payload "
    "FROM paimon_lock_events WHERE (CAST(:lock_id AS text) IS NULL OR lock_id = :lock_id) "
    "ORDER BY event_id DESC LIMIT :limit OFFSET :offset"
)
_MAINTENANCE = text(
    "SELECT run_id, table_identifier, operation, outcome, dry_run, operator, started_at, ended_at, "  # noqa: S608 - constants
    "elapsed_ms, settings, result FROM paimon_maintenance_history "
    "WHERE (CAST(:table AS text) IS NULL OR table_identifier = :table) AND "
    + _OF_CATALOG
    + "ORDER BY started_at DESC, run_id LIMIT :limit OFFSET :offset"
)
_QUEUE_RUNS = text(
    "SELECT run_id, table_identifier, settings ->> 'kind' AS kind, "
    "coalesce(result ->> 'outcome', outcome) AS outcome, started_at, elapsed_ms, settings, result "
    "FROM paimon_maintenance_history WHERE operation = 'maintain' "
    "AND (CAST(:table AS text) IS NULL OR table_identifier = :table) "
    "ORDER BY started_at DESC, run_id LIMIT :limit"
)
_RECORDED = text(
    "SELECT snapshot_id, event_type, commit_id FROM paimon_commit_events "
    "WHERE table_id = :table_id AND branch = 'main' AND snapshot_id IS NOT NULL "
    "AND event_type IN ('snapshot_published', 'external', 'recovered') ORDER BY event_id"
    " LIMIT :limit OFFSET :offset"
)


def commit_history(
    engine: Engine, table_id: int, *, limit: int = 50, offset: int = 0
) -> list[dict[str, Any]]:
    """The latest ``limit`` commits of a table (``paimon_commit_history``) after skipping the ``offset``
    newest, newest first: by its id, so from before a rename too, and none of an earlier table of the
    same name. Each row names the ``principal`` that prepared the commit (None for commits made without
    the service)."""
    params = {"table_id": table_id, "limit": limit, "offset": offset}
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(_HISTORY, params)]


def commit_events(
    engine: Engine,
    *,
    table: str | None = None,
    commit_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
    catalog_key: str | None = None,
) -> list[dict[str, Any]]:
    """The latest ``limit`` commit events (optionally of one table and/or one commit; of the tables of the
    catalog ``catalog_key``, None: any) after skipping the ``offset`` newest, oldest first.

    Raises:
        ValidationError: ``commit_id`` is not a UUID.
    """
    cid = None
    if commit_id is not None:
        try:
            cid = uuid.UUID(commit_id)
        except ValueError as e:
            raise ValidationError(f"commit id {commit_id!r} is not a UUID") from e
    params = {"table": table, "commit_id": cid, "limit": limit, "offset": offset, "catalog_key": catalog_key}
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(_EVENTS, params)]
    return rows[::-1]


def maintenance_history(
    engine: Engine,
    *,
    table: str | None = None,
    limit: int = 50,
    offset: int = 0,
    catalog_key: str | None = None,
) -> list[dict[str, Any]]:
    """The latest ``limit`` maintenance runs (``paimon_maintenance_history``; of the tables of the catalog
    ``catalog_key``, None: any) after skipping the ``offset`` newest, oldest first."""
    params = {"table": table, "limit": limit, "offset": offset, "catalog_key": catalog_key}
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(_MAINTENANCE, params)]
    return rows[::-1]


def maintenance_queue_runs(
    engine: Engine, *, table: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """The latest ``limit`` runs of the maintenance queue (operation ``maintain``: kind, outcome, files
    and bytes before and after in ``result``), newest first."""
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(_QUEUE_RUNS, {"table": table, "limit": limit})]


def lock_events(
    engine: Engine, *, lock_id: str | None = None, limit: int = 100, offset: int = 0
) -> list[dict[str, Any]]:
    """The latest ``limit`` lock events (optionally of one lock) after skipping the ``offset`` newest,
    oldest first."""
    params = {"lock_id": lock_id, "limit": limit, "offset": offset}
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(_LOCK_EVENTS, params)]
    return rows[::-1]


#: snapshot id -> (event type, commit id) of the event that recorded it in the log.
Recorded = dict[int, tuple[str, str]]


def recording_events(
    engine: Engine, table_id: int, *, limit: int | None = None, offset: int = 0
) -> list[tuple[int, str, str]]:
    """(snapshot id, event type, commit id) of the events that recorded snapshots of the table's main
    branch (published, external, recovered), oldest first; ``limit`` None: all after ``offset``. (A
    branch's snapshot ids overlap main's: its events are not main's snapshots.)"""
    params = {"table_id": table_id, "limit": limit, "offset": offset}
    with engine.connect() as conn:
        return [(r.snapshot_id, r.event_type, str(r.commit_id)) for r in conn.execute(_RECORDED, params)]


def first_recordings(events: Iterable[tuple[int, str, str]]) -> Recorded:
    """snapshot id -> the first of ``events`` (in the log's order) that recorded it."""
    recorded: Recorded = {}
    for snapshot_id, event_type, commit_id in events:
        recorded.setdefault(snapshot_id, (event_type, commit_id))
    return recorded


def snapshot_rows(catalog: MetastoreCatalog, identifier: str) -> list[dict[str, Any]]:
    """Snapshots on storage (earliest first) with the event that recorded each in the log, if any."""
    row, table = resolve_table(catalog, identifier)
    return snapshot_rows_of(table, first_recordings(recording_events(catalog.engine, row.table_id)))


def snapshot_rows_of(table: FileStoreTable, recorded: Recorded) -> list[dict[str, Any]]:
    """:func:`snapshot_rows` of a table opened by any catalog, given its recording events."""
    sm = table.snapshot_manager
    out = []
    for sid in sm.list_snapshot_ids():
        s = sm.snapshot(sid)
        event, commit_id = recorded.get(sid, (None, None))
        out.append(
            {
                "snapshot_id": s.id,
                "commit_kind": s.commit_kind.value,
                "commit_user": s.commit_user,
                "commit_identifier": s.commit_identifier,
                "committed_at": datetime.fromtimestamp(s.time_millis / 1000, UTC),
                "schema_id": s.schema_id,
                "delta_records": s.delta_record_count,
                "total_records": s.total_record_count,
                "recorded_as": event,
                "commit_id": commit_id,
            }
        )
    return out
