"""The read-only and audit commands of ``paimon-meta`` over a commit service (``--metastore http(s)://``).

Each function returns the rows the database path returns (the same keys in the same order, the same
value types), so one renderer prints both: what only the metastore knows (registry rows, the commit,
lock and maintenance logs) comes from the service's endpoints with the caller's token; snapshots, rows
and tags are read on storage, where the service says the table lives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from paimon_meta.catalog.rest import RestCatalog
from paimon_meta.ops import audit

# The keys of the rows of ``paimon_meta.ops.audit``, in its SELECTs' order; the timestamps among them.
COMMIT_HISTORY = (
    "commit_id",
    "commit_user",
    "commit_identifier",
    "commit_kind",
    "outcome",
    "snapshot_id",
    "attempts",
    "retries",
    "conflicts",
    "conflict_check_ms",
    "elapsed_ms",
    "final_reason",
    "first_event_at",
    "last_event_at",
    "principal",
)
COMMIT_EVENTS = (
    "event_id",
    "created_at",
    "table_identifier",
    "commit_id",
    "event_type",
    "attempt",
    "commit_user",
    "commit_identifier",
    "commit_kind",
    "snapshot_id",
    "duration_ms",
    "payload",
)
LOCK_EVENTS = (
    "event_id",
    "created_at",
    "lock_id",
    "event_type",
    "owner",
    "fencing_token",
    "hostname",
    "pid",
    "operator",
    "reason",
    "previous_owner",
    "previous_fencing_token",
    "wait_ms",
    "payload",
)
MAINTENANCE_RUNS = (
    "run_id",
    "table_identifier",
    "operation",
    "outcome",
    "dry_run",
    "operator",
    "started_at",
    "ended_at",
    "elapsed_ms",
    "settings",
    "result",
)
_TIMES = frozenset({"first_event_at", "last_event_at", "created_at", "started_at", "ended_at", "updated_at"})


def table_rows(remote: RestCatalog, database: str | None) -> list[dict[str, Any]]:
    """``paimon-meta tables``: the registry rows of the tables the token may read."""
    rows = []
    for db in [database] if database else remote.list_databases():
        for name in sorted(remote.list_tables(db)):
            r = remote.table_registry(f"{db}.{name}")
            rows.append(
                {
                    "table": r["identifier"],
                    "latest_snapshot_id": r["latestSnapshotId"],
                    "schema_id": r["schemaId"],
                    "location": r["location"],
                    "updated_at": _time(r["updatedAt"]),
                }
            )
    return rows


def snapshot_rows(remote: RestCatalog, identifier: str) -> list[dict[str, Any]]:
    """``paimon-meta snapshots``: snapshots read on storage, each with the event that recorded it."""
    recorded = audit.first_recordings(remote.snapshot_recordings(identifier))
    return audit.snapshot_rows_of(remote.get_table(identifier), recorded)


def commit_history(remote: RestCatalog, identifier: str, limit: int) -> list[dict[str, Any]]:
    """``paimon-meta commits``: newest first."""
    return _rows(remote.commits(identifier, limit=limit), COMMIT_HISTORY)


def commit_events(
    remote: RestCatalog, identifier: str, commit_id: str | None, limit: int
) -> list[dict[str, Any]]:
    """``paimon-meta events --table T [--commit ID]``: oldest first, as the database path."""
    return _rows(reversed(remote.commit_events(identifier, commit_id=commit_id, limit=limit)), COMMIT_EVENTS)


def lock_events(remote: RestCatalog, identifier: str, limit: int) -> list[dict[str, Any]]:
    """``paimon-meta events --table T --locks``: oldest first."""
    return _rows(reversed(remote.lock_events(identifier, limit=limit)), LOCK_EVENTS)


def maintenance_history(remote: RestCatalog, identifier: str, limit: int) -> list[dict[str, Any]]:
    """``paimon-meta events --table T --maintenance``: oldest first."""
    return _rows(reversed(remote.maintenance_runs(identifier, limit=limit)), MAINTENANCE_RUNS)


def _rows(records: Iterable[Mapping[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    return [{k: _time(r[_camel(k)]) if k in _TIMES else r[_camel(k)] for k in keys} for r in records]


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)
