"""Scan planning on synthetic metadata: merging, filters, manifest pruning, caching, corruption."""

from __future__ import annotations

from pathlib import Path

import pytest

from paimon_meta.errors import CorruptMetadataError, ValidationError
from paimon_meta.model.manifest import FileKind
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import INT, STRING, DataField
from paimon_meta.table.read.scan import PartitionFilter
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from tests.table.synthetic import CountingFileIO, SyntheticTable, data_file, entry

ADD, DELETE = FileKind.ADD, FileKind.DELETE
SCHEMA = TableSchema(
    0,
    (DataField(0, "id", INT()), DataField(1, "p", INT()), DataField(2, "s", STRING())),
    2,
    partition_keys=("p", "s"),
    options={"bucket": "2", "bucket-key": "id"},
)
TYPES = [INT(), STRING()]


def _table(tmp_path: Path) -> tuple[CountingFileIO, SyntheticTable, str]:
    fio = CountingFileIO()
    root = str(tmp_path / "db.db" / "t")
    return fio, SyntheticTable(fio, root, SCHEMA), root


def _build(tmp_path: Path) -> tuple[CountingFileIO, SyntheticTable, str]:
    """Snapshot 1: one manifest per partition (1,'a') (2,'b') (3,None); snapshot 2 deletes f1a0
    and adds f1a2 in bucket 1."""
    fio, syn, root = _table(tmp_path)
    metas = []
    for p, s in [(1, "a"), (2, "b"), (3, None)]:
        entries = [entry(ADD, [p, s], TYPES, b, data_file(f"f{p}{s}{b}.parquet")) for b in (0, 1)]
        metas.append(syn.manifest(entries, [(p, s)]))
    syn.commit(metas)
    delta = [
        entry(DELETE, [1, "a"], TYPES, 0, data_file("f1a0.parquet")),
        entry(ADD, [1, "a"], TYPES, 1, data_file("f1a2.parquet")),
    ]
    syn.commit([syn.manifest(delta, [(1, "a")])])
    return fio, syn, root


def _open(fio: CountingFileIO, root: str) -> FileStoreTable:
    """The table through the counting FileIO (``FileStoreTable.open`` would build its own)."""
    schema = SchemaManager(fio, root).latest()
    assert schema is not None
    return FileStoreTable(fio, root, schema)


def _files(table: FileStoreTable, **kwargs: object) -> list[tuple[tuple[object, ...], int, list[str]]]:
    builder = table.new_read_builder()
    if "snapshot" in kwargs:
        builder = builder.with_snapshot(kwargs["snapshot"])  # type: ignore[arg-type]
    if "partitions" in kwargs:
        builder = builder.with_partition_filter(kwargs["partitions"])  # type: ignore[arg-type]
    if "buckets" in kwargs:
        builder = builder.with_bucket_filter(kwargs["buckets"])  # type: ignore[arg-type]
    plan = builder.new_scan().plan()
    return [(s.partition_values, s.bucket, [f.file_name for f in s.files]) for s in plan.splits()]


def test_plan_merges_base_and_delta(tmp_path: Path) -> None:
    _, _, root = _build(tmp_path)
    table = FileStoreTable.open(root)
    latest = _files(table)
    assert sorted(latest) == [
        ((1, "a"), 1, ["f1a1.parquet", "f1a2.parquet"]),
        ((2, "b"), 0, ["f2b0.parquet"]),
        ((2, "b"), 1, ["f2b1.parquet"]),
        ((3, None), 0, ["f3None0.parquet"]),
        ((3, None), 1, ["f3None1.parquet"]),
    ]
    assert len(_files(table, snapshot=1)) == 6
    split = table.new_read_builder().new_scan().plan().splits()[0]
    assert split.snapshot_id == 2 and split.raw_convertible and split.total_buckets == 2
    assert split.file_paths[0].startswith(root + "/p=")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"p": 2}, {(2, "b")}),
        ({"p": "2"}, {(2, "b")}),  # Java's string form
        ({"s": "__DEFAULT_PARTITION__"}, {(3, None)}),
        ({"s": None}, {(3, None)}),
        ([{"p": 1}, {"s": "b"}], {(1, "a"), (2, "b")}),
        ({"p": 1, "s": "b"}, set()),
        (lambda values: values[0] >= 2, {(2, "b"), (3, None)}),
    ],
)
def test_partition_filters(tmp_path: Path, spec: object, expected: set[tuple[object, ...]]) -> None:
    _, _, root = _build(tmp_path)
    got = {values for values, _, _ in _files(FileStoreTable.open(root), partitions=spec)}
    assert got == expected


def test_partition_stats_prune_manifests_before_reading(tmp_path: Path) -> None:
    fio, _, root = _build(tmp_path)
    table = _open(fio, root)
    fio.reads.clear()
    _files(table, partitions={"p": 2})
    manifests_read = [p for p in fio.reads if "/manifest/manifest-" in p and "manifest-list" not in p]
    assert len(manifests_read) == 1  # only the (2, 'b') manifest; its stats are the only match
    fio.reads.clear()
    _files(table, partitions={"s": None})
    assert len([p for p in fio.reads if "/manifest/manifest-" in p and "manifest-list" not in p]) == 1


