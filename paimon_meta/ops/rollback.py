"""Roll a table back to an earlier snapshot (or a tag's snapshot), under the table lock.

Java's ``rollbackTo``: the snapshots after the target are removed and the next commit builds on the
target again, reusing the ids after it. How that squares with "no snapshot is ever overwritten" and with
exactly-once is in :mod:`paimon_meta.metastore.timelines`; the steps:

1. Take the table lock; reconcile storage into the log (so every snapshot being removed is on record).
2. Check: the target exists and is not after the latest; ``from_snapshot``, if given, is the latest
   (else ``CommitConflictError``: someone committed meanwhile).
3. One transaction: start the new timeline (pointer latest -> target by compare-and-set, the removed
   snapshots' identities recorded) and set the partition statistics to the target's totals.
4. Move LATEST back to the target, then delete ``snapshot-latest`` .. ``snapshot-(target+1)``, newest
   first; delete tags of removed snapshots (Java does too). A crash here leaves files the next lock
   holder deletes.
5. Record the run (a ``rollback`` maintenance event, with the principal). The data files and manifests
   only the removed snapshots used become orphans; ``remove-orphan-files`` deletes them once old.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from paimon_meta.commit.changes import partition_deltas
from paimon_meta.commit.metastore.guard import reconcile
from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import CommitConflictError, SnapshotNotFoundError, ValidationError
from paimon_meta.metastore.statistics import replace_statements
from paimon_meta.metastore.timelines import start_timeline
from paimon_meta.ops.common import maintenance_run, resolve_table, table_lock
from paimon_meta.table.tags import TagManager

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog


@dataclass(frozen=True, slots=True)
class RollbackReport:
    table: str
    target_snapshot_id: int
    rolled_back_from: int
    removed_snapshots: list[int]
    deleted_tags: list[str]
    timeline: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rollback(
    catalog: MetastoreCatalog,
    identifier: str,
    *,
    snapshot_id: int | None = None,
    tag: str | None = None,
    from_snapshot: int | None = None,
    principal: str | None = None,
    reason: str | None = None,
) -> RollbackReport:
    """Roll ``identifier`` back to ``snapshot_id`` or to tag ``tag``'s snapshot (exactly one).
    ``reason``: why (the console asks for one), recorded in the run's settings.

    Raises:
        ValidationError: neither or both targets given.
        SnapshotNotFoundError / TagNotFoundError: no such target (or it expired).
        CommitConflictError: ``from_snapshot`` is not the latest snapshot.
    """
    if (snapshot_id is None) == (tag is None):
        raise ValidationError("roll back to exactly one of a snapshot id or a tag")
    row, table = resolve_table(catalog, identifier)
    settings: dict[str, Any] = {"snapshot_id": snapshot_id, "tag": tag, "from_snapshot": from_snapshot}
    if reason is not None:
        settings["reason"] = reason
    audit = maintenance_run(
        catalog, row, MaintenanceOperation.ROLLBACK, dry_run=False, settings=settings, principal=principal
    )
    with audit as run, table_lock(catalog, row, "rollback"):
        snapshots = table.snapshot_manager
        reconcile(catalog.registry, catalog.events, row, snapshots)
        latest = snapshots.latest_snapshot_id()
        if latest is None:
            raise SnapshotNotFoundError(
                f"table {row.identifier} has no snapshot to roll back", resource_name=identifier
            )
        if from_snapshot is not None and from_snapshot != latest:
            raise CommitConflictError(
                f"table {row.identifier} is at snapshot {latest}, not {from_snapshot}",
                reason="latest_changed",
            )
        tags = TagManager(table.file_io, table.path)
        target = snapshot_id if tag is None else tags.get(tag).snapshot.id
        assert target is not None
        if target > latest or not snapshots.snapshot_exists(target):
            raise SnapshotNotFoundError(
                f"table {row.identifier} has no snapshot {target} (latest {latest})", snapshot_id=target
            )
        current = catalog.registry.get_table_row_by_id(row.table_id)
        removed = [
            snapshots.snapshot(s) for s in range(target + 1, latest + 1) if snapshots.snapshot_exists(s)
        ]
        timeline = current.timeline + (1 if removed else 0)
        if removed:
            scan = table.new_read_builder().with_snapshot(target).new_scan().file_store_scan
            totals = partition_deltas(scan.plan_files(), table.partition_spec)
            with catalog.engine.begin() as conn:
                start_timeline(
                    conn,
                    row.table_id,
                    timeline=timeline,
                    base_snapshot_id=target,
                    rolled_back_from=latest,
                    removed=removed,
                    principal=principal,
                )
                for sql, params in replace_statements(row.table_id, target, totals):
                    conn.exec_driver_sql(sql, params)
            # LATEST first, so the hint never names a deleted snapshot (a reader that finds
            # snapshot-(target+1) still there lists the directory instead, as Java's HintFileUtils does)
            snapshots.commit_latest_hint(target)
            for snap in reversed(removed):  # newest first: what is left is always a contiguous prefix
                table.file_io.delete(snapshots.snapshot_path(snap.id))
        removed_ids = {s.id for s in removed}
        deleted_tags = [n for n in tags.names() if tags.get(n).snapshot.id in removed_ids]
        for name in deleted_tags:
            tags.delete(name)
        report = RollbackReport(row.identifier, target, latest, sorted(removed_ids), deleted_tags, timeline)
        run.record(MaintenanceEventType.FINISHED, report.to_dict())
    return report
