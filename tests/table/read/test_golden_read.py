"""Reading the Java-written golden tables: every table, every snapshot its README describes."""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from paimon_meta.table.table import FileStoreTable
from tests.fixtures.golden import GOLDEN_TABLES, golden_table_path
from tests.table.golden_rows import EXPECTED, EXPECTED_DV_MERGE_ON_READ, Row


def _normalise_table(table: pa.Table) -> list[Row]:
    """Rows with timestamps as epoch nanoseconds and dates as epoch days (exact comparisons)."""
    columns: list[list[Any]] = []
    for col in table.columns:
        if pa.types.is_timestamp(col.type):
            col = pc.cast(pc.cast(col, pa.timestamp("ns")), pa.int64())
        elif pa.types.is_date32(col.type):
            col = pc.cast(col, pa.int32())
        columns.append(col.to_pylist())
    return sorted(zip(*columns), key=repr) if columns else []


def _normalise_expected(rows: list[Row], schema: pa.Schema) -> list[Row]:
    out = []
    for row in rows:
        values = []
        for value, field in zip(row, schema):
            if value is not None and pa.types.is_timestamp(field.type):
                value = int(np.datetime64(value.replace(" ", "T"), "ns").astype(np.int64))
            elif value is not None and pa.types.is_decimal(field.type):
                value = Decimal(value)
            values.append(value)
        out.append(tuple(values))
    return sorted(out, key=repr)


def _read(table: FileStoreTable, snapshot_id: int | None) -> pa.Table:
    builder = table.new_read_builder()
    if snapshot_id is not None:
        builder = builder.with_snapshot(snapshot_id)
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


@pytest.mark.parametrize(("fmt", "name", "snapshot_id"), sorted(EXPECTED, key=repr), ids=repr)
def test_rows_match_readme(fmt: str, name: str, snapshot_id: int | None) -> None:
    table = FileStoreTable.open(str(golden_table_path(fmt, name)))
    result = _read(table, snapshot_id)
    assert _normalise_table(result) == _normalise_expected(EXPECTED[(fmt, name, snapshot_id)], result.schema)


@pytest.mark.parametrize(("fmt", "name", "snapshot_id"), sorted(EXPECTED_DV_MERGE_ON_READ), ids=repr)
def test_deletion_vector_merge_on_read_shows_level0(fmt: str, name: str, snapshot_id: int) -> None:
    path = str(golden_table_path(fmt, name))
    plain = FileStoreTable.open(path)
    table = FileStoreTable(plain.file_io, path, plain.schema, {"deletion-vectors.merge-on-read": "true"})
    result = _read(table, snapshot_id)
    expected = EXPECTED_DV_MERGE_ON_READ[(fmt, name, snapshot_id)]
    assert _normalise_table(result) == _normalise_expected(expected, result.schema)
    # without the option, the uncompacted files stay invisible (Java's batch-read default)
    assert _normalise_table(_read(plain, snapshot_id)) != _normalise_table(result)


def test_every_golden_table_and_both_manifest_formats_are_covered() -> None:
    covered = {(fmt, name) for fmt, name, sid in EXPECTED if sid is None}
    assert covered == set(GOLDEN_TABLES)
    formats = {
        FileStoreTable.open(str(golden_table_path(f, n))).options.manifest_format for f, n in GOLDEN_TABLES
    }
    assert formats == {"avro", "orc"}


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES)
def test_planned_data_files_exist_where_java_put_them(fmt: str, name: str) -> None:
    """The partition path rendering (escaping, default partition name) finds every file."""
    table = FileStoreTable.open(str(golden_table_path(fmt, name)))
    for sid in table.snapshot_manager.list_snapshot_ids():
        for split in table.new_read_builder().with_snapshot(sid).new_scan().plan().splits():
            for path in split.file_paths:
                assert os.path.isfile(path), path


def test_complex_types_keep_their_precision() -> None:
    table = FileStoreTable.open(str(golden_table_path("parquet", "append_complex_data")))
    schema = table.new_read_builder().new_read().schema
    assert schema.field("f3").type == pa.date32()
    assert schema.field("f4").type == pa.timestamp("ns")
    assert schema.field("f5").type == pa.decimal128(23, 5)
    assert schema.field("f6").type == pa.binary()


def test_evolved_schema_types() -> None:
    table = FileStoreTable.open(str(golden_table_path("parquet", "pk_table_with_mor")))
    result = _read(table, None)
    assert result.schema.names == ["k1", "k0", "p0", "p1", "s1", "s0", "v0", "v1", "v2"]
    assert [result.schema.field(n).type for n in ("s0", "v0", "v1", "v2")] == [
        pa.binary(),
        pa.int32(),
        pa.string(),
        pa.int32(),
    ]
    # a time-travelled read uses the snapshot's schema (schema 0), as Java and pypaimon do
    old = _read(table, 3)
    assert old.schema.names == ["k0", "k1", "p0", "p1", "s0", "s1", "v0", "v1"]
    assert old.schema.field("v0").type == pa.float64()


def test_projection_orders_columns_and_applies_evolution() -> None:
    table = FileStoreTable.open(str(golden_table_path("parquet", "pk_table_with_mor")))
    builder = table.new_read_builder().with_projection(["v1", "k0", "s0"])
    result = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    assert result.schema.names == ["v1", "k0", "s0"]
    assert sorted(result.to_pylist(), key=repr) == sorted(
        [{"v1": r[7], "k0": r[1], "s0": r[5]} for r in EXPECTED[("parquet", "pk_table_with_mor", None)]],
        key=repr,
    )
