"""Branches as Java lays them out: reading a branch, ``scan.fallback-branch``, commits refused on a branch.

The branch is built on storage the way Java builds it: ``BranchManager.createBranch(name, snapshotId)``
copies the snapshot file and its schema file into ``branch/branch-b1/``; later commits to the branch
(what Java's writers do on ``t$branch_b1``) write data files and manifests into the table's own
directories and publish the snapshot into the branch's ``snapshot/``. Our public commit path refuses
branches, so the test commits to the branch with a coordinator whose snapshots are the branch's.

    main:  s1 A={1,2}  s2 B={3}                         -> A={1:main,2:main} B={3}
    b1:    s1 (copy of main s1)  s2 C={5,6}  s3 A={1:b1} -> A={1:b1,2:main} C={5,6}
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.catalog.storage import open_table, storage_committer
from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.commit.guard import StorageGuard
from paimon_meta.errors import TableNotFoundError, UnsupportedError, ValidationError
from paimon_meta.io import get_file_io
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, STRING, DataField
from paimon_meta.table.option_policy import SCAN_FALLBACK_BRANCH, check_read_options, check_write_options
from paimon_meta.table.paths import branch_path, join_path
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.builder import Committer

Row = dict[str, Any]
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        ("v", pa.string()),
    ]
)


def _schema(**options: str) -> TableSchema:
    fields = (
        DataField(0, "id", BIGINT(False)),
        DataField(1, "dt", STRING(False)),
        DataField(2, "v", STRING()),
    )
    return TableSchema(0, fields, 2, ("dt",), ("id", "dt"), {"bucket": "2", **options})


def _write(table: FileStoreTable, rows: list[Row]) -> None:
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    write.write_arrow(pa.Table.from_pylist(rows, schema=ARROW))
    builder.new_commit().commit(write.prepare_commit())
    write.close()


def create_branch(path: str, name: str, snapshot_id: int) -> None:
    """``BranchManager.createBranch(name, snapshotId)``: copy the snapshot and its schema file."""
    io = get_file_io(path)
    main = SnapshotManager(io, path)
    snapshot = main.snapshot(snapshot_id)
    root = branch_path(path, name)
    io.create_if_absent(
        SnapshotManager(io, root).snapshot_path(snapshot_id), io.read(main.snapshot_path(snapshot_id))
    )
    schemas = SchemaManager(io, path)
    io.create_if_absent(
        SchemaManager(io, root).schema_path(snapshot.schema_id),
        io.read(schemas.schema_path(snapshot.schema_id)),
    )


def commit_on_branch(path: str, name: str, rows: list[Row]) -> None:
    """A commit to branch ``name`` as Java's writers make it: data files and manifests in the table's
    directories, the snapshot built on and published to the branch's snapshots."""
    io = get_file_io(path)
    root = branch_path(path, name)
    schema = SchemaManager(io, root).latest()
    assert schema is not None
    table = FileStoreTable(io, path, schema)  # a main-branch object: shared data and manifest paths
    table.snapshot_manager = SnapshotManager(io, root)

    def committer(t: FileStoreTable, user: str) -> Committer:
        guard = StorageGuard(io, root, load_snapshot_fn=t.snapshot_manager.snapshot)
        return CommitCoordinator(t, guard, commit_user=user)

    table.committer_factory = committer
    _write(table, rows)


@pytest.fixture
def path(tmp_path: Path) -> str:
    path = str(tmp_path / "db.db" / "t")
    assert SchemaManager(get_file_io(path), path).commit_new_schema(_schema())
    main = open_table(path)
    _write(main, [{"id": 1, "dt": "A", "v": "main"}, {"id": 2, "dt": "A", "v": "main"}])
    _write(main, [{"id": 3, "dt": "B", "v": "main"}])
    create_branch(path, "b1", 1)
    commit_on_branch(path, "b1", [{"id": 5, "dt": "C", "v": "b1"}, {"id": 6, "dt": "C", "v": "b1"}])
    commit_on_branch(path, "b1", [{"id": 1, "dt": "A", "v": "b1"}])
    return path


def _rows(table: FileStoreTable, **kw: Any) -> list[tuple[Any, ...]]:
    builder = table.new_read_builder()
    if "snapshot" in kw:
        builder = builder.with_snapshot(kw["snapshot"])
    if "partition" in kw:
        builder = builder.with_partition_filter(kw["partition"])
    if "projection" in kw:
        builder = builder.with_projection(kw["projection"])
    out = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sorted(tuple(r.values()) for r in out.to_pylist())