def test_bucket_filter_and_bucket_range_pruning(tmp_path: Path) -> None:
    fio, syn, root = _build(tmp_path)
    table = _open(fio, root)
    assert {b for _, b, _ in _files(table, buckets=0)} == {0}
    assert {b for _, b, _ in _files(table, buckets=[1])} == {1}
    # a manifest holding only bucket 5 is skipped by its min/max bucket without being read
    syn.commit([syn.manifest([entry(ADD, [9, "z"], TYPES, 5, data_file("f9.parquet"))], [(9, "z")])])
    table = _open(fio, root)
    fio.reads.clear()
    assert all(b == 0 for _, b, _ in _files(table, buckets=0))
    assert [p for p in fio.reads if "/manifest/manifest-" in p and "manifest-list" not in p]
    assert not [p for p in fio.reads if p.endswith(syn.base[-1].file_name)]


def test_warm_scans_read_no_manifests(tmp_path: Path) -> None:
    fio, _, root = _build(tmp_path)
    table = _open(fio, root)
    first = _files(table)
    assert [p for p in fio.reads if "/manifest/" in p]
    fio.reads.clear()
    assert _files(table) == first
    assert [p for p in fio.reads if "/manifest/" in p] == []
    assert table.manifest_cache.stats().hits >= 4


def test_empty_table_and_empty_snapshot(tmp_path: Path) -> None:
    _, syn, root = _table(tmp_path)
    table = FileStoreTable.open(root)
    plan = table.new_read_builder().new_scan().plan()
    assert plan.snapshot_id is None and plan.splits() == []
    assert table.new_read_builder().new_read().to_arrow(plan.splits()).schema.names == ["id", "p", "s"]
    syn.commit([])
    assert FileStoreTable.open(root).new_read_builder().new_scan().plan().snapshot_id == 1


def test_unknown_snapshot_and_partition_key(tmp_path: Path) -> None:
    _, _, root = _build(tmp_path)
    table = FileStoreTable.open(root)
    with pytest.raises(ValidationError):
        table.new_read_builder().with_snapshot(99).new_scan()
    with pytest.raises(ValidationError):
        table.new_read_builder().with_partition_filter({"id": 1}).new_scan()
    with pytest.raises(ValidationError):
        PartitionFilter(SCHEMA.partition_type.fields, "__DEFAULT_PARTITION__", {"p": "not-a-number"})


def test_double_add_across_manifests_is_corruption(tmp_path: Path) -> None:
    _, syn, root = _table(tmp_path)
    e = entry(ADD, [1, "a"], TYPES, 0, data_file("dup.parquet"))
    syn.commit([syn.manifest([e], [(1, "a")]), syn.manifest([e], [(1, "a")])])
    with pytest.raises(CorruptMetadataError) as err:
        FileStoreTable.open(root).new_read_builder().new_scan().plan()
    assert "already in the the map" in str(err.value)
    assert err.value.path is not None and syn.base[1].file_name in err.value.path


@pytest.mark.parametrize("target", ["manifest", "manifest-list", "snapshot"])
@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_corrupt_metadata_names_the_file(tmp_path: Path, target: str, damage: str) -> None:
    fio, syn, root = _build(tmp_path)
    snapshot = FileStoreTable.open(root).snapshot(2)
    path = {
        "manifest": syn.paths.manifest_path(syn.base[-1].file_name),
        "manifest-list": syn.paths.manifest_path(snapshot.delta_manifest_list),
        "snapshot": syn.paths.snapshot_path(2),
    }[target]
    data = fio.read(path)
    fio.write(path, data[: len(data) // 2] if damage == "truncate" else b"\x00garbage" * 8)
    with pytest.raises(CorruptMetadataError) as err:
        FileStoreTable.open(root).new_read_builder().new_scan().plan()
    assert err.value.path == path


def test_postpone_bucket_files_are_invisible_to_batch_reads(tmp_path: Path) -> None:
    fio = CountingFileIO()
    root = str(tmp_path / "postponed")
    syn = SyntheticTable(
        fio, root, TableSchema(0, SCHEMA.fields, 2, partition_keys=("p", "s"), options={"bucket": "-2"})
    )
    postponed = syn.manifest([entry(ADD, [1, "a"], TYPES, -2, data_file("late.parquet"))], [(1, "a")])
    real = syn.manifest([entry(ADD, [1, "a"], TYPES, 0, data_file("real.parquet"))], [(1, "a")])
    syn.commit([postponed, real])
    table = _open(fio, root)
    fio.reads.clear()
    assert _files(table) == [((1, "a"), 0, ["real.parquet"])]
    assert not [p for p in fio.reads if p.endswith(postponed.file_name)]  # pruned by bucket range
