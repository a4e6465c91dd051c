"""The scheduler: the commit log and the clock feed the queue.

:meth:`Scheduler.tick` takes the catalog's cursor row (``paimon_maintenance_cursors``) ``FOR UPDATE SKIP
LOCKED``, so one replica at a time does it, and:

1. reads the commit log past the cursor: every snapshot published (by us, recorded from Java, recovered)
   names a table whose debt changed;
2. for each such table, and every ``sweep_seconds`` for every table of the catalog (time alone makes
   snapshots expirable, partitions expire, tag periods end, orphan scans fall due), measures its debt
   from its latest snapshot (``maintenance.debt``), stores it (``paimon_maintenance_debts``) and queues the
   jobs it calls for (one per table and kind at most: the queue's unique index);
3. queues the purge of every dropped table whose retention passed;
4. moves the cursor past what it read, in the same transaction.

A table with maintenance off (its option, or the catalog's) or paused is measured but nothing is queued.
Measuring happens outside the commit path: a writer never waits for it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, text

from paimon_meta.db.models import DEBT_PRESSURE, MaintenanceKind
from paimon_meta.db.plans import ORDERED_READS
from paimon_meta.errors import NotFoundError, PaimonMetaError
from paimon_meta.maintenance.debt import Debt, measure
from paimon_meta.maintenance.options import MaintenanceOptions
from paimon_meta.maintenance.queue import MaintenanceQueue
from paimon_meta.ops.partitions import list_partitions

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

log = logging.getLogger(__name__)

DEFAULT_SWEEP_SECONDS = 60.0
MAX_EVENTS_PER_TICK = 20_000


@dataclass(slots=True)
class TickReport:
    """What one tick did (None ``cursor``: another replica holds the cursor)."""

    cursor: int | None = None
    tables: list[str] = field(default_factory=list)
    queued: list[tuple[str, str]] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    #: dropped databases whose bin entry went (retention passed, tables purged)
    purged_databases: list[str] = field(default_factory=list)


class Scheduler:
    """The scheduler of one catalog (see the module docstring)."""

    def __init__(
        self,
        catalog: MetastoreCatalog,
        queue: MaintenanceQueue,
        *,
        sweep_seconds: float = DEFAULT_SWEEP_SECONDS,
    ) -> None:
        self.catalog = catalog
        self.queue = queue
        self.sweep_seconds = sweep_seconds
        self._last_sweep = float("-inf")

    def tick(self, *, sweep: bool | None = None) -> TickReport:
        """One pass (``sweep``: measure every table; default: when ``sweep_seconds`` passed)."""
        report = TickReport()
        key = self.catalog.registry.catalog_key
        engine = self.catalog.engine
        now = time.monotonic()
        sweep = now - self._last_sweep >= self.sweep_seconds if sweep is None else sweep
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO paimon_maintenance_cursors (catalog_key, event_id) VALUES (:key, 0) "
                    "ON CONFLICT DO NOTHING"
                ),
                {"key": key},
            )
        with engine.begin() as conn:
            cursor = conn.execute(
                text(
                    "SELECT event_id FROM paimon_maintenance_cursors WHERE catalog_key = :key "
                    "FOR UPDATE SKIP LOCKED"
                ),
                {"key": key},
            ).scalar_one_or_none()
            if cursor is None:
                return report
            tables, last = self._changed_tables(conn, key, int(cursor))
            if sweep:
                tables.update(self._all_tables(conn, key))
                self._last_sweep = now
            for table_id, identifier in sorted(tables.items(), key=lambda t: t[1]):
                try:
                    queued = self.refresh(conn, table_id, identifier)
                except NotFoundError:
                    continue  # dropped since its commit
                except PaimonMetaError as e:
                    log.warning("maintenance: cannot measure %s: %s", identifier, e)
                    report.errors[identifier] = str(e)
                    continue
                report.tables.append(identifier)
                report.queued += [(identifier, k.value) for k in queued]
            if sweep:
                for dropped in self.catalog.recycle_bin.expired():
                    if self.queue.enqueue(
                        dropped.table_id,
                        dropped.identifier,
                        MaintenanceKind.PURGE_DROPPED,
                        reason="retention",
                    ):
                        report.queued.append((dropped.identifier, MaintenanceKind.PURGE_DROPPED.value))
                # a dropped database past its retention goes once its tables are purged (their jobs
                # above): its entry outlives theirs (metastore.recycle_bin)
                for database in self.catalog.recycle_bin.expired_databases():
                    if self.catalog.recycle_bin.remove_database(database.drop_id):
                        report.purged_databases.append(database.name)
            conn.execute(
                text(
                    "UPDATE paimon_maintenance_cursors SET event_id = :last, updated_at = now() "
                    "WHERE catalog_key = :key"
                ),
                {"key": key, "last": last},
            )
            report.cursor = last
        return report

    def _changed_tables(self, conn: Connection, key: str, cursor: int) -> tuple[dict[int, str], int]:
        rows = conn.execute(
            text(
                "SELECT e.event_id, e.table_id, t.database_name || '.' || t.table_name AS identifier "
                "FROM paimon_commit_events e JOIN paimon_tables t ON t.table_id = e.table_id "
                "AND t.catalog_key = :key "
                "WHERE e.event_id > :cursor "
                "AND e.event_type IN ('snapshot_published', 'external', 'recovered') "
                "AND e.branch = 'main' ORDER BY e.event_id LIMIT :limit"
            ),
            {"key": key, "cursor": cursor, "limit": MAX_EVENTS_PER_TICK},
        ).all()
        # An event whose id was taken before the last one read but committed after it is passed over:
        # the next sweep measures its table anyway.
        last = int(rows[-1][0]) if rows else cursor
        return {int(r[1]): str(r[2]) for r in rows}, last

    @staticmethod
    def _all_tables(conn: Connection, key: str) -> dict[int, str]:
        rows = conn.execute(
            text(
                "SELECT table_id, database_name || '.' || table_name FROM paimon_tables "
                "WHERE catalog_key = :key AND coalesce(jsonb_typeof(table_schema), 'null') = 'null'"
            ),
            {"key": key},
        ).all()
        return {int(r[0]): str(r[1]) for r in rows}

    def refresh(self, conn: Connection, table_id: int, identifier: str) -> list[MaintenanceKind]:
        """Measure one table, store its debt, queue the jobs it calls for; the kinds newly queued."""
        key = self.catalog.registry.catalog_key
        last_runs = self._last_runs(conn, key, table_id)
        table = self.catalog.get_table(identifier)
        options = MaintenanceOptions.of(table.options.raw, self.catalog.options)
        partitions = None
        if options.partition_expiration_ms is not None and table.schema.partition_keys:
            partitions = [p.spec for p in list_partitions(self.catalog, identifier) if p.file_count > 0]
        debt = measure(table, options, last_runs=last_runs, partitions=partitions)
        self._store(conn, key, table_id, identifier, debt)
        if not options.enabled or self.queue.paused(identifier):
            return []
        queued = []
        for kind in debt.due():
            if self.queue.enqueue(table_id, identifier, kind, reason="debt", debt=_debt_of(kind, debt)):
                queued.append(kind)
        return queued

    @staticmethod
    def _last_runs(conn: Connection, key: str, table_id: int) -> Mapping[str, str]:
        value = conn.execute(
            text(
                "SELECT last_runs FROM paimon_maintenance_debts WHERE catalog_key = :key AND table_id = :id"
            ),
            {"key": key, "id": table_id},
        ).scalar_one_or_none()
        return dict(value or {})

    @staticmethod
    def _store(conn: Connection, key: str, table_id: int, identifier: str, debt: Debt) -> None:
        conn.execute(
            text(
                "INSERT INTO paimon_maintenance_debts (catalog_key, table_id, table_identifier, snapshot_id, "
                "debt, updated_at) VALUES (:key, :id, :identifier, :snapshot, CAST(:debt AS jsonb), now()) "
                "ON CONFLICT (catalog_key, table_id) DO UPDATE SET "
                "table_identifier = excluded.table_identifier, "
                "snapshot_id = excluded.snapshot_id, debt = excluded.debt, updated_at = now()"
            ),
            {
                "key": key,
                "id": table_id,
                "identifier": identifier,
                "snapshot": debt.snapshot_id,
                "debt": json.dumps(debt.to_dict()),
            },
        )


def _debt_of(kind: MaintenanceKind, debt: Debt) -> dict[str, Any]:
    """The part of the debt a job of ``kind`` is about (shown with the job)."""
    if kind is MaintenanceKind.COMPACT:
        return {
            "max_sorted_runs": debt.max_sorted_runs,
            "max_small_files": debt.max_small_files,
            "trigger": debt.compaction_trigger,
            "files": debt.files,
        }
    if kind is MaintenanceKind.EXPIRE_SNAPSHOTS:
        return {"snapshots": debt.snapshots}
    if kind is MaintenanceKind.EXPIRE_PARTITIONS:
        return {"expired_partitions": debt.expired_partitions}
    if kind is MaintenanceKind.CREATE_TAG:
        return {"tag_due": debt.tag_due, "tags_over_retention": debt.tags_over_retention}
    return {}


def record_success(catalog: MetastoreCatalog, table_id: int, identifier: str, kind: MaintenanceKind) -> None:
    """Note that a job of ``kind`` succeeded on the table now (the schedules count from it)."""
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_maintenance_debts (catalog_key, table_id, table_identifier, last_runs) "
                "VALUES (:key, :id, :identifier, jsonb_build_object(CAST(:kind AS text), to_jsonb(now()))) "
                "ON CONFLICT (catalog_key, table_id) DO UPDATE SET "
                "last_runs = paimon_maintenance_debts.last_runs || "
                "jsonb_build_object(CAST(:kind AS text), to_jsonb(now()))"
            ),
            {
                "key": catalog.registry.catalog_key,
                "id": table_id,
                "identifier": identifier,
                "kind": kind.value,
            },
        )


def debts(catalog: MetastoreCatalog) -> list[dict[str, Any]]:
    """Every registered table's debt as last measured (``paimon_maintenance_debts``; a dropped table's
    is kept for an undrop, not shown), by table."""
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT d.table_id, d.table_identifier, d.snapshot_id, d.debt, d.last_runs, d.updated_at "
                "FROM paimon_maintenance_debts d JOIN paimon_tables t ON t.table_id = d.table_id "
                "WHERE d.catalog_key = :key ORDER BY d.table_identifier"
            ),
            {"key": catalog.registry.catalog_key},
        ).mappings()
        return [dict(r) for r in rows]


def most_in_debt(
    catalog: MetastoreCatalog, *, limit: int, table_ids: Sequence[int] | None = None
) -> list[dict[str, Any]]:
    """The ``limit`` registered tables (of ``table_ids``; None: any) with the most debt pressure (the
    worst bucket's sorted runs or small files), most first: one range of the pressure index, never every
    table's debt (10^5 tables: 5 s for the console's page before)."""
    among = "" if table_ids is None else "AND d.table_id = ANY(CAST(:ids AS bigint[])) "
    with catalog.engine.connect() as conn:
        conn.execute(ORDERED_READS)
        rows = conn.execute(
            text(
                "SELECT d.table_id, d.table_identifier, d.snapshot_id, d.debt, d.last_runs, d.updated_at "  # noqa: S608 - constants
                "FROM paimon_maintenance_debts d WHERE d.catalog_key = :key "
                f"{among}AND EXISTS (SELECT 1 FROM paimon_tables t WHERE t.table_id = d.table_id) "
                f"ORDER BY {DEBT_PRESSURE.format(d='d.')} DESC, d.table_identifier DESC LIMIT :limit"
            ),
            {"key": catalog.registry.catalog_key, "ids": list(table_ids or ()), "limit": limit},
        ).mappings()
        return [dict(r) for r in rows]
