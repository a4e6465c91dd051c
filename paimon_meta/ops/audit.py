"""Audit queries behind ``paimon-meta commits``, ``events`` and ``snapshots`` (docs/AUDIT.md has the
same questions as SQL to paste into psql). All statements are constant SQL with bound parameters."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text

from paimon_meta.db.plans import ORDERED_READS
from paimon_meta.errors import ValidationError
from paimon_meta.ops.common import resolve_table

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.table.table import FileStoreTable

# Every listing below is a keyset page: newest first, below a position (``before``; None: the newest),
# the bound a comparison of the index's trailing column so that Postgres reads one index range from the
# position and stops after ``limit`` rows (never an OFFSET: a page costs the same at the 1st or the
# 10,000th page, with 10^3 or 10^9 events in the log). A missing position is the largest id (constant
# SQL, a bound either way), and each filter picks the statement whose index serves it.
_NEWEST = 2**63 - 1

#: Only the events of tables of one catalog: a table id is of the catalog whose table (registered, or
#: in its recycle bin) has it (issue 35: ``db.t`` of two catalogs). Probed per row on the table-id keys
#: (the page stops after ``limit`` rows), never a read of every table of the catalog.
_OF_CATALOG = (
    "EXISTS (SELECT 1 FROM paimon_tables t WHERE t.table_id = e.table_id AND t.catalog_key = :catalog_key"
    " UNION ALL SELECT 1 FROM paimon_dropped_tables d WHERE d.table_id = e.table_id"
    " AND d.catalog_key = :catalog_key)"
)
# A commit is listed by its first event (prepared, or external/recovered for snapshots the log learned
# about afterwards), found by a scalar subquery, a probe per row on (commit_id, event_id) (a NOT EXISTS
# may be planned as a hash of the whole log); the page's commits are then summarised from their own
# events (the commit index), as ``paimon_commit_history`` does: in a LATERAL aggregate, a probe per
# commit of each partition's commit index (the log is partitioned by time, migration 0024; a plain join
# may be planned as a hash of every partition).
_HISTORY = text(
    "WITH firsts AS ("
    " SELECT e.event_id, e.commit_id FROM paimon_commit_events e WHERE e.table_id = :table_id"
    " AND e.event_id < :before"
    " AND e.event_id = (SELECT min(p.event_id) FROM paimon_commit_events p WHERE p.commit_id = e.commit_id)"
    " ORDER BY e.event_id DESC LIMIT :limit) "
    "SELECT f.event_id AS position, f.commit_id, a.* FROM firsts f CROSS JOIN LATERAL ("
    " SELECT min(e.commit_user) AS commit_user,"
    " min(e.commit_identifier) AS commit_identifier, min(e.commit_kind) AS commit_kind,"
    " CASE WHEN bool_or(e.event_type = 'snapshot_published') THEN 'published'"
    "  WHEN bool_or(e.event_type = 'external') THEN 'external'"
    "  WHEN bool_or(e.event_type = 'recovered') THEN 'recovered'"
    "  WHEN bool_or(e.event_type = 'failed') THEN 'failed'"
    "  WHEN bool_or(e.event_type = 'aborted') THEN 'aborted' ELSE 'pending' END AS outcome,"
    " max(e.snapshot_id) FILTER (WHERE e.event_type IN ('snapshot_published', 'external', 'recovered'))"
    "  AS snapshot_id,"
    " max(e.attempt) AS attempts, count(*) FILTER (WHERE e.event_type = 'retried') AS retries,"
    " count(*) FILTER (WHERE e.event_type = 'conflict_checked' AND e.payload @> '{\"conflict\": true}')"
    "  AS conflicts,"
    " sum(e.duration_ms) FILTER (WHERE e.event_type = 'conflict_checked') AS conflict_check_ms,"
    " (EXTRACT(EPOCH FROM max(e.created_at) - min(e.created_at)) * 1000)::float8 AS elapsed_ms,"
    " (array_agg(e.payload ->> 'reason' ORDER BY e.event_id DESC) FILTER (WHERE e.event_type IN"
    "  ('failed', 'aborted', 'recovered')))[1] AS final_reason,"
    " min(e.created_at) AS first_event_at, max(e.created_at) AS last_event_at,"
    " (array_agg(e.principal ORDER BY e.event_id) FILTER (WHERE e.event_type = 'prepared'"
    "  AND e.principal IS NOT NULL))[1] AS principal "
    " FROM paimon_commit_events e WHERE e.commit_id = f.commit_id) a "
    "ORDER BY f.event_id DESC"
)
_EVENT_COLUMNS = (
    "SELECT e.event_id, e.created_at, e.table_identifier, e.commit_id, e.event_type, e.attempt, "
    "e.commit_user, e.commit_identifier, e.commit_kind, e.snapshot_id, e.duration_ms, e.payload "
    "FROM paimon_commit_events e WHERE e.event_id < :before "
)
#: (by table, by commit) -> the statement: by table on (table_identifier, event_id) (migration 0023),
#: by commit on (commit_id, event_id), neither on the primary key; each newest first.
_EVENTS = {
    (by_table, by_commit, of_catalog): text(
        _EVENT_COLUMNS
        + ("AND e.table_identifier = :table " if by_table else "")
        + ("AND e.commit_id = :commit_id " if by_commit else "")
        + (f"AND {_OF_CATALOG} " if of_catalog else "")
        + "ORDER BY e.event_id DESC LIMIT :limit"
    )
    for by_table in (False, True)
    for by_commit in (False, True)
    for of_catalog in (False, True)
}
_LOCK_COLUMNS = (
    "SELECT e.event_id, e.created_at, e.lock_id, e.event_type, e.owner, e.fencing_token, e.hostname, "
    "e.pid, e.operator, e.reason, e.previous_owner, e.previous_fencing_token, e.wait_ms, e.payload "
    "FROM paimon_lock_events e WHERE e.event_id < :before "
)
#: on (lock_id, event_id), or the primary key
_LOCK_EVENTS = {
    True: text(_LOCK_COLUMNS + "AND e.lock_id = :lock_id ORDER BY e.event_id DESC LIMIT :limit"),
    False: text(_LOCK_COLUMNS + "ORDER BY e.event_id DESC LIMIT :limit"),
}
# A run is its ``started`` event with its end (``finished``/``failed``; none while it runs), as
# ``paimon_maintenance_history`` has it; listed by the started event's id, by table on
# (table_identifier, event_id) (migration 0023).
_RUN_COLUMNS = (
    "SELECT s.event_id AS position, s.run_id, s.table_identifier, s.operation, "
    "coalesce(f.event_type, 'unfinished') AS outcome, s.dry_run, s.operator, s.created_at AS started_at, "
    "f.created_at AS ended_at, "
    "(extract(epoch FROM f.created_at - s.created_at) * 1000)::float8 AS elapsed_ms, "
    "s.payload AS settings, f.payload AS result "
    "FROM paimon_maintenance_events s "
    "LEFT JOIN paimon_maintenance_events f ON f.run_id = s.run_id AND f.event_type <> 'started' "
    "WHERE s.event_type = 'started' AND s.event_id < :before "
)
_MAINTENANCE = {
    (by_table, of_catalog): text(
        _RUN_COLUMNS
        + ("AND s.table_identifier = :table " if by_table else "")
        + (f"AND {_OF_CATALOG.replace('e.table_id', 's.table_id')} " if of_catalog else "")
        + "ORDER BY s.event_id DESC LIMIT :limit"
    )
    for by_table in (False, True)
    for of_catalog in (False, True)
}
_QUEUE_RUNS = text(
    "SELECT run_id, table_identifier, settings ->> 'kind' AS kind, "
    "coalesce(result ->> 'outcome', outcome) AS outcome, started_at, elapsed_ms, settings, result "
    "FROM paimon_maintenance_history WHERE operation = 'maintain' "
    "AND (CAST(:table AS text) IS NULL OR table_identifier = :table) "
    "ORDER BY started_at DESC, run_id LIMIT :limit"
)
# Oldest first from a position (on (table_id, event_id)).
_RECORDED = text(
    "SELECT e.event_id, e.snapshot_id, e.event_type, e.commit_id FROM paimon_commit_events e "
    "WHERE e.table_id = :table_id AND e.event_id > :after AND e.branch = 'main' "
    "AND e.snapshot_id IS NOT NULL AND e.event_type IN ('snapshot_published', 'external', 'recovered') "
    "ORDER BY e.event_id LIMIT :limit"
)


def _below(before: int | None) -> int:
    return _NEWEST if before is None else before


def commit_history(
    engine: Engine, table_id: int, *, limit: int = 50, before: int | None = None
) -> list[dict[str, Any]]:
    """The latest ``limit`` commits of a table started before log position ``before`` (None: the
    newest), newest first: by its id, so from before a rename too, and none of an earlier table of the
    same name. Each row names the ``principal`` that prepared the commit (None for commits made without
    the service) and its ``position`` (the next page's ``before``)."""
    params = {"table_id": table_id, "limit": limit, "before": _below(before)}
    with engine.connect() as conn:
        conn.execute(ORDERED_READS)
        return [dict(r._mapping) for r in conn.execute(_HISTORY, params)]


def commit_events(
    engine: Engine,
    *,
    table: str | None = None,
    commit_id: str | None = None,
    limit: int = 100,
    before: int | None = None,
    catalog_key: str | None = None,
) -> list[dict[str, Any]]:
    """The latest ``limit`` commit events before event id ``before`` (None: the newest; optionally of one
    table and/or one commit; of the tables of the catalog ``catalog_key``, None: any), oldest first.

    Raises:
        ValidationError: ``commit_id`` is not a UUID.
    """
    cid = None
    if commit_id is not None:
        try:
            cid = uuid.UUID(commit_id)
        except ValueError as e:
            raise ValidationError(f"commit id {commit_id!r} is not a UUID") from e
    statement = _EVENTS[(table is not None, cid is not None, catalog_key is not None)]
    params = {
        "table": table,
        "commit_id": cid,
        "limit": limit,
        "before": _below(before),
        "catalog_key": catalog_key,
    }
    with engine.connect() as conn:
        conn.execute(ORDERED_READS)
        rows = [dict(r._mapping) for r in conn.execute(statement, params)]
    return rows[::-1]


def maintenance_history(
    engine: Engine,
    *,
    table: str | None = None,
    limit: int = 50,
    before: int | None = None,
    catalog_key: str | None = None,
) -> list[dict[str, Any]]:
    """The latest ``limit`` maintenance runs started before log position ``before`` (None: the newest;
    of the tables of the catalog ``catalog_key``, None: any), oldest first; each with its ``position``."""
    statement = _MAINTENANCE[(table is not None, catalog_key is not None)]
    params = {"table": table, "limit": limit, "before": _below(before), "catalog_key": catalog_key}
    with engine.connect() as conn:
        conn.execute(ORDERED_READS)
        rows = [dict(r._mapping) for r in conn.execute(statement, params)]
    return rows[::-1]


def maintenance_queue_runs(
    engine: Engine, *, table: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """The latest ``limit`` runs of the maintenance queue (operation ``maintain``: kind, outcome, files
    and bytes before and after in ``result``), newest first."""
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(_QUEUE_RUNS, {"table": table, "limit": limit})]


def lock_events(
    engine: Engine, *, lock_id: str | None = None, limit: int = 100, before: int | None = None
) -> list[dict[str, Any]]:
    """The latest ``limit`` lock events before event id ``before`` (None: the newest; optionally of one
    lock), oldest first."""
    params = {"lock_id": lock_id, "limit": limit, "before": _below(before)}
    with engine.connect() as conn:
        conn.execute(ORDERED_READS)
        rows = [dict(r._mapping) for r in conn.execute(_LOCK_EVENTS[lock_id is not None], params)]
    return rows[::-1]


#: snapshot id -> (event type, commit id) of the event that recorded it in the log.
Recorded = dict[int, tuple[str, str]]


def recording_positions(
    engine: Engine, table_id: int, *, limit: int, after: int = 0
) -> list[tuple[int, int, str, str]]:
    """(event id, snapshot id, event type, commit id) of up to ``limit`` events after event id ``after``
    that recorded snapshots of the table's main branch (published, external, recovered), oldest first.
    (A branch's snapshot ids overlap main's: its events are not main's snapshots.)"""
    params = {"table_id": table_id, "limit": limit, "after": after}
    with engine.connect() as conn:
        conn.execute(ORDERED_READS)
        return [
            (r.event_id, r.snapshot_id, r.event_type, str(r.commit_id))
            for r in conn.execute(_RECORDED, params)
        ]


def recording_events(engine: Engine, table_id: int) -> list[tuple[int, str, str]]:
    """(snapshot id, event type, commit id) of every event that recorded a snapshot of the table's main
    branch, oldest first (read a page at a time)."""
    out: list[tuple[int, str, str]] = []
    after = 0
    while True:
        page = recording_positions(engine, table_id, limit=_RECORDING_PAGE, after=after)
        out.extend((s, e, c) for _, s, e, c in page)
        if len(page) < _RECORDING_PAGE:
            return out
        after = page[-1][0]


_RECORDING_PAGE = 10_000


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