MAIN = [(1, "A", "main"), (2, "A", "main"), (3, "B", "main")]
B1 = [(1, "A", "b1"), (2, "A", "main"), (5, "C", "b1"), (6, "C", "b1")]


def test_layout_is_javas(path: str) -> None:
    io = get_file_io(path)
    root = branch_path(path, "b1")
    assert root == join_path(path, "branch", "branch-b1")
    assert SnapshotManager(io, root).list_snapshot_ids() == [1, 2, 3]
    assert SnapshotManager(io, path).list_snapshot_ids() == [1, 2]
    # manifests and data files of the branch's commits are in the table's directories
    assert not any("/manifest/" in s.path or "/dt=" in s.path for s in io.list_recursive(root))
    branch_snapshot = SnapshotManager(io, root).snapshot(2)
    assert io.exists(join_path(path, "manifest", branch_snapshot.delta_manifest_list))
    assert any("/dt=C/bucket-" in s.path for s in io.list_recursive(path))


def test_branch_read_and_time_travel(path: str) -> None:
    main = FileStoreTable.open(path)
    assert main.branch_names() == ["b1"]
    b1 = main.branch("b1")
    assert (b1.branch_name, b1.options.get("branch")) == ("b1", "b1")
    assert _rows(b1) == B1
    assert _rows(FileStoreTable.open(path, branch="b1")) == B1
    assert _rows(b1, snapshot=2) == [(1, "A", "main"), (2, "A", "main"), (5, "C", "b1"), (6, "C", "b1")]
    assert _rows(b1, snapshot=1) == [(1, "A", "main"), (2, "A", "main")]
    assert _rows(b1, partition={"dt": "C"}, projection=["v", "id"]) == [("b1", 5), ("b1", 6)]
    with pytest.raises(ValidationError):
        b1.new_read_builder().with_snapshot(4).new_scan()
    assert _rows(main) == MAIN  # the branch's commits leave main alone
    assert _rows(b1.branch("main")) == MAIN
    with pytest.raises(TableNotFoundError):
        main.branch("nope")
    with pytest.raises(ValidationError):
        main.branch("12")  # Java refuses numeric branch names (they mean snapshot ids)


def test_fallback_branch_serves_the_partitions_main_lacks(path: str) -> None:
    plain = FileStoreTable.open(path)
    table = FileStoreTable(plain.file_io, path, plain.schema, {SCAN_FALLBACK_BRANCH: "b1"})
    # A and B are main's (main's A wins over b1's A, even row 1 that b1 changed); C only b1 has
    assert _rows(table) == [*MAIN, (5, "C", "b1"), (6, "C", "b1")]
    splits = table.new_read_builder().new_scan().plan().splits()
    assert {(s.partition_values, s.fallback) for s in splits} == {
        (("A",), False),
        (("B",), False),
        (("C",), True),
    }
    assert _rows(table, partition={"dt": "C"}) == [(5, "C", "b1"), (6, "C", "b1")]
    assert _rows(table, partition={"dt": "A"}) == [(1, "A", "main"), (2, "A", "main")]
    assert _rows(table, projection=["v", "id"]) == sorted(
        [("main", 1), ("main", 2), ("main", 3), ("b1", 5), ("b1", 6)]
    )
    # time travel: the fallback reads its latest snapshot not newer than main's (b1's s1 = main's s1)
    assert _rows(table, snapshot=1) == [(1, "A", "main"), (2, "A", "main")]
    assert _rows(table, snapshot=2) == MAIN
    assert _rows(plain) == MAIN  # without the option the fallback is not read


def test_fallback_branch_from_the_schema_file(path: str) -> None:
    io = get_file_io(path)
    evolved = dataclasses.replace(_schema(**{SCAN_FALLBACK_BRANCH: "b1"}), id=1)
    assert SchemaManager(io, path).commit_new_schema(evolved)
    assert _rows(FileStoreTable.open(path)) == [*MAIN, (5, "C", "b1"), (6, "C", "b1")]
    # the branch itself reads without fallback of its own
    assert _rows(FileStoreTable.open(path, branch="b1")) == B1


