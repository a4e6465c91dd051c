"""The operator console's reads of the event logs (``service.console``): what each table did last, how
fast it commits, its commits and failed attempts, its snapshots' sizes over time, lock waiters.

Every statement is constant SQL with bound parameters, bounded by a LIMIT and served by an index
(``ix_paimon_commit_events_table`` (table_id, event_id), ``ix_paimon_commit_events_commit`` (commit_id,
event_id), ``ix_paimon_lock_events_lock`` (lock_id, event_id), ``ix_paimon_maintenance_events_table``,
the primary keys): a page costs the same with 100 events in the log or 100 million.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text

from paimon_meta.db.plans import ORDERED_READS
from paimon_meta.model.manifest import FileKind

if TYPE_CHECKING:
    from paimon_meta.table.table import FileStoreTable

#: The position before every event: a first page's bound (always a bound, so that a generic plan of the
#: statement, which psycopg prepares after a few runs, is one index range too).
_NEWEST = 2**63 - 1


def _below(before: int | None) -> int:
    return _NEWEST if before is None else before


#: Commits per minute are counted over this window, among at most RATE_SCAN of the table's newest events;
#: a table whose newest event is older than the window is not read further (its LIMIT is 0: the rate of
#: an idle table costs no scan of its newest events, 30 -> 2 ms for a page of 50 tables at 2x10^7).
RATE_WINDOW_MINUTES = 10
RATE_SCAN = 500

_LAST_ACTIVITY = text(
    "SELECT t.id AS table_id, last.created_at AS last_event_at, last.event_type AS last_event_type, "
    "last.commit_kind AS last_commit_kind, last.snapshot_id AS last_snapshot_id, "
    "rate.published, rate.scanned "
    "FROM unnest(CAST(:ids AS bigint[])) AS t(id) "
    "LEFT JOIN LATERAL (SELECT e.created_at, e.event_type, e.commit_kind, e.snapshot_id "
    "  FROM paimon_commit_events e WHERE e.table_id = t.id ORDER BY e.event_id DESC LIMIT 1) last ON true "
    "LEFT JOIN LATERAL (SELECT count(*) FILTER (WHERE r.event_type = 'snapshot_published' "
    "  AND r.created_at > clock_timestamp() - make_interval(mins => :minutes)) AS published, "
    "  count(*) AS scanned "
    "  FROM (SELECT e.event_type, e.created_at FROM paimon_commit_events e WHERE e.table_id = t.id "
    "  ORDER BY e.event_id DESC LIMIT CASE WHEN last.created_at > clock_timestamp() "
    "  - make_interval(mins => :minutes) THEN :scan ELSE 0 END) r) rate ON true"
)
# A commit is listed by its first event (prepared, or external/recovered for snapshots the log learned
# about afterwards); the page's commits are then summarised from their own events (commit index). "Its
# first" is a scalar subquery, a probe per row on (commit_id, event_id): a NOT EXISTS may be planned as a
# hash of every prepared event of the log. The summary is a LATERAL aggregate, a probe per commit of
# each partition's commit index (migration 0024: a plain join may be planned as a hash of every partition).
_COMMITS = text(
    "WITH firsts AS ("
    "  SELECT e.event_id, e.commit_id FROM paimon_commit_events e WHERE e.table_id = :table_id"
    "  AND (e.event_type = 'prepared' AND e.attempt = 1 OR e.event_type IN ('external', 'recovered'))"
    "  AND e.event_id = (SELECT min(p.event_id) FROM paimon_commit_events p WHERE p.commit_id = e.commit_id)"
    "  AND e.event_id < :before"
    "  ORDER BY e.event_id DESC LIMIT :limit)"
    "SELECT f.event_id AS position, f.commit_id, a.* FROM firsts f CROSS JOIN LATERAL ("
    " SELECT min(e.commit_user) AS commit_user,"
    " min(e.commit_identifier) AS commit_identifier, min(e.commit_kind) AS commit_kind,"
    " min(e.branch) AS branch,"
    " min(e.principal) FILTER (WHERE e.event_type = 'prepared') AS principal,"
    " CASE WHEN bool_or(e.event_type = 'snapshot_published') THEN 'published'"
    "  WHEN bool_or(e.event_type = 'external') THEN 'external'"
    "  WHEN bool_or(e.event_type = 'recovered') THEN 'recovered'"
    "  WHEN bool_or(e.event_type = 'failed') THEN 'failed'"
    "  WHEN bool_or(e.event_type = 'aborted') THEN 'aborted' ELSE 'pending' END AS outcome,"
    " max(e.snapshot_id) FILTER (WHERE e.event_type IN ('snapshot_published', 'external', 'recovered'))"
    "  AS snapshot_id,"
    " max(e.attempt) AS attempts, count(*) FILTER (WHERE e.event_type = 'retried') AS retries,"
    " (array_agg(e.payload ->> 'reason' ORDER BY e.event_id DESC) FILTER (WHERE e.event_type IN"
    "  ('retried', 'failed', 'aborted', 'recovered')))[1] AS reason,"
    " min(e.created_at) AS started_at,"
    " (EXTRACT(EPOCH FROM max(e.created_at) - min(e.created_at)) * 1000)::float8 AS elapsed_ms "
    " FROM paimon_commit_events e WHERE e.commit_id = f.commit_id) a "
    "ORDER BY f.event_id DESC"
)
_TROUBLE = text(
    "SELECT e.event_id, e.created_at, e.commit_id, e.event_type, e.attempt, e.commit_user, e.commit_kind,"
    " e.principal, e.payload ->> 'reason' AS reason, (e.payload ->> 'wait_ms')::float8 AS wait_ms "
    "FROM paimon_commit_events e WHERE e.table_id = :table_id"
    " AND e.event_type IN ('retried', 'failed', 'aborted')"
    " AND e.event_id < :before"
    " ORDER BY e.event_id DESC LIMIT :limit"
)
# A run is its ``started`` event with its end (``finished``/``failed``; none while it runs).
_RUNS = (
    "SELECT s.event_id AS position, s.run_id, s.table_identifier, s.operation, s.operator, s.principal,"
    " s.dry_run, s.created_at AS started_at, coalesce(e.event_type, 'unfinished') AS outcome,"
    " (EXTRACT(EPOCH FROM e.created_at - s.created_at) * 1000)::float8 AS elapsed_ms,"
    " s.payload AS settings, e.payload AS result "
    "FROM paimon_maintenance_events s"
    " LEFT JOIN paimon_maintenance_events e ON e.run_id = s.run_id AND e.event_type <> 'started' "
    "WHERE s.event_type = 'started' AND s.event_id < :before "
)
_MAINTENANCE = text(
    _RUNS + "AND s.table_id = ANY(CAST(:ids AS bigint[])) ORDER BY s.event_id DESC LIMIT :limit"
)
_ALL_MAINTENANCE = text(_RUNS + "ORDER BY s.event_id DESC LIMIT :limit")
# Writers waiting for a lock: the acquirers that recorded how long they waited are in the log only once
# they got it, so "waiting" is read from the holder's side: the acquisitions that had to wait recently.
_WAITS = text(
    "SELECT e.lock_id, e.owner, e.wait_ms, e.created_at FROM paimon_lock_events e"
    " WHERE e.lock_id = ANY(CAST(:ids AS text[])) AND e.event_type IN ('acquired', 'expiry_takeover')"
    " AND e.event_id > coalesce((SELECT max(m.event_id) FROM paimon_lock_events m), 0) - :scan"
    " AND e.wait_ms > 0 ORDER BY e.event_id DESC LIMIT :limit"
)


_CATALOG_RATE = text(
    "SELECT count(*) FILTER (WHERE r.event_type = 'snapshot_published'"
    "  AND r.created_at > clock_timestamp() - make_interval(mins => :minutes)) AS published,"
    " count(*) AS scanned,"
    " max(r.created_at) FILTER (WHERE r.event_type IN ('snapshot_published', 'external')) AS last_commit_at "
    "FROM (SELECT e.event_type, e.created_at FROM paimon_commit_events e"
    " JOIN paimon_tables t ON t.table_id = e.table_id AND t.catalog_key = :catalog_key"
    " ORDER BY e.event_id DESC LIMIT :scan) r"
)
_LAST_COMMIT = text(
    "SELECT e.table_identifier, e.created_at, e.snapshot_id, e.commit_kind, e.principal"
    " FROM paimon_commit_events e JOIN paimon_tables t ON t.table_id = e.table_id"
    " AND t.catalog_key = :catalog_key"
    " WHERE e.event_type IN ('snapshot_published', 'external') ORDER BY e.event_id DESC LIMIT 1"
)


def catalog_activity(engine: Engine, catalog_key: str, *, scan: int = 5000) -> dict[str, Any]:
    """The whole catalog's commits per minute over ``RATE_WINDOW_MINUTES`` (among the log's ``scan``
    newest events of its tables: ``rate_capped`` says the window held more) and its newest commit."""
    params = {"catalog_key": catalog_key, "minutes": RATE_WINDOW_MINUTES, "scan": scan}
    with engine.connect() as conn:
        rate = conn.execute(_CATALOG_RATE, params).one()
        last = conn.execute(_LAST_COMMIT, {"catalog_key": catalog_key}).one_or_none()
    published = int(rate.published or 0)
    return {
        "commits_per_minute": published / RATE_WINDOW_MINUTES,
        "rate_capped": int(rate.scanned or 0) >= scan and published > 0,
        "last_commit": None if last is None else dict(last._mapping),
    }


def last_activity(engine: Engine, table_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """table id -> its newest commit event (time, type, kind, snapshot) and ``commits_per_minute``, the
    snapshots it published in the last ``RATE_WINDOW_MINUTES`` (counted among its ``RATE_SCAN`` newest
    events: ``rate_capped`` says the window held more)."""
    if not table_ids:
        return {}
    params = {"ids": list(table_ids), "minutes": RATE_WINDOW_MINUTES, "scan": RATE_SCAN}
    with engine.connect() as conn:
        conn.execute(ORDERED_READS)
        rows = [dict(r._mapping) for r in conn.execute(_LAST_ACTIVITY, params)]
    out = {}
    for row in rows:
        published = row.pop("published") or 0
        row["commits_per_minute"] = published / RATE_WINDOW_MINUTES
        row["rate_capped"] = (row.pop("scanned") or 0) >= RATE_SCAN and published > 0
        out[row["table_id"]] = row
    return out


def commits_page(
    engine: Engine, table_id: int, *, before: int | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """The table's newest ``limit`` commits started before log position ``before`` (None: the newest),
    newest first: principal, commit user, kind, outcome, snapshot, attempts, retries, the last reason
    given and how long it took. ``position`` is the page token of the next page."""
    params = {"table_id": table_id, "before": _below(before), "limit": limit}
    with engine.connect() as conn:
        conn.execute(ORDERED_READS)
        return [dict(r._mapping) for r in conn.execute(_COMMITS, params)]


def troubled_attempts(
    engine: Engine, table_id: int, *, before: int | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """The table's newest retried, failed and aborted attempts, with their reasons, newest first."""
    params = {"table_id": table_id, "before": _below(before), "limit": limit}
    with engine.connect() as conn:
        conn.execute(ORDERED_READS)
        return [dict(r._mapping) for r in conn.execute(_TROUBLE, params)]


