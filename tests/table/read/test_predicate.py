"""Scan pruning predicates: SQL's three-valued logic on partition values, file skipping by statistics
(value stats for append tables, key stats for primary-key tables, renamed columns by field id)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from paimon_meta.catalog.storage import open_table
from paimon_meta.io import get_file_io
from paimon_meta.model.arrow import from_arrow_schema
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, DATE, DOUBLE, STRING, TIMESTAMP, DataField
from paimon_meta.table.read.predicate import (
    FileStatsFilter,
    Leaf,
    Not,
    Term,
    evaluate,
    partition_predicate,
    supported,
)
from paimon_meta.table.schema_change import RenameColumn, alter
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable

SCHEMA = pa.schema([("id", pa.int64(), False), ("p", pa.string(), False), ("name", pa.string())])


@pytest.mark.parametrize(
    ("term", "value", "expected"),
    [
        (Leaf("=", "c", (3,)), 3, True),
        (Leaf("=", "c", (3,)), None, None),
        (Not(Leaf("=", "c", (3,))), None, None),  # NOT unknown is unknown: a null row never passes
        (Not(Leaf("=", "c", (3,))), 4, True),
        (Leaf("in", "c", (1, 2)), 2, True),
        (Leaf("in", "c", (1, None)), 3, None),
        (Leaf("<", "c", (3,)), 2, True),
        (Leaf(">=", "c", (3,)), 2, False),
        (Leaf("is_null", "c"), None, True),
        (Leaf("is_not_null", "c"), None, False),
        (Leaf("starts_with", "c", ("ab",)), "abc", True),
    ],
)
def test_evaluate_is_three_valued(term: Term, value: object, expected: bool | None) -> None:
    assert evaluate(term, value) is expected


def test_supported_types_and_literals() -> None:
    assert supported(Leaf("=", "c", (1,)), DataField(0, "c", BIGINT()))
    assert not supported(Leaf("=", "c", (True,)), DataField(0, "c", BIGINT()))  # bool is not an int
    assert not supported(Leaf("=", "c", (1.5,)), DataField(0, "c", DOUBLE()))  # NaN orders differently
    assert supported(Leaf("<", "c", (dt.date(2024, 1, 1),)), DataField(0, "c", DATE()))
    assert not supported(Leaf("<", "c", (dt.datetime(2024, 1, 1),)), DataField(0, "c", DATE()))
    assert not supported(Leaf("=", "c", (dt.datetime(2024, 1, 1),)), DataField(0, "c", TIMESTAMP(6)))
    assert not supported(Leaf("=", "c", ("a", "b")), DataField(0, "c", STRING()))
    assert not supported(Leaf("like", "c", ("a",)), DataField(0, "c", STRING()))
    assert supported(Not(Leaf("in", "c", (Decimal("1.5"),))), DataField(0, "c", DATE())) is False


def test_partition_predicate_needs_every_term_true() -> None:
    fields, highest = from_arrow_schema(pa.schema([("a", pa.int32()), ("b", pa.string()), ("v", pa.int64())]))
    schema = TableSchema(0, fields, highest, ("a", "b"), (), {})
    matches = partition_predicate(schema, [Leaf(">", "a", (1,)), Not(Leaf("=", "b", ("x",)))])
    assert matches((2, "y")) and not matches((2, "x")) and not matches((1, "y"))
    assert not matches((2, None))  # b <> 'x' is unknown for a null b


def _table(tmp_path: Path, primary_keys: tuple[str, ...] = ()) -> FileStoreTable:
    path = str(tmp_path / "db.db" / "t")
    fields, highest = from_arrow_schema(SCHEMA)
    partition_keys = ("p",) if primary_keys else ()
    schema = TableSchema(
        0, fields, highest, partition_keys, primary_keys, {"bucket": "1", "bucket-key": "id"}
    )
    assert SchemaManager(get_file_io(path), path).commit_new_schema(schema)
    return open_table(path)


def _append(table: FileStoreTable, rows: list[tuple[int, str, str | None]]) -> None:
    wb = table.new_batch_write_builder()
    write = wb.new_write()
    write.write_arrow(pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA))
    wb.new_commit().commit(write.prepare_commit())
    write.close()


def _kept(table: FileStoreTable, terms: list[Term]) -> int:
    fresh = FileStoreTable.open(table.path)
    splits = fresh.new_read_builder().new_scan().plan().splits()
    stats = FileStatsFilter(fresh.schema, terms, fresh.schema_manager.schema)
    return sum(len(s.files) for s in stats.prune(splits))


def test_value_stats_skip_append_files(tmp_path: Path) -> None:
    table = _table(tmp_path)
    _append(table, [(i, "a", f"n{i:03d}") for i in range(0, 100)])
    _append(table, [(i, "a", None) for i in range(100, 200)])  # name all null
    _append(table, [(i, "a", "z" * 40 + str(i)) for i in range(200, 300)])  # truncated string stats
    assert _kept(table, []) == 3
    assert _kept(table, [Leaf("<", "id", (50,))]) == 1
    assert _kept(table, [Leaf(">=", "id", (150,)), Leaf("<", "id", (250,))]) == 2
    assert _kept(table, [Leaf("in", "id", (5, 250))]) == 2
    assert _kept(table, [Leaf("is_null", "name")]) == 1
    assert _kept(table, [Leaf("is_not_null", "name")]) == 2
    assert _kept(table, [Leaf("=", "name", ("n042",))]) == 1  # the all-null file never matches a value
    assert _kept(table, [Leaf("starts_with", "name", ("z" * 40,))]) == 1
    assert _kept(table, [Leaf("=", "name", ("z" * 40 + "250",))]) == 1  # within truncated bounds
    assert _kept(table, [Not(Leaf("=", "id", (5,)))]) == 3  # negations never skip
    # a renamed column keeps its statistics (matched by field id)
    alter(table, [RenameColumn("name", "label")])
    assert _kept(table, [Leaf("is_null", "label")]) == 1


def test_primary_key_tables_skip_by_key_stats_only(tmp_path: Path) -> None:
    table = _table(tmp_path, primary_keys=("id", "p"))
    _append(table, [(i, "a", "x") for i in range(0, 100)])
    _append(table, [(i, "a", "y") for i in range(100, 200)])
    assert _kept(table, [Leaf("<", "id", (50,))]) == 1
    # a value column's stats would drop the older file while a key's latest version is elsewhere
    assert _kept(table, [Leaf("=", "name", ("y",))]) == 2
