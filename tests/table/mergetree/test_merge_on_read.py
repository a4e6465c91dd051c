"""Reads of hand-written data files: merge-on-read ordering, partition fill, Avro data files."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimon_meta.errors import CorruptMetadataError, UnsupportedError
from paimon_meta.io.local import LocalFileIO
from paimon_meta.model.manifest import FileKind
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import INT, STRING, DataField
from paimon_meta.table.table import FileStoreTable
from tests.table.synthetic import SyntheticTable, data_file, entry

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3


def _schema(options: dict[str, str] | None = None) -> TableSchema:
    fields = (DataField(0, "k", INT(False)), DataField(1, "v", STRING()), DataField(2, "ts", INT()))
    return TableSchema(0, fields, 2, primary_keys=("k",), options={"bucket": "1", **(options or {})})


# (key, value, ts, sequence number, value kind)
FileRows = list[tuple[int, str | None, int | None, int, int]]


def _write_table(
    tmp_path: Path, files: list[tuple[int, FileRows]], options: dict[str, str] | None = None
) -> str:
    """One snapshot holding ``files`` (level, rows) in bucket 0 of an unpartitioned table."""
    fio = LocalFileIO()
    root = str(tmp_path / "t")
    syn = SyntheticTable(fio, root, _schema(options))
    entries = []
    for i, (level, rows) in enumerate(files):
        name = f"data-{i}.parquet"
        table = pa.table(
            {
                "_KEY_k": pa.array([r[0] for r in rows], pa.int32()),
                "_SEQUENCE_NUMBER": pa.array([r[3] for r in rows], pa.int64()),
                "_VALUE_KIND": pa.array([r[4] for r in rows], pa.int8()),
                "k": pa.array([r[0] for r in rows], pa.int32()),
                "v": pa.array([r[1] for r in rows], pa.string()),
                "ts": pa.array([r[2] for r in rows], pa.int32()),
            }
        )
        buf = io.BytesIO()
        pq.write_table(table, buf)
        fio.write(f"{root}/bucket-0/{name}", buf.getvalue())
        seqs = [r[3] for r in rows]
        meta = data_file(name, rows=len(rows), level=level, seq=(min(seqs), max(seqs)))
        entries.append(entry(FileKind.ADD, [], [], 0, meta, total_buckets=1))
    syn.commit([syn.manifest(entries, [()])])
    return root


def _read(root: str) -> list[dict[str, Any]]:
    table = FileStoreTable.open(root)
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    rows: list[dict[str, Any]] = builder.new_read().to_arrow(splits).to_pylist()
    return rows


def test_highest_sequence_wins_and_retractions_remove(tmp_path: Path) -> None:
    root = _write_table(
        tmp_path,
        [
            (1, [(1, "old", None, 0, INSERT), (2, "two", None, 1, INSERT), (3, "three", None, 2, INSERT)]),
            (
                0,
                [
                    (1, "new", None, 5, UPDATE_AFTER),
                    (2, "two", None, 6, DELETE),
                    (4, "four", None, 7, INSERT),
                ],
            ),
            (0, [(3, "three", None, 8, UPDATE_BEFORE), (4, "stale", None, 3, INSERT)]),
        ],
    )
    assert _read(root) == [{"k": 1, "v": "new", "ts": None}, {"k": 4, "v": "four", "ts": None}]


def test_equal_sequence_numbers_go_to_the_newer_file(tmp_path: Path) -> None:
    root = _write_table(
        tmp_path,
        [
            (0, [(1, "level0-a", None, 4, INSERT)]),
            (3, [(1, "level3", None, 4, INSERT)]),
            (0, [(1, "level0-b", None, 4, INSERT), (2, "x", None, 1, INSERT)]),
        ],
    )
    # level 0 is newer than level 3; among level-0 files the higher max sequence number is newer
    assert _read(root)[0] == {"k": 1, "v": "level0-b", "ts": None}


def test_retraction_and_addition_with_equal_sequence_keeps_the_addition(tmp_path: Path) -> None:
    root = _write_table(tmp_path, [(0, [(1, "del", None, 4, DELETE)]), (0, [(1, "add", None, 4, INSERT)])])
    assert _read(root) == [{"k": 1, "v": "add", "ts": None}]


def test_sequence_field_orders_before_sequence_number(tmp_path: Path) -> None:
    files: list[tuple[int, FileRows]] = [
        (0, [(1, "ts=5", 5, 1, INSERT), (2, "ts=null", None, 1, INSERT), (3, "old", 1, 1, INSERT)]),
        (0, [(1, "ts=3", 3, 9, INSERT), (2, "ts=0", 0, 0, INSERT), (3, "same ts, newer", 1, 9, INSERT)]),
    ]
    asc = _write_table(tmp_path / "asc", files, {"sequence.field": "ts"})
    assert [r["v"] for r in _read(asc)] == ["ts=5", "ts=0", "same ts, newer"]  # nulls lose
    desc = _write_table(
        tmp_path / "desc", files, {"sequence.field": "ts", "sequence.field.sort-order": "descending"}
    )
    assert [r["v"] for r in _read(desc)] == ["ts=3", "ts=0", "same ts, newer"]  # nulls still lose


def test_single_file_split_is_read_raw(tmp_path: Path) -> None:
    root = _write_table(tmp_path, [(5, [(1, "a", None, 0, INSERT), (2, "b", None, 1, INSERT)])])
    split = FileStoreTable.open(root).new_read_builder().new_scan().plan().splits()[0]
    assert split.raw_convertible
    assert [r["v"] for r in _read(root)] == ["a", "b"]


@pytest.mark.parametrize(
    "options",
    [
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "collect"},
        {"data-evolution.enabled": "true"},
    ],
)
def test_unsupported_tables_are_refused(tmp_path: Path, options: dict[str, str]) -> None:
    root = _write_table(tmp_path, [(0, [(1, "a", None, 0, INSERT)])], options)
    with pytest.raises(UnsupportedError):
        FileStoreTable.open(root).new_read_builder().new_read()


def _append_table(tmp_path: Path, file_name: str, data: bytes) -> str:
    """An append table partitioned by ``p`` holding one data file in p=7/bucket-0."""
    fio = LocalFileIO()
    root = str(tmp_path / "append")
    fields = (DataField(0, "id", INT()), DataField(1, "name", STRING()), DataField(2, "p", INT()))
    schema = TableSchema(0, fields, 2, partition_keys=("p",), options={"bucket": "-1"})
    syn = SyntheticTable(fio, root, schema)
    fio.write(f"{root}/p=7/bucket-0/{file_name}", data)
    meta = data_file(file_name, rows=2)
    syn.commit([syn.manifest([entry(FileKind.ADD, [7], [INT()], 0, meta, total_buckets=-1)], [(7,)])])
    return root


def test_partition_columns_missing_from_a_file_come_from_the_partition(tmp_path: Path) -> None:
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "name": ["a", "b"]}), buf)
    root = _append_table(tmp_path, "data-x-0.parquet", buf.getvalue())
    assert _read(root) == [{"id": 1, "name": "a", "p": 7}, {"id": 2, "name": "b", "p": 7}]


def test_avro_data_files(tmp_path: Path) -> None:
    schema = {
        "type": "record",
        "name": "record",
        "fields": [
            {"name": "id", "type": ["null", "int"]},
            {"name": "name", "type": ["null", "string"]},
            {"name": "p", "type": ["null", "int"]},
        ],
    }
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [{"id": 1, "name": "a", "p": 7}, {"id": 2, "name": None, "p": 7}])
    root = _append_table(tmp_path, "data-x-0.avro", buf.getvalue())
    assert _read(root) == [{"id": 1, "name": "a", "p": 7}, {"id": 2, "name": None, "p": 7}]


def test_unreadable_data_file_names_the_file(tmp_path: Path) -> None:
    root = _append_table(tmp_path, "data-x-0.parquet", b"PAR1 not really parquet")
    with pytest.raises(CorruptMetadataError) as err:
        _read(root)
    assert err.value.path == f"{root}/p=7/bucket-0/data-x-0.parquet"


def test_primary_key_file_without_key_columns_is_corrupt(tmp_path: Path) -> None:
    # Without _KEY_k alone it is a thin-mode file (tests/table/test_thin_mode.py); without k too, the
    # key is nowhere.
    root = _write_table(tmp_path, [(0, [(1, "a", None, 0, INSERT)]), (0, [(1, "b", None, 1, INSERT)])])
    path = f"{root}/bucket-0/data-1.parquet"
    table = pq.read_table(path).drop_columns(["_KEY_k", "k"])
    pq.write_table(table, path)
    with pytest.raises(CorruptMetadataError) as err:
        _read(root)
    assert err.value.path == path and "['k']" in err.value.message