def maintenance_page(
    engine: Engine, table_ids: Sequence[int] | None, *, before: int | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """Maintenance runs (of ``table_ids``; None: of every table), newest first, paged by ``position``."""
    params: dict[str, Any] = {"before": _below(before), "limit": limit}
    query = _ALL_MAINTENANCE
    if table_ids is not None:
        params["ids"] = list(table_ids)
        query = _MAINTENANCE
    with engine.connect() as conn:
        conn.execute(ORDERED_READS)
        return [dict(r._mapping) for r in conn.execute(query, params)]


# A writer waiting for a table's lock has written its ``prepared`` event (in its first lock attempt's
# transaction, commit/metastore/guard.py) and nothing after it until it holds the lock.
_WAITING = text(
    "SELECT t.id AS table_id, p.commit_id, p.commit_user, p.commit_kind, p.principal, p.created_at,"
    " (EXTRACT(EPOCH FROM clock_timestamp() - p.created_at))::float8 AS waiting_seconds "
    "FROM unnest(CAST(:ids AS bigint[])) AS t(id) CROSS JOIN LATERAL ("
    " SELECT e.commit_id, e.commit_user, e.commit_kind, e.principal, e.created_at, e.event_type,"
    "  row_number() OVER (PARTITION BY e.commit_id ORDER BY e.event_id DESC) AS newest"
    " FROM (SELECT * FROM paimon_commit_events r WHERE r.table_id = t.id"
    "  ORDER BY r.event_id DESC LIMIT :scan) e) p "
    "WHERE p.newest = 1 AND p.event_type = 'prepared' ORDER BY p.created_at"
)


def waiting_writers(engine: Engine, table_ids: Sequence[int], *, scan: int = 200) -> list[dict[str, Any]]:
    """Commits of ``table_ids`` whose newest event (among each table's ``scan`` newest) is ``prepared``:
    writers waiting for the table's lock (or that died waiting, until recovery resolves them), oldest
    first, with how long they have waited."""
    if not table_ids:
        return []
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(_WAITING, {"ids": list(table_ids), "scan": scan})]


