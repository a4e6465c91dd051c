"""A table's commit history over the live log and its catalog's archive (``paimon-meta commits TABLE
--archive``): the newest commits of either, each computed over all of its events (a commit whose events
straddle an archived partition's boundary is one row, not two)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from paimon_meta.archive.table import DATABASE, IDENTIFIER, TABLE
from paimon_meta.archive.twins import commit_history
from paimon_meta.ops.audit import commit_events
from paimon_meta.ops.audit import commit_history as live_history

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog


def archived_events(
    catalog: MetastoreCatalog, *, table_identifier: str | None = None
) -> list[dict[str, Any]]:
    """The archived events of the catalog (of one table by name), by event id; none without an archive."""
    if TABLE not in catalog.list_tables(DATABASE) if DATABASE in catalog.list_databases() else True:
        return []
    table = catalog.get_table(IDENTIFIER)
    builder = table.new_read_builder()
    data = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    if table_identifier is not None:
        data = data.filter(pc.equal(data["table_identifier"], table_identifier))
    return sorted(data.to_pylist(), key=lambda r: int(r["event_id"]))


def history_with_archive(
    catalog: MetastoreCatalog, table_id: int, table_identifier: str, *, limit: int
) -> list[dict[str, Any]]:
    """The newest ``limit`` commits of a table (newest first), from the live log and the archive, in the
    columns of ``paimon_commit_history`` (timestamps in UTC). The archive is matched by the table's name
    (its rows keep the name the table had when they were written)."""
    archived = [
        e for e in archived_events(catalog, table_identifier=table_identifier) if e["table_id"] == table_id
    ]
    live = live_history(catalog.engine, table_id, limit=limit)
    archived_ids = {str(e["commit_id"]) for e in archived}
    rows: dict[str, dict[str, Any]] = {r["commit_id"]: r for r in commit_history(archived)}
    for row in live:
        commit_id = str(row["commit_id"])
        if commit_id in archived_ids:
            # straddles an archived boundary: one row over both parts of its events
            events = [e for e in archived if str(e["commit_id"]) == commit_id]
            events += commit_events(catalog.engine, commit_id=commit_id, limit=10_000)
            rows[commit_id] = commit_history(events)[0]
        else:
            rows[commit_id] = {k: _utc(v) for k, v in row.items() if k != "position"}
    ordered = sorted(rows.values(), key=lambda r: r["first_event_at"], reverse=True)
    return ordered[:limit]


def _utc(value: Any) -> Any:
    """A live row's timestamps as the archive's: UTC without a zone."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
