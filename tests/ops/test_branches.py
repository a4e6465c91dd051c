"""Branches: created from a tag or empty, dropped, renamed and fast-forwarded under the table lock as
Java lays them out (``branch/branch-NAME/{snapshot,schema,tag}``), each recorded as a maintenance run;
fast-forward moves main onto the branch through a new timeline, with the pointer, the log and the
statistics following."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.commit.guard import StorageGuard
from paimon_meta.errors import (
    BranchAlreadyExistsError,
    BranchNotFoundError,
    TagNotFoundError,
    UnsupportedError,
    ValidationError,
)
from paimon_meta.metastore.statistics import table_statistics
from paimon_meta.ops import branches as branch_ops
from paimon_meta.ops import tags as tag_ops
from paimon_meta.ops.expire import expire_snapshots
from paimon_meta.table.paths import branch_path
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.tags import TagManager
from paimon_meta.table.write.builder import Committer
from tests.ops.helpers import TABLE, create, read_keys, rows, write

pytestmark = pytest.mark.postgres


def _main(catalog: MetastoreCatalog, n: int) -> FileStoreTable:
    table = create(catalog)
    for i in range(n):
        assert write(catalog, [i * 10 + 1]) == i + 1
    return table


def commit_on_branch(table: FileStoreTable, name: str, keys: list[int]) -> None:
    """A commit to branch ``name`` as Java's writers make it (data files and manifests in the table's
    directories, the snapshot published to the branch's ``snapshot/``)."""
    io, root = table.file_io, branch_path(table.path, name)
    schema = SchemaManager(io, root).latest()
    assert schema is not None
    on_branch = FileStoreTable(io, table.path, schema)
    on_branch.snapshot_manager = SnapshotManager(io, root)

    def committer(t: FileStoreTable, user: str) -> Committer:
        guard = StorageGuard(io, root, load_snapshot_fn=t.snapshot_manager.snapshot)
        return CommitCoordinator(t, guard, commit_user=user)

    on_branch.committer_factory = committer
    builder = on_branch.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(rows(keys))
    builder.new_commit().commit(w.prepare_commit())


def _branch_keys(catalog: MetastoreCatalog, name: str) -> list[int]:
    builder = catalog.get_table(TABLE).branch(name).new_read_builder()
    return sorted(builder.new_read().to_arrow(builder.new_scan().plan().splits()).column("k").to_pylist())


def _runs(catalog: MetastoreCatalog) -> list[tuple[str, str, dict[str, Any], str | None]]:
    with catalog.engine.connect() as conn:
        result = conn.execute(
            text(
                "SELECT operation, event_type, payload, principal FROM paimon_maintenance_events"
                " WHERE operation LIKE '%branch' ORDER BY event_id"
            )
        )
        return [(r[0], r[1], r[2], r[3]) for r in result]


def test_create_from_a_tag_copies_javas_files(catalog: MetastoreCatalog) -> None:
    table = _main(catalog, 3)
    tag_ops.create_tag(catalog, TABLE, "t2", 2)
    assert branch_ops.create_branch(catalog, TABLE, "b1", "t2", principal="alice") == 2
    io, root = table.file_io, branch_path(table.path, "b1")
    main = SnapshotManager(io, table.path)
    assert io.read(SnapshotManager(io, root).snapshot_path(2)) == io.read(main.snapshot_path(2))
    assert SnapshotManager(io, root).list_snapshot_ids() == [2]
    assert SchemaManager(io, root).list_ids() == [0]
    assert TagManager(io, root).names() == ["t2"]
    assert branch_ops.list_branches(catalog, TABLE) == ["b1"]
    assert _branch_keys(catalog, "b1") == [1, 11]
    assert _runs(catalog)[-1] == ("create_branch", "finished", {"branch": "b1", "snapshot_id": 2}, "alice")


def test_create_refusals_leave_nothing(catalog: MetastoreCatalog) -> None:
    table = _main(catalog, 1)
    assert branch_ops.create_branch(catalog, TABLE, "empty") is None
    assert SchemaManager(table.file_io, branch_path(table.path, "empty")).list_ids() == [0]
    assert SnapshotManager(table.file_io, branch_path(table.path, "empty")).list_snapshot_ids() == []
    with pytest.raises(BranchAlreadyExistsError):
        branch_ops.create_branch(catalog, TABLE, "empty")
    for bad in ("main", "123", "a/b", "", "x:y"):
        with pytest.raises(ValidationError):
            branch_ops.create_branch(catalog, TABLE, bad)
    with pytest.raises(TagNotFoundError):
        branch_ops.create_branch(catalog, TABLE, "b2", "no-such-tag")
    assert branch_ops.list_branches(catalog, TABLE) == ["empty"]
    assert table.file_io.list_recursive(branch_path(table.path, "b2")) == []
    # bad names are refused before a run starts; the taken name and the missing tag are failed runs
    assert [r[1] for r in _runs(catalog)] == ["started", "finished", "started", "failed", "started", "failed"]