def recent_waits(
    engine: Engine, lock_ids: Sequence[str], *, scan: int = 10_000, limit: int = 200
) -> list[dict[str, Any]]:
    """Acquisitions of ``lock_ids`` among the lock log's ``scan`` newest events that had to wait for
    the lock (who, how long), newest first."""
    if not lock_ids:
        return []
    params = {"ids": list(lock_ids), "scan": scan, "limit": limit}
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(_WAITS, params)]


@dataclass(frozen=True, slots=True)
class SnapshotPoint:
    """One snapshot of the timeline: when, and the table's records, live files and bytes after it."""

    snapshot_id: int
    committed_at: datetime
    commit_kind: str
    records: int
    files: int
    size_bytes: int


def snapshot_timeline(
    table: FileStoreTable, *, before: int | None = None, limit: int = 60
) -> list[SnapshotPoint]:
    """The ``limit`` snapshots before ``before`` (None: up to the latest), oldest first: records from the
    snapshot, files and bytes from its manifests (signed sums of ADD/DELETE entries; manifests are
    cached by the table's reader, so consecutive snapshots share their base manifests' reads)."""
    snapshots = table.snapshot_manager
    latest = snapshots.latest_snapshot_id()
    if latest is None:
        return []
    end = latest if before is None else min(latest, before - 1)
    earliest = snapshots.earliest_snapshot_id() or 1
    start = max(earliest, end - limit + 1)
    reader = table.manifest_reader
    points = []
    for sid in range(start, end + 1):
        snapshot = snapshots.find(sid)
        if snapshot is None:
            continue
        files = size = rows = 0
        for entry in reader.data_entries(snapshot):
            sign = 1 if entry.kind is FileKind.ADD else -1
            files += sign
            size += sign * entry.file.file_size
            rows += sign * entry.file.row_count
        points.append(
            SnapshotPoint(
                snapshot_id=snapshot.id,
                committed_at=datetime.fromtimestamp(snapshot.time_millis / 1000, UTC),
                commit_kind=snapshot.commit_kind.value,
                records=snapshot.total_record_count if snapshot.total_record_count is not None else rows,
                files=files,
                size_bytes=size,
            )
        )
    return points


_PARTITIONS = text(
    "SELECT partition_key, spec, record_count, file_size_in_bytes, file_count, last_file_creation_time,"
    " total_buckets, snapshot_id FROM paimon_partition_statistics"
    " WHERE table_id = :table_id AND file_count > 0"
    " AND (CAST(:after AS text) IS NULL OR partition_key > :after) ORDER BY partition_key LIMIT :limit"
)


def partitions_page(
    engine: Engine, table_id: int, *, after: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """The table's non-empty partitions with their statistics, by canonical key after ``after``
    (the ``partition_key`` of the previous page's last row), at most ``limit``."""
    params = {"table_id": table_id, "after": after, "limit": limit}
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(_PARTITIONS, params)]