def test_fallback_schema_rules(path: str) -> None:
    plain = FileStoreTable.open(path)
    missing = FileStoreTable(plain.file_io, path, plain.schema, {SCAN_FALLBACK_BRANCH: "nope"})
    with pytest.raises(ValidationError) as err:
        missing.new_read_builder().new_scan()
    assert err.value.fields == {"option": SCAN_FALLBACK_BRANCH, "value": "nope"}
    io = plain.file_io
    wider = dataclasses.replace(
        _schema(), fields=(*_schema().fields, DataField(3, "w", STRING())), highest_field_id=3
    )
    assert SchemaManager(io, branch_path(path, "b2")).commit_new_schema(wider)
    other_keys = dataclasses.replace(_schema(), primary_keys=("id", "dt", "v"))
    assert SchemaManager(io, branch_path(path, "b3")).commit_new_schema(other_keys)
    nullable = dataclasses.replace(
        _schema(),
        fields=tuple(dataclasses.replace(f, type=f.type.with_nullable(True)) for f in _schema().fields),
    )
    assert SchemaManager(io, branch_path(path, "b4")).commit_new_schema(nullable)
    for name in ("b2", "b3"):
        table = FileStoreTable(io, path, plain.schema, {SCAN_FALLBACK_BRANCH: name})
        with pytest.raises(ValidationError, match=name):
            table.new_read_builder().new_read()
    # nullability aside the types match (Java's equalsIgnoreNullable): an empty branch adds nothing
    table = FileStoreTable(io, path, plain.schema, {SCAN_FALLBACK_BRANCH: "b4"})
    assert _rows(table) == MAIN


def _files(path: str) -> list[str]:
    return sorted(s.path for s in get_file_io(path).list_recursive(path))


def test_commits_on_a_branch_are_refused_before_writing(path: str) -> None:
    before = _files(path)
    b1 = open_table(path).branch("b1")
    assert b1.committer_factory is storage_committer
    rows = pa.Table.from_pylist([{"id": 9, "dt": "D", "v": "x"}], schema=ARROW)
    builder = b1.new_batch_write_builder()
    with pytest.raises(UnsupportedError) as err:
        builder.new_write()
    assert err.value.fields["option"] == "branch" and "b1" in str(err.value)
    for make in (builder.new_commit, b1.new_stream_write_builder().new_commit):
        with pytest.raises(UnsupportedError, match="'b1'") as err:
            make()
        assert err.value.fields == {"option": "branch", "value": "b1", "branch": "b1"}
    guard = StorageGuard(b1.file_io, b1.path, load_snapshot_fn=b1.snapshot_manager.snapshot)
    with pytest.raises(UnsupportedError, match="'b1'"):
        CommitCoordinator(b1, guard, commit_user="u")
    # main messages committed through a table whose options name a branch: refused, not landed on main
    main = open_table(path)
    write = main.new_batch_write_builder().new_write()
    write.write_arrow(rows)
    messages = write.prepare_commit()
    write.close()
    written = _files(path)
    renamed = FileStoreTable(main.file_io, path, main.schema, {"branch": "b1"})
    renamed.committer_factory = storage_committer
    with pytest.raises(UnsupportedError, match="'b1'"):
        renamed.new_batch_write_builder().new_commit().commit(messages)
    with pytest.raises(UnsupportedError, match="'b1'"):
        storage_committer(renamed, "u").commit(messages)
    assert _files(path) == written and set(before) <= set(written)
    assert [p for p in written if p not in before and "/dt=D/" not in p] == []
    assert SnapshotManager(main.file_io, path).list_snapshot_ids() == [1, 2]
    assert SnapshotManager(main.file_io, branch_path(path, "b1")).list_snapshot_ids() == [1, 2, 3]
    # and such a table does not read main's snapshots as if they were b1's
    with pytest.raises(UnsupportedError) as err:
        renamed.new_read_builder().new_scan()
    assert err.value.fields == {"option": "branch", "value": "b1"}


def test_option_audit_accepts_fallback_and_refuses_branch_writes() -> None:
    check_read_options({SCAN_FALLBACK_BRANCH: "b1", "branch": "b1"})
    check_write_options({SCAN_FALLBACK_BRANCH: "b1", "branch": "main"})
    for key in ("scan.fallback-snapshot-branch", "scan.fallback-delta-branch", "scan.primary-branch"):
        with pytest.raises(UnsupportedError):
            check_read_options({key: "b1"})