def test_rename_and_drop(catalog: MetastoreCatalog) -> None:
    table = _main(catalog, 2)
    tag_ops.create_tag(catalog, TABLE, "t1", 1)
    branch_ops.create_branch(catalog, TABLE, "b1", "t1")
    branch_ops.create_branch(catalog, TABLE, "other")
    commit_on_branch(table, "b1", [7])
    branch_ops.rename_branch(catalog, TABLE, "b1", "b2")
    assert branch_ops.list_branches(catalog, TABLE) == ["b2", "other"]
    assert table.file_io.list_recursive(branch_path(table.path, "b1")) == []
    assert _branch_keys(catalog, "b2") == [1, 7]
    assert TagManager(table.file_io, branch_path(table.path, "b2")).names() == ["t1"]
    with pytest.raises(BranchAlreadyExistsError):
        branch_ops.rename_branch(catalog, TABLE, "b2", "other")
    with pytest.raises(BranchNotFoundError):
        branch_ops.rename_branch(catalog, TABLE, "b1", "b3")
    with pytest.raises(ValidationError):
        branch_ops.rename_branch(catalog, TABLE, "b2", "main")
    branch_ops.drop_branch(catalog, TABLE, "b2")
    assert branch_ops.list_branches(catalog, TABLE) == ["other"]
    # no directory is left either (Java lists branches by directory)
    assert [p.name for p in Path(table.path, "branch").iterdir()] == ["branch-other"]
    with pytest.raises(BranchNotFoundError):
        branch_ops.drop_branch(catalog, TABLE, "b2")
    with pytest.raises(BranchNotFoundError):
        branch_ops.drop_branch(catalog, TABLE, "main")
    assert read_keys(catalog) == [1, 11]  # main untouched


def test_fast_forward_replaces_mains_later_snapshots(catalog: MetastoreCatalog) -> None:
    table = _main(catalog, 3)
    tag_ops.create_tag(catalog, TABLE, "t2", 2)
    tag_ops.create_tag(catalog, TABLE, "t3", 3)
    branch_ops.create_branch(catalog, TABLE, "b1", "t2")
    commit_on_branch(table, "b1", [100])
    commit_on_branch(table, "b1", [101])
    report = branch_ops.fast_forward(catalog, TABLE, "b1", principal="ops")
    assert (report.kept_through, report.removed_snapshots, report.added_snapshots) == (2, [3], [3, 4])
    assert (report.latest_snapshot_id, report.timeline) == (4, 1)
    assert read_keys(catalog) == [1, 11, 100, 101] == _branch_keys(catalog, "b1")
    io, main = table.file_io, SnapshotManager(table.file_io, table.path)
    for sid in (3, 4):
        assert io.read(main.snapshot_path(sid)) == io.read(
            SnapshotManager(io, branch_path(table.path, "b1")).snapshot_path(sid)
        )
    # main's tag of a removed snapshot is gone (Java deletes tags from the branch's earliest on); the
    # branch's tags are main's now
    assert TagManager(io, table.path).names() == ["t2"]
    row = catalog.table_row(TABLE)
    assert (row.latest_snapshot_id, row.timeline) == (4, 1)
    stats = table_statistics(catalog.engine, row.table_id)
    assert stats.complete and stats.record_count == 4
    # main goes on from the branch's latest: the next commit is snapshot 5, on top of it
    assert write(catalog, [200]) == 5
    assert read_keys(catalog) == [1, 11, 100, 101, 200]
    assert _runs(catalog)[-1][0:2] == ("fast_forward_branch", "finished")
    assert _runs(catalog)[-1][2]["removed_snapshots"] == [3]


def test_fast_forward_of_a_branch_main_did_not_move_past(catalog: MetastoreCatalog) -> None:
    table = _main(catalog, 2)
    tag_ops.create_tag(catalog, TABLE, "t2", 2)
    branch_ops.create_branch(catalog, TABLE, "b1", "t2")
    commit_on_branch(table, "b1", [100])
    report = branch_ops.fast_forward(catalog, TABLE, "b1")
    assert (report.removed_snapshots, report.added_snapshots, report.timeline) == ([], [3], 0)
    assert read_keys(catalog) == [1, 11, 100]
    assert catalog.table_row(TABLE).latest_snapshot_id == 3


