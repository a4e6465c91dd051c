"""A test double of the partitioned event log (``archive.store.EventPartitionStore``) over the unpartitioned
``paimon_commit_events``: partitions are windows of ``created_at`` between boundaries the test sets (the
first, legacy one has no start; the last is the current one), the archive marks are kept in memory, and a
drop deletes the window's rows (the append-only trigger is bypassed for that statement only, as an
operator pruning by hand would). It keeps the contract the archiver relies on: ``drop`` refuses the
current partition and one with a catalog not marked archived, and is idempotent; ``mark_archived`` is
idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, text

from paimon_meta.errors import ValidationError
from paimon_meta.metastore import event_partitions

# An event's catalog as the partitioned log attributes it (the same SQL: registry, recycle bin, the
# catalog a purged table had, else "(purged)").
_KEY = event_partitions._CATALOG_OF
_CATALOG_OF = (
    f"FROM paimon_commit_events e {event_partitions._CATALOG_JOINS} "
    "WHERE (CAST(:start AS timestamptz) IS NULL OR e.created_at >= :start) AND e.created_at < :end"
)
EVENT_COLUMNS = (
    "event_id, txid, commit_id, table_id, table_identifier, event_type, attempt, commit_user, "
    "commit_identifier, commit_kind, snapshot_id, payload, messages, messages_version, created_at, "
    "duration_ms, principal, timeline, branch"
)


@dataclass
class WindowPartition:
    name: str
    start: datetime | None
    end: datetime
    archived: dict[str, int] = field(default_factory=dict)
    dropped_at: datetime | None = None
    row_counts: dict[str, int] = field(default_factory=dict)


class WindowStore:
    def __init__(self, engine: Engine, boundaries: Sequence[datetime]) -> None:
        self.engine = engine
        edges: list[datetime | None] = [None, *boundaries]
        ends = [*boundaries, boundaries[-1] + timedelta(days=3650)]
        self._parts = [
            WindowPartition(f"paimon_commit_events_w{i}", start, end)
            for i, (start, end) in enumerate(zip(edges, ends, strict=True))
        ]
        self.drops: list[str] = []

    def _get(self, name: str) -> WindowPartition:
        for p in self._parts:
            if p.name == name:
                return p
        raise ValidationError(f"no partition {name}")

    def _window(self, p: WindowPartition) -> dict[str, Any]:
        return {"start": p.start, "end": p.end}

    def partitions(self) -> list[WindowPartition]:
        return [p for p in self._parts if p.dropped_at is None]

    def catalogs_in(self, name: str) -> list[str]:
        p = self._get(name)
        with self.engine.connect() as c:
            keys = c.execute(
                text(f"SELECT DISTINCT {_KEY} {_CATALOG_OF} ORDER BY 1"), self._window(p)
            ).scalars()
            return list(keys)

    def rows(
        self, name: str, *, catalog_key: str, after_event_id: int | None, limit: int
    ) -> list[Mapping[str, Any]]:
        p = self._get(name)
        cols = ", ".join(f"e.{c.strip()}" for c in EVENT_COLUMNS.split(","))
        with self.engine.connect() as c:
            result = c.execute(
                text(
                    f"SELECT {cols} {_CATALOG_OF} AND {_KEY} = :key AND e.event_id > :after "
                    "ORDER BY e.event_id LIMIT :limit"
                ),
                {**self._window(p), "key": catalog_key, "after": after_event_id or 0, "limit": limit},
            )
            return [dict(r._mapping) for r in result]

    def mark_archived(
        self, name: str, *, catalog_key: str, snapshot_id: int, row_count: int, archived_by: str
    ) -> None:
        p = self._get(name)
        p.archived.setdefault(catalog_key, snapshot_id)
        p.row_counts.setdefault(catalog_key, row_count)

    def drop(self, name: str, *, operator: str) -> None:
        p = self._get(name)
        if p.dropped_at is not None:
            return
        if p is self._parts[-1]:
            raise ValidationError(f"{name} is the current partition")
        missing = set(self.catalogs_in(name)) - set(p.archived)
        if missing:
            raise ValidationError(f"{name} has rows of {sorted(missing)} not archived")
        with self.engine.begin() as c:
            c.execute(text("SET LOCAL session_replication_role = replica"))
            c.execute(
                text(
                    "DELETE FROM paimon_commit_events WHERE (CAST(:start AS timestamptz) IS NULL "
                    "OR created_at >= :start) AND created_at < :end"
                ),
                self._window(p),
            )
            p.dropped_at = c.execute(text("SELECT now()")).scalar_one()
        self.drops.append(name)
