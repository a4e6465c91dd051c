"""Create, drop, rename and fast-forward branches under the table lock, each recorded as a maintenance run.

Every branch operation holds the table's metastore lock: branch files are written only by a lock
holder, so two operations on one table never interleave, and expiration (which takes the lock too)
never decides on a tag or snapshot a branch is being made from. Fast-forward changes main's snapshots,
so it is a rollback as far as the metastore is concerned (:mod:`paimon_meta.ops.rollback`):

1. Take the lock; reconcile storage into the log (every main snapshot being removed is on record).
2. Plan (:func:`paimon_meta.table.branches.plan_fast_forward`): main keeps its snapshots up to
   ``keep_through``; its later ones are removed, the branch's later ones added.
3. If main loses snapshots: one transaction starts a new timeline (pointer latest -> ``keep_through`` by
   compare-and-set, the removed snapshots' identities recorded), so exactly-once lookups stop counting
   them and a crash before their deletion is finished by the next lock holder.
4. Storage (:func:`paimon_meta.table.branches.apply_fast_forward`), then reconcile again: the added
   snapshots are recorded (``external``) and the pointer moves to the branch's latest; the partition
   statistics are set to the new latest snapshot's totals.
5. Record the run. Files only main's removed snapshots used become orphans (``remove-orphan-files``).

Create, drop and rename keep the branch's pointer row (:mod:`paimon_meta.metastore.branches`) in step,
after storage; fast-forward leaves the branch (and its row) as it was: only main moves.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from paimon_meta.commit.changes import partition_deltas
from paimon_meta.commit.metastore.guard import reconcile
from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.metastore.branches import drop_branch_row, put_branch, rename_branch_row
from paimon_meta.metastore.registry import TableRow
from paimon_meta.metastore.statistics import replace_statements
from paimon_meta.metastore.timelines import snapshot_identity, start_timeline
from paimon_meta.ops.common import MaintenanceRun, maintenance_run, resolve_table, table_lock
from paimon_meta.table.branches import (
    BranchManager,
    apply_fast_forward,
    plan_fast_forward,
    validate_new_branch_name,
)
from paimon_meta.table.option_policy import MAIN_BRANCH
from paimon_meta.table.snapshots import SnapshotManager
from paimon_meta.table.table import FileStoreTable

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog


@dataclass(frozen=True, slots=True)
class FastForwardReport:
    table: str
    branch: str
    kept_through: int
    removed_snapshots: list[int]
    added_snapshots: list[int]
    latest_snapshot_id: int
    timeline: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _branch_has_snapshot(table: FileStoreTable, name: str) -> bool:
    """Whether branch ``name`` of ``table`` has a snapshot (``BranchNotFoundError`` if no such branch)."""
    branches = BranchManager(table.file_io, table.path)
    branches.require(name)
    return bool(SnapshotManager(table.file_io, branches.root(name)).list_snapshot_ids())


def list_branches(catalog: MetastoreCatalog, identifier: str) -> list[str]:
    """The branches of table ``identifier`` (main not included), sorted; read where its registry row
    places it. ``TableNotFoundError`` if there is no such table."""
    location = catalog.paimon_location(catalog.table_row(identifier))
    return BranchManager(catalog.table_file_io(location), location).names()


def branch_table(catalog: MetastoreCatalog, identifier: str, name: str) -> tuple[TableRow, FileStoreTable]:
    """The registry row of ``identifier`` and its branch ``name`` as reads and commits on the branch see
    it (the branch's schema and snapshots, the table's manifests and data). ``BranchNotFoundError`` if
    there is no such branch; ``TableNotFoundError`` if no such table."""
    row, table = resolve_table(catalog, identifier)
    BranchManager(table.file_io, table.path).require(name)
    return row, table.branch(name)


def _audited(
    catalog: MetastoreCatalog,
    row: TableRow,
    operation: MaintenanceOperation,
    settings: dict[str, Any],
    principal: str | None,
) -> AbstractContextManager[MaintenanceRun]:
    return maintenance_run(catalog, row, operation, dry_run=False, settings=settings, principal=principal)


def create_branch(
    catalog: MetastoreCatalog,
    identifier: str,
    name: str,
    from_tag: str | None = None,
    *,
    principal: str | None = None,
) -> int | None:
    """Create branch ``name`` of ``identifier`` from main's latest schema, or from tag ``from_tag``;
    returns the branch's snapshot id (None for an empty branch).

    Raises:
        ValidationError: a bad branch name (``main`` included).
        BranchAlreadyExistsError: the name is taken.
        TagNotFoundError: no such tag.
    """
    validate_new_branch_name(name)
    row, table = resolve_table(catalog, identifier)
    settings = {"branch": name, "from_tag": from_tag}
    with (
        _audited(catalog, row, MaintenanceOperation.CREATE_BRANCH, settings, principal) as run,
        table_lock(catalog, row, "create-branch"),
    ):
        snapshot = BranchManager(table.file_io, table.path).create(name, from_tag)
        sid = None if snapshot is None else snapshot.id
        with catalog.engine.begin() as conn:  # after storage (metastore.branches B2)
            put_branch(conn, row.table_id, name, sid)
        run.record(
            MaintenanceEventType.FINISHED,
            {"branch": name, "snapshot_id": sid},
        )
    return sid


def drop_branch(
    catalog: MetastoreCatalog, identifier: str, name: str, *, principal: str | None = None
) -> None:
    """Drop branch ``name``: its directory is deleted; data files only it used become orphans.
    ``BranchNotFoundError`` if there is no such branch."""
    row, table = resolve_table(catalog, identifier)
    with (
        _audited(catalog, row, MaintenanceOperation.DROP_BRANCH, {"branch": name}, principal) as run,
        table_lock(catalog, row, "drop-branch"),
    ):
        deleted = BranchManager(table.file_io, table.path).drop(name)
        with catalog.engine.begin() as conn:
            drop_branch_row(conn, row.table_id, name)
        run.record(
            MaintenanceEventType.FINISHED,
            {"branch": name, "files": deleted},
        )


def rename_branch(
    catalog: MetastoreCatalog, identifier: str, name: str, to: str, *, principal: str | None = None
) -> None:
    """Rename branch ``name`` to ``to``.

    Raises:
        BranchNotFoundError: no branch ``name``.
        BranchAlreadyExistsError: ``to`` is taken.
        ValidationError: ``to`` is not a valid branch name, or ``name`` is main.
    """
    validate_new_branch_name(to)
    row, table = resolve_table(catalog, identifier)
    with (
        _audited(
            catalog, row, MaintenanceOperation.RENAME_BRANCH, {"branch": name, "to_branch": to}, principal
        ) as run,
        table_lock(catalog, row, "rename-branch"),
    ):
        moved = BranchManager(table.file_io, table.path).rename(name, to)
        with catalog.engine.begin() as conn:
            rename_branch_row(conn, row.table_id, name, to)
        run.record(
            MaintenanceEventType.FINISHED,
            {"branch": name, "to_branch": to, "files": moved},
        )


def fast_forward(
    catalog: MetastoreCatalog, identifier: str, name: str, *, principal: str | None = None
) -> FastForwardReport:
    """Make main equal to branch ``name`` (Java's ``fastForward``); see the module's steps. A branch
    without a snapshot has nothing to bring: main is left as it is (a no-op, recorded), as Paimon's
    catalog treats it.

    Raises:
        BranchNotFoundError: no such branch.
        ValidationError: ``main``.
        UnsupportedError: main would lose every snapshot (the branch shares none with it).
        CommitConflictError: the table moved while planning (nothing was changed).
    """
    row, table = resolve_table(catalog, identifier)
    with (
        _audited(catalog, row, MaintenanceOperation.FAST_FORWARD_BRANCH, {"branch": name}, principal) as run,
        table_lock(catalog, row, "fast-forward-branch"),
    ):
        snapshots = SnapshotManager(table.file_io, table.path)
        reconcile(catalog.registry, catalog.events, row, snapshots)
        if name != MAIN_BRANCH and not _branch_has_snapshot(table, name):
            current = catalog.registry.get_table_row_by_id(row.table_id)
            latest = snapshots.latest_snapshot_id() or 0
            report = FastForwardReport(row.identifier, name, latest, [], [], latest, current.timeline)
            run.record(MaintenanceEventType.FINISHED, {**report.to_dict(), "noop": "branch has no snapshot"})
            return report
        plan = plan_fast_forward(table.file_io, table.path, name)
        current = catalog.registry.get_table_row_by_id(row.table_id)
        timeline = current.timeline
        if plan.removed:
            if plan.keep_through == 0:
                # the metastore's timelines start from a snapshot; a table emptied and refilled is not one
                raise UnsupportedError(
                    f"fast-forwarding {row.identifier} to branch {name!r} would remove every snapshot of "
                    "main (the branch shares none with it)"
                )
            gone = {snapshot_identity(s) for s in plan.removed}
            if any(snapshot_identity(s) in gone for s, _ in plan.added):
                # a later lock holder would take such a snapshot for an unfinished removal and delete it
                raise ValidationError(
                    f"branch {name!r} holds a snapshot main is to lose under another id", branch=name
                )
            timeline += 1
            with catalog.engine.begin() as conn:
                start_timeline(
                    conn,
                    row.table_id,
                    timeline=timeline,
                    base_snapshot_id=plan.keep_through,
                    rolled_back_from=plan.removed[-1].id,
                    removed=plan.removed,
                    principal=principal,
                )
        apply_fast_forward(table.file_io, table.path, plan)
        snapshots = SnapshotManager(table.file_io, table.path)
        reconcile(catalog.registry, catalog.events, row, snapshots)
        main = FileStoreTable.load(table.file_io, table.path)
        scan = main.new_read_builder().with_snapshot(plan.latest).new_scan().file_store_scan
        totals = partition_deltas(scan.plan_files(), main.partition_spec)
        with catalog.engine.begin() as conn:
            for sql, params in replace_statements(row.table_id, plan.latest, totals):
                conn.exec_driver_sql(sql, params)
        report = FastForwardReport(
            row.identifier,
            name,
            plan.keep_through,
            [s.id for s in plan.removed],
            [s.id for s, _ in plan.added],
            plan.latest,
            timeline,
        )
        run.record(MaintenanceEventType.FINISHED, report.to_dict())
    return report
