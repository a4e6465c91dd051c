"""The pypaimon-shaped read API on golden tables: outputs, filters, errors, hints on a copy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from paimon_meta.errors import CorruptMetadataError, TableNotFoundError, ValidationError
from paimon_meta.table.table import FileStoreTable
from tests.fixtures.golden import golden_table_path

GoldenCopy = Callable[[str, str], Path]


def _append_09() -> FileStoreTable:
    return FileStoreTable.open(str(golden_table_path("parquet", "append_09")))


def test_outputs_agree() -> None:
    table = _append_09()
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    read = builder.new_read()
    arrow = read.to_arrow(splits)
    assert arrow.num_rows == 11 == sum(s.row_count for s in splits)
    batches = list(read.to_arrow_batches(splits))
    assert pa.Table.from_batches(batches, schema=read.schema).equals(arrow)
    assert read.to_arrow_batch_reader(splits).read_all().equals(arrow)
    frame = read.to_pandas(splits)
    assert list(frame.columns) == ["f0", "f1", "f2", "f3"] and len(frame) == 11
    assert builder.read_type() == table.fields
    assert table.arrow_schema() == read.schema


def test_partition_and_bucket_filters_on_golden_table() -> None:
    table = _append_09()

    def rows(builder_fn: Callable[..., object]) -> list[tuple[object, ...]]:
        builder = builder_fn(table.new_read_builder())
        out = builder.new_read().to_arrow(builder.new_scan().plan().splits())  # type: ignore[attr-defined]
        return sorted(tuple(r.values()) for r in out.to_pylist())

    assert rows(lambda b: b.with_partition_filter({"f1": 20})) == [
        ("Lucy", 20, 1, 14.1),
        ("Paul", 20, 1, None),
    ]
    assert rows(lambda b: b.with_partition_filter({"f1": "20"}).with_bucket_filter(1)) == []
    assert len(rows(lambda b: b.with_bucket_filter(1))) == 8  # Java put f2=0 rows of f1=10 in bucket 1
    assert len(rows(lambda b: b.with_partition_filter(lambda p: p[0] == 10))) == 9
    nulls = FileStoreTable.open(str(golden_table_path("parquet", "append_with_empty_partition")))
    builder = nulls.new_read_builder().with_partition_filter({"f0": "__DEFAULT_PARTITION__"})
    assert builder.new_read().to_arrow(builder.new_scan().plan().splits()).column("f0").null_count == 3


def test_projection_errors() -> None:
    with pytest.raises(ValidationError) as err:
        _append_09().new_read_builder().with_projection(["f0", "nope"]).new_scan()
    assert err.value.fields["field"] == "nope"


def test_open_missing_table(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        FileStoreTable.open(str(tmp_path / "nothing"))


def test_stale_hints_on_a_golden_copy(golden_copy: GoldenCopy) -> None:
    path = golden_copy("parquet", "append_09")
    (path / "snapshot" / "LATEST").write_text("3")  # stale: snapshot-4 exists
    (path / "snapshot" / "EARLIEST").unlink()
    table = FileStoreTable.open(str(path))
    assert table.snapshot_manager.latest_snapshot_id() == 5
    assert table.snapshot_manager.earliest_snapshot_id() == 1
    (path / "snapshot" / "snapshot-1").unlink()  # expired, hint left behind
    (path / "snapshot" / "EARLIEST").write_text("1")
    assert table.snapshot_manager.earliest_snapshot_id() == 2
    with pytest.raises(ValidationError):
        table.new_read_builder().with_snapshot(1).new_scan()
    builder = table.new_read_builder()
    assert builder.new_read().to_arrow(builder.new_scan().plan().splits()).num_rows == 11


def test_corrupt_manifest_in_golden_copy(golden_copy: GoldenCopy) -> None:
    path = golden_copy("parquet", "pk_table_with_mor")
    manifest = sorted((path / "manifest").glob("manifest-15bf*"))[0]
    manifest.write_bytes(manifest.read_bytes()[:100])
    with pytest.raises(CorruptMetadataError) as err:
        table = FileStoreTable.open(str(path))
        table.new_read_builder().new_scan().plan()
    assert err.value.path == str(manifest)


def test_dynamic_options_override_schema_options() -> None:
    path = str(golden_table_path("parquet", "pk_table_with_mor"))
    base = FileStoreTable.open(path)
    table = FileStoreTable(base.file_io, path, base.schema, {"sequence.field.sort-order": "descending"})
    assert table.options.get("sequence.field.sort-order") == "descending"
    assert base.options.get("sequence.field.sort-order") is None
    builder = (
        table.new_read_builder().with_projection(["k1", "k0", "s1"]).with_partition_filter({"p0": 0, "p1": 0})
    )
    rows = {
        (r["k1"], r["k0"]): r["s1"]
        for r in builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    }
    # descending: the smaller (s0, s1) now wins, so snapshot 2's "abandon" beats snapshot 1's "banana"
    assert rows[(0, 1)] == "abandon"