def test_fast_forward_refusals(catalog: MetastoreCatalog) -> None:
    table = _main(catalog, 2)
    branch_ops.create_branch(catalog, TABLE, "empty")
    # a branch without a snapshot brings nothing: a no-op, as Paimon's catalog treats it
    noop = branch_ops.fast_forward(catalog, TABLE, "empty")
    assert (noop.removed_snapshots, noop.added_snapshots, noop.latest_snapshot_id) == ([], [], 2)
    assert read_keys(catalog) == [1, 11] and catalog.table_row(TABLE).latest_snapshot_id == 2
    with pytest.raises(BranchNotFoundError):
        branch_ops.fast_forward(catalog, TABLE, "nope")
    with pytest.raises(ValidationError):
        branch_ops.fast_forward(catalog, TABLE, "main")
    # a branch sharing no snapshot with main would empty main first: refused, main untouched
    commit_on_branch(table, "empty", [5])
    with pytest.raises(UnsupportedError):
        branch_ops.fast_forward(catalog, TABLE, "empty")
    assert read_keys(catalog) == [1, 11]
    assert catalog.table_row(TABLE).latest_snapshot_id == 2


def test_main_expiration_keeps_what_branches_read(catalog: MetastoreCatalog) -> None:
    """Main overwrites the rows a branch was made from and expires every snapshot but its latest; the
    branch (made from a tag since deleted, with a commit of its own) reads all its rows afterwards,
    while files only main's expired snapshots used are deleted."""
    table = _main(catalog, 2)
    tag_ops.create_tag(catalog, TABLE, "t2", 2)
    branch_ops.create_branch(catalog, TABLE, "b1", "t2")
    tag_ops.delete_tag(catalog, TABLE, "t2")
    commit_on_branch(table, "b1", [7])
    assert write(catalog, [100], overwrite=True) == 3  # deletes main's files of keys 1 and 11
    assert write(catalog, [101]) == 4
    report = expire_snapshots(catalog, TABLE, retain_min=1, time_retained_ms=0)
    assert report.expired == [1, 2, 3]
    assert report.deleted_metadata_files  # main's own lists and manifests of snapshot 1 went
    assert _branch_keys(catalog, "b1") == [1, 7, 11]
    assert read_keys(catalog) == [100, 101]


def test_main_expiration_keeps_what_a_branch_tag_alone_reads(catalog: MetastoreCatalog) -> None:
    """A branch's tag whose snapshot the branch itself no longer has (its own expiration, as Java's
    keeps tags) still reads its rows after main expired every snapshot it shared with it: expiration keeps
    what branch tags name, not only branch snapshots."""
    table = _main(catalog, 2)
    tag_ops.create_tag(catalog, TABLE, "t2", 2)
    branch_ops.create_branch(catalog, TABLE, "b1", "t2")
    tag_ops.delete_tag(catalog, TABLE, "t2")
    commit_on_branch(table, "b1", [7])
    io, root = table.file_io, branch_path(table.path, "b1")
    io.delete(SnapshotManager(io, root).snapshot_path(2))  # the branch's tag t2 is what holds snapshot 2
    assert TagManager(io, root).names() == ["t2"]
    assert write(catalog, [100], overwrite=True) == 3
    assert write(catalog, [101]) == 4
    assert expire_snapshots(catalog, TABLE, retain_min=1, time_retained_ms=0).expired == [1, 2, 3]
    builder = catalog.get_table(TABLE).branch("b1").new_read_builder().with_tag("t2")
    tagged = builder.new_read().to_arrow(builder.new_scan().plan().splits()).column("k").to_pylist()
    assert sorted(tagged) == [1, 11]


def test_fast_forward_interrupted_after_its_transaction_is_finished_by_running_it_again(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process dies after the new timeline is recorded and before storage changed: main still holds
    the snapshots being removed. Running fast-forward again (its reconcile deletes them, as the next
    lock holder's would) ends where one uninterrupted run ends."""
    table = _main(catalog, 3)
    tag_ops.create_tag(catalog, TABLE, "t2", 2)
    branch_ops.create_branch(catalog, TABLE, "b1", "t2")
    commit_on_branch(table, "b1", [100])

    def crash(*_args: object) -> None:
        raise OSError("killed")

    monkeypatch.setattr(branch_ops, "apply_fast_forward", crash)
    with pytest.raises(OSError):
        branch_ops.fast_forward(catalog, TABLE, "b1")
    assert SnapshotManager(table.file_io, table.path).list_snapshot_ids() == [1, 2, 3]
    assert (catalog.table_row(TABLE).latest_snapshot_id, catalog.table_row(TABLE).timeline) == (2, 1)
    monkeypatch.undo()
    report = branch_ops.fast_forward(catalog, TABLE, "b1")
    assert (report.removed_snapshots, report.added_snapshots, report.timeline) == ([], [3], 1)
    assert read_keys(catalog) == [1, 11, 100]
    assert catalog.table_row(TABLE).latest_snapshot_id == 3
    assert write(catalog, [200]) == 4
