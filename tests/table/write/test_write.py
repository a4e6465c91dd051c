"""TableWrite: Arrow in, data files + CommitMessages out (append and primary-key tables).

Files are checked directly (directory, bucket of every row, system columns, order, stats decoded
from the BinaryRows against pyarrow's own min/max) and by reading them back through the read
path's ``SplitReader`` with splits built from the CommitMessages (nothing is committed here).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq
import pytest

from paimon_meta.catalog.storage import storage_committer
from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.io import get_file_io
from paimon_meta.model.binary_row import EMPTY_ROW_BYTES, deserialize_row
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import (
    EMPTY_STATS,
    DataFileMeta,
    FileSource,
)
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, DOUBLE, INT, STRING, DataField, DataType
from paimon_meta.table.file_guard import path_guard
from paimon_meta.table.read.scan import Split
from paimon_meta.table.read.split_read import SplitReader
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.bucket import bucket_of
from paimon_meta.table.write.data_file import local_now_millis
from paimon_meta.table.write.table_write import TableWrite

# ---- helpers shared by the test_write* modules ------------------------------------------------------


def make_table(
    root: Path,
    fields: Sequence[tuple[str, DataType]],
    *,
    partition_keys: Sequence[str] = (),
    primary_keys: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    dynamic_options: Mapping[str, str] | None = None,
) -> FileStoreTable:
    """Create schema-0 of a table under ``root`` and open it."""
    path = str(root / "db.db" / "t")
    file_io = get_file_io(path)
    data_fields = tuple(DataField(i, name, t) for i, (name, t) in enumerate(fields))
    schema = TableSchema(
        0,
        data_fields,
        len(fields) - 1,
        tuple(partition_keys),
        tuple(primary_keys),
        dict(options or {}),
    )
    assert SchemaManager(file_io, path).commit_new_schema(schema)
    return FileStoreTable(file_io, path, schema, dynamic_options)


def read_file(path: str) -> pa.Table:
    return pq.read_table(path) if path.endswith(".parquet") else pa_orc.read_table(path)


def file_path(table: FileStoreTable, message: CommitMessage, meta: DataFileMeta) -> str:
    values = deserialize_row(message.partition, [f.type for f in table.schema.partition_type.fields])
    return table.paths.data_file_path(values, message.bucket, meta)


def all_files(
    table: FileStoreTable, messages: Sequence[CommitMessage]
) -> list[tuple[CommitMessage, DataFileMeta]]:
    return [(m, f) for m in messages for f in m.data_increment.new_files]


def decode_stats(meta: DataFileMeta, fields: Sequence[DataField]) -> dict[str, tuple[Any, Any, int | None]]:
    """Value stats of a file as {column: (min, max, null count)} (dense columns honoured)."""
    names = list(meta.value_stats_cols) if meta.value_stats_cols is not None else [f.name for f in fields]
    by_name = {f.name: f for f in fields}
    types = [by_name[n].type.with_nullable(True) for n in names]
    mins = deserialize_row(meta.value_stats.min_values, types)
    maxs = deserialize_row(meta.value_stats.max_values, types)
    nulls = meta.value_stats.null_counts or ()
    return {n: (lo, hi, nc) for n, lo, hi, nc in zip(names, mins, maxs, nulls)}


def read_back(table: FileStoreTable, messages: Sequence[CommitMessage]) -> pa.Table:
    """Read the messages' files through the read path, as if they had been committed."""
    reader = SplitReader(
        table.file_io, table.schema, table.schema_manager, table.schema.fields, guard=path_guard(table)
    )
    part_types = [f.type for f in table.schema.partition_type.fields]
    parts = []
    for m in messages:
        values = deserialize_row(m.partition, part_types)
        split = Split(
            snapshot_id=1,
            partition=m.partition,
            partition_values=values,
            bucket=m.bucket,
            total_buckets=m.total_buckets,
            files=m.data_increment.new_files,
            bucket_path=table.paths.bucket_path(values, m.bucket),
            raw_convertible=not table.schema.primary_keys,
        )
        parts.append(reader.read_split(split))
    return pa.concat_tables(parts) if parts else pa.table({})


def publish_snapshot(table: FileStoreTable, messages: Sequence[CommitMessage]) -> int:
    """Commit through the real coordinator (storage-guarded) as a fresh batch user, as a batch write
    builder does; returns the new snapshot id."""
    result = storage_committer(table, str(uuid.uuid4())).commit(messages)
    return result.snapshot_ids[-1]


def write_all(table: FileStoreTable, *tables: pa.Table, commit_user: str = "u") -> list[CommitMessage]:
    w = TableWrite(table, commit_user=commit_user)
    for t in tables:
        w.write_arrow(t)
    messages = w.prepare_commit()
    w.close()
    return messages


# ---- append tables --------------------------------------------------------------------------------

APPEND_FIELDS = [("name", STRING()), ("p", STRING()), ("k", INT()), ("v", DOUBLE())]


def _append_input() -> pa.Table:
    return pa.table(
        {
            "name": ["Alice", "Bob", None, "Tony", "Lucy", "a-name-well-beyond-sixteen-chars"],
            "p": ["x", "x", None, "y", "", None],
            "k": pa.array([1, 0, 0, 2, 1, 5], pa.int32()),
            "v": [11.5, None, 13.0, -1.0, 14.5, 2.0],
        }
    )


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_append_unaware_partitions_rows_and_describes_files(tmp_path: Path, fmt: str) -> None:
    table = make_table(tmp_path, APPEND_FIELDS, partition_keys=["p"], options={"file.format": fmt})
    data = _append_input()
    before = local_now_millis()
    messages = write_all(table, data)
    after = local_now_millis()

    by_partition = {deserialize_row(m.partition, [STRING()]): m for m in messages}
    # "" and null both land in __DEFAULT_PARTITION__ (Java), but stay distinct BinaryRows.
    assert set(by_partition) == {("x",), ("y",), ("",), (None,)}
    for m in messages:
        assert m.bucket == 0 and m.total_buckets == -1  # bucket-unaware: Java records -1
        (meta,) = m.data_increment.new_files
        path = file_path(table, m, meta)
        part = deserialize_row(m.partition, [STRING()])[0]
        expected_dir = "p=__DEFAULT_PARTITION__" if part in (None, "") else f"p={part}"
        assert f"/t/{expected_dir}/bucket-0/data-" in path and path.endswith("-0." + fmt)
        assert Path(path).stat().st_size == meta.file_size
        rows = read_file(path)
        assert rows.column_names == [n for n, _ in APPEND_FIELDS]
        mask = pc.is_null(data["p"]) if part is None else pc.equal(data["p"], part)
        expected = data.filter(pc.fill_null(mask, False))
        assert rows.to_pylist() == expected.to_pylist()
        assert meta.row_count == rows.num_rows
        # Unaware appends number rows from 0 in every writer (AppendFileStoreWrite ignores old files).
        assert (meta.min_sequence_number, meta.max_sequence_number) == (0, rows.num_rows - 1)
        assert meta.min_key == meta.max_key == EMPTY_ROW_BYTES and meta.key_stats == EMPTY_STATS
        assert meta.level == 0 and meta.file_source is FileSource.APPEND and meta.delete_row_count == 0
        assert meta.schema_id == 0 and meta.value_stats_cols is None and meta.extra_files == ()
        assert meta.creation_time is not None and before <= meta.creation_time <= after
        stats = decode_stats(meta, table.schema.fields)
        for name in ("k", "v"):
            col = expected[name]
            lo, hi, nulls = stats[name]
            assert nulls == col.null_count
            assert (lo, hi) == (pc.min(col).as_py(), pc.max(col).as_py())


def test_append_string_stats_are_truncated_like_java(tmp_path: Path) -> None:
    table = make_table(tmp_path, APPEND_FIELDS)
    data = _append_input()
    (m,) = write_all(table, data)
    (meta,) = m.data_increment.new_files
    lo, hi, nulls = decode_stats(meta, table.schema.fields)["name"]
    # min "Alice"; max "a-name-well-beyond-sixteen-chars" cut to 16 chars with the last one bumped.
    assert (lo, hi, nulls) == ("Alice", "a-name-well-beyp", 1)


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_append_fixed_bucket_uses_bucket_key(tmp_path: Path, fmt: str) -> None:
    table = make_table(
        tmp_path,
        [("f0", STRING()), ("f1", INT()), ("f2", INT()), ("f3", DOUBLE())],
        partition_keys=["f1"],
        options={"bucket": "3", "bucket-key": "f2", "file.format": fmt},
    )
    n = 300
    data = pa.table(
        {
            "f0": [f"s{i}" for i in range(n)],
            "f1": pa.array([i % 2 for i in range(n)], pa.int32()),
            "f2": pa.array([i * 7919 % 1000 for i in range(n)], pa.int32()),
            "f3": [float(i) for i in range(n)],
        }
    )
    messages = write_all(table, data.slice(0, 150), data.slice(150))
    assert {m.total_buckets for m in messages} == {3}
    seen = 0
    for m, meta in all_files(table, messages):
        rows = read_file(file_path(table, m, meta))
        for f2 in rows["f2"].to_pylist():
            assert bucket_of([f2], [INT()], 3) == m.bucket
        # Bucketed appends start after the bucket's max sequence number (-1 for a new bucket).
        assert (meta.min_sequence_number, meta.max_sequence_number) == (0, rows.num_rows - 1)
        seen += rows.num_rows
    assert seen == n
    assert sorted(read_back(table, messages)["f0"].to_pylist()) == sorted(data["f0"].to_pylist())


def test_bucketed_append_continues_sequence_numbers_of_the_latest_snapshot(tmp_path: Path) -> None:
    table = make_table(tmp_path, [("k", INT()), ("v", STRING())], options={"bucket": "1", "bucket-key": "k"})
    first = write_all(table, pa.table({"k": pa.array([1, 2, 3], pa.int32()), "v": ["a", "b", "c"]}))
    publish_snapshot(table, first)
    (m,) = write_all(table, pa.table({"k": pa.array([4, 5], pa.int32()), "v": ["d", "e"]}))
    (meta,) = m.data_increment.new_files
    assert (meta.min_sequence_number, meta.max_sequence_number) == (3, 4)


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_rolling_produces_several_files_with_contiguous_sequence_numbers(tmp_path: Path, fmt: str) -> None:
    table = make_table(
        tmp_path,
        [("k", BIGINT()), ("s", STRING())],
        options={"target-file-size": "16 kb", "file.format": fmt},
    )
    n = 20_000
    data = pa.table(
        {"k": pa.array(range(n), pa.int64()), "s": [f"value-{i * 2654435761 % 10**9}" for i in range(n)]}
    )
    (m,) = write_all(table, data)
    files = m.data_increment.new_files
    assert len(files) > 3
    assert sum(f.row_count for f in files) == n
    assert len({f.file_name for f in files}) == len(files)
    uuid = files[0].file_name.rsplit("-", 1)[0]
    # One writer: one uuid, counter 0, 1, 2, ... (DataFilePathFactory)
    assert [f.file_name for f in files] == [f"{uuid}-{i}.{fmt}" for i in range(len(files))]
    expected_start = 0
    for f in files:
        assert f.min_sequence_number == expected_start
        expected_start = f.max_sequence_number + 1
        assert f.max_sequence_number - f.min_sequence_number + 1 == f.row_count
        assert f.file_size < 2 * 16 * 1024
        rows = read_file(file_path(table, m, f))
        lo, hi, _ = decode_stats(f, table.schema.fields)["k"]
        assert (lo, hi) == (pc.min(rows["k"]).as_py(), pc.max(rows["k"]).as_py())
    assert read_back(table, [m])["k"].to_pylist() == list(range(n))


# ---- primary-key tables ---------------------------------------------------------------------------

PK_FIELDS = [("id", INT(False)), ("p", STRING(False)), ("name", STRING()), ("score", DOUBLE())]


def _pk_table(tmp_path: Path, fmt: str = "parquet", **options: str) -> FileStoreTable:
    return make_table(
        tmp_path,
        PK_FIELDS,
        partition_keys=["p"],
        primary_keys=["id", "p"],
        options={"bucket": "2", "file.format": fmt, **options},
    )


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_pk_files_hold_sorted_deduplicated_keys_and_system_columns(tmp_path: Path, fmt: str) -> None:
    table = _pk_table(tmp_path, fmt)
    ids = [5, 3, 9, 3, 1, 5, 7, 2, 8, 3]
    data = pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "p": ["a", "a", "b", "a", "a", "a", "b", "b", "a", "a"],
            "name": [f"n{i}" for i in range(len(ids))],
            "score": [float(i) for i in range(len(ids))],
        }
    )
    messages = write_all(table, data)
    # Last write wins per (id, p). Each (partition, bucket) writer numbers its rows from 0 in
    # arrival order: remember each survivor's input position and sequence number.
    last: dict[tuple[int, str], tuple[int, int]] = {}
    arrivals: dict[tuple[str, int], int] = {}
    for i, (k, p) in enumerate(zip(ids, data["p"].to_pylist())):
        group = (p, bucket_of([k], [INT(False)], 2))
        last[(k, p)] = (i, arrivals.get(group, 0))
        arrivals[group] = arrivals.get(group, 0) + 1
    got = 0
    for m, meta in all_files(table, messages):
        rows = read_file(file_path(table, m, meta))
        assert rows.column_names == ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "p", "name", "score"]
        keys = rows["_KEY_id"].to_pylist()
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        assert keys == rows["id"].to_pylist()
        part = deserialize_row(m.partition, [STRING(False)])[0]
        for row in rows.to_pylist():
            i, seq = last[(row["id"], part)]
            assert row["_SEQUENCE_NUMBER"] == seq
            assert row["_VALUE_KIND"] == 0 and row["name"] == f"n{i}"
            assert bucket_of([row["id"]], [INT(False)], 2) == m.bucket  # bucket key = trimmed PK
        assert deserialize_row(meta.min_key, [INT(False)]) == (keys[0],)
        assert deserialize_row(meta.max_key, [INT(False)]) == (keys[-1],)
        seqs = rows["_SEQUENCE_NUMBER"]
        assert (meta.min_sequence_number, meta.max_sequence_number) == (
            pc.min(seqs).as_py(),
            pc.max(seqs).as_py(),
        )
        kmin = deserialize_row(meta.key_stats.min_values, [INT()])
        kmax = deserialize_row(meta.key_stats.max_values, [INT()])
        assert (kmin, kmax, meta.key_stats.null_counts) == ((keys[0],), (keys[-1],), (0,))
        assert decode_stats(meta, table.schema.fields)["score"][:2] == (
            pc.min(rows["score"]).as_py(),
            pc.max(rows["score"]).as_py(),
        )
        got += rows.num_rows
    assert got == len(last)
    back = read_back(table, messages)
    assert sorted(back["name"].to_pylist()) == sorted(f"n{i}" for i, _ in last.values())


def test_pk_deletes_and_updates_from_row_kind_column(tmp_path: Path) -> None:
    table = _pk_table(tmp_path, bucket="1")  # one bucket: one writer numbers every row
    first = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int32()),
            "p": ["a"] * 4,
            "name": ["one", "two", "three", "four"],
            "score": [1.0, 2.0, 3.0, 4.0],
        }
    )
    w = TableWrite(table, commit_user="u")
    w.write_arrow(first)
    changes = pa.table(
        {
            "id": pa.array([2, 3, 3, 4], pa.int32()),
            "p": ["a"] * 4,
            "name": [None, "three", "THREE", None],
            "score": [None, 3.0, 33.0, None],
            "_row_kind": ["-D", "-U", "+U", "-D"],
        }
    )
    w.write_arrow(changes)
    messages = w.prepare_commit()
    files = [f for _, f in all_files(table, messages)]
    assert sum(f.delete_row_count or 0 for f in files) == 2  # the -D rows reach the files
    kinds = {}
    for m, meta in all_files(table, messages):
        for row in read_file(file_path(table, m, meta)).to_pylist():
            kinds[row["id"]] = (row["_VALUE_KIND"], row["_SEQUENCE_NUMBER"])
    assert kinds == {1: (0, 0), 2: (3, 4), 3: (2, 6), 4: (3, 7)}
    back = read_back(table, messages).sort_by("id")
    assert back.select(["id", "name"]).to_pylist() == [{"id": 1, "name": "one"}, {"id": 3, "name": "THREE"}]

    # int8 row kinds are accepted too, and sequence numbers continue within one TableWrite.
    w.write_arrow(
        pa.table(
            {
                "id": pa.array([1], pa.int32()),
                "p": ["a"],
                "name": [None],
                "score": [None],
                "_row_kind": pa.array([3], pa.int8()),
            }
        )
    )
    (m,) = w.prepare_commit()
    (meta,) = m.data_increment.new_files
    assert (meta.min_sequence_number, meta.delete_row_count) == (8, 1)
    w.close()


def test_pk_ignore_delete_drops_retractions(tmp_path: Path) -> None:
    table = _pk_table(tmp_path, **{"ignore-delete": "true"})
    data = pa.table(
        {
            "id": pa.array([1, 1, 2], pa.int32()),
            "p": ["a"] * 3,
            "name": ["x", None, "y"],
            "score": [1.0, None, 2.0],
            "_row_kind": ["+I", "-D", "+I"],
        }
    )
    messages = write_all(table, data)
    assert sum(f.delete_row_count or 0 for _, f in all_files(table, messages)) == 0
    assert sorted(read_back(table, messages)["name"].to_pylist()) == ["x", "y"]


def test_pk_sequence_numbers_continue_after_a_snapshot(tmp_path: Path) -> None:
    table = _pk_table(tmp_path)
    rows = pa.table(
        {"id": pa.array([1, 2, 3], pa.int32()), "p": ["a"] * 3, "name": ["a", "b", "c"], "score": [1.0] * 3}
    )
    first = write_all(table, rows)
    publish_snapshot(table, first)
    max_before = {m.bucket: max(f.max_sequence_number for f in m.data_increment.new_files) for m in first}
    second = write_all(table, rows)
    for m in second:
        for f in m.data_increment.new_files:
            assert f.min_sequence_number == max_before[m.bucket] + 1


def test_pk_write_buffer_flushes_sorted_runs(tmp_path: Path) -> None:
    table = _pk_table(tmp_path, **{"write-buffer-size": "1 kb", "bucket": "1"})
    w = TableWrite(table, commit_user="u")
    for i in range(5):
        ids = list(range(i * 10, i * 10 + 20))
        w.write_arrow(
            pa.table(
                {
                    "id": pa.array(ids, pa.int32()),
                    "p": ["a"] * 20,
                    "name": [str(i)] * 20,
                    "score": [float(i)] * 20,
                }
            )
        )
    messages = w.prepare_commit()
    files = [f for _, f in all_files(table, messages)]
    assert len(files) >= 2  # buffer overflowed: several level-0 runs
    back = read_back(table, messages).sort_by("id")
    # ids 0..59: the later write of an id wins across runs (higher sequence number).
    assert back["id"].to_pylist() == list(range(60))
    assert back["name"].to_pylist()[15] == "1" and back["name"].to_pylist()[45] == "4"


# ---- validation, unsupported features, abort ----------------------------------------------------------


def _error(exc: pytest.ExceptionInfo[ValidationError]) -> Any:
    return exc.value.fields.get("field")


def test_bad_input_names_the_column(tmp_path: Path) -> None:
    table = _pk_table(tmp_path)
    w = TableWrite(table, commit_user="u")
    good = {"id": pa.array([1], pa.int32()), "p": ["a"], "name": ["x"], "score": [1.0]}
    cases: list[tuple[dict[str, Any], str]] = [
        ({k: v for k, v in good.items() if k != "score"}, "score"),
        ({**good, "extra": [1]}, "extra"),
        ({**good, "score": ["not a number"]}, "score"),
        ({**good, "id": pa.array([2**40], pa.int64())}, "id"),
        ({**good, "p": pa.array([None], pa.string())}, "p"),
        ({**good, "_row_kind": ["+X"]}, "_row_kind"),
        ({**good, "_row_kind": pa.array([7], pa.int8())}, "_row_kind"),
    ]
    for columns, name in cases:
        with pytest.raises(ValidationError) as exc:
            w.write_arrow(pa.table(columns))
        assert _error(exc) == name, exc.value
        assert name in str(exc.value)
    # A castable input (int64 ids, reordered columns) is accepted.
    w.write_arrow(pa.table({"score": [1.0], "name": ["x"], "p": ["a"], "id": pa.array([3], pa.int64())}))
    (m,) = w.prepare_commit()
    assert m.data_increment.new_files[0].row_count == 1


def test_append_tables_refuse_retractions(tmp_path: Path) -> None:
    table = make_table(tmp_path, [("k", INT())])
    with pytest.raises(ValidationError) as exc:
        write_all(table, pa.table({"k": pa.array([1], pa.int32()), "_row_kind": ["-D"]}))
    assert _error(exc) == "_row_kind"


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"bucket": "-1"}, "bucket"),
        (
            {"bucket": "2", "merge-engine": "aggregation", "aggregation.remove-record-on-delete": "true"},
            "aggregation.remove-record-on-delete",
        ),
        ({"bucket": "2", "merge-engine": "first-row", "changelog-producer": "lookup"}, "changelog-producer"),
        ({"bucket": "2", "deletion-vectors.enabled": "true"}, "deletion-vectors.enabled"),
        ({"bucket": "2", "sequence.field": "score"}, "sequence.field"),
        ({"bucket": "2", "file.format": "avro"}, "file.format"),
    ],
)
def test_unsupported_tables_are_refused(tmp_path: Path, options: dict[str, str], option: str) -> None:
    table = make_table(tmp_path, PK_FIELDS, partition_keys=["p"], primary_keys=["id", "p"], options=options)
    with pytest.raises(UnsupportedError) as exc:
        TableWrite(table, commit_user="u")
    assert exc.value.fields["option"] == option
    assert option in str(exc.value)


def test_abort_deletes_only_files_not_handed_out(tmp_path: Path) -> None:
    table = make_table(tmp_path, APPEND_FIELDS, options={"target-file-size": "1 kb"})
    w = TableWrite(table, commit_user="u")
    w.write_arrow(_append_input())
    (handed,) = w.prepare_commit()
    for _ in range(50):
        w.write_arrow(_append_input())
    # Rolled files of the second round already exist on storage before prepare_commit.
    data_dir = Path(table.path) / "bucket-0"
    on_disk = {p.name for p in data_dir.iterdir()}
    kept = {f.file_name for f in handed.data_increment.new_files}
    assert kept < on_disk
    w.abort()
    assert {p.name for p in data_dir.iterdir()} == kept
    assert w.prepare_commit() == []
    w.close()
    with pytest.raises(ValidationError):
        w.write_arrow(_append_input())


def test_writer_uses_the_latest_schema_after_add_column(tmp_path: Path) -> None:
    from paimon_meta.table.schema_change import add_columns

    table = make_table(tmp_path, [("k", INT()), ("v", STRING())])
    new_schema = add_columns(table, [("extra", BIGINT(), "added")])
    w = TableWrite(table, commit_user="u")  # the table object still holds schema 0
    assert w.schema.id == 1
    with pytest.raises(ValidationError) as exc:
        w.write_arrow(pa.table({"k": pa.array([1], pa.int32()), "v": ["a"]}))
    assert _error(exc) == "extra"
    w.write_arrow(pa.table({"k": pa.array([1, 2], pa.int32()), "v": ["a", None], "extra": [10, None]}))
    (m,) = w.prepare_commit()
    (meta,) = m.data_increment.new_files
    assert meta.schema_id == 1
    rows = read_file(file_path(table, m, meta))
    assert rows.column_names == ["k", "v", "extra"]
    assert pq.read_schema(file_path(table, m, meta)).field("extra").metadata[b"PARQUET:field_id"] == b"2"
    stats = decode_stats(meta, new_schema.fields)
    assert stats["extra"] == (10, 10, 1)


def test_timestamps_are_stored_at_column_precision(tmp_path: Path) -> None:
    from paimon_meta.model.binary_row import Timestamp
    from paimon_meta.model.types import TIMESTAMP

    table = make_table(tmp_path, [("ts", TIMESTAMP(3)), ("ts9", TIMESTAMP(9))])
    moments = [dt.datetime(2024, 1, 2, 3, 4, 5, 678901), dt.datetime(1969, 12, 31, 23, 59, 59, 1)]
    data = pa.table(
        {"ts": pa.array(moments, pa.timestamp("us")), "ts9": pa.array(moments, pa.timestamp("us"))}
    )
    (m,) = write_all(table, data)
    (meta,) = m.data_increment.new_files
    path = file_path(table, m, meta)
    # As Java stores them: TIMESTAMP(3) as INT64 millis, TIMESTAMP(9) as INT96 (see the next test).
    assert _physical_types(path) == {"ts": "INT64", "ts9": "INT96"}
    millis_in_file = pq.read_table(path, columns=["ts"]).column("ts").to_pylist()
    stats = decode_stats(meta, table.schema.fields)
    # Floored like Java's Timestamp.getMillisecond (the pre-1970 value goes to -1000, not -999).
    millis = [(x - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1) for x in moments]
    assert millis[1] == -1000
    assert millis_in_file == millis
    assert stats["ts"][:2] == (Timestamp(min(millis)), Timestamp(max(millis)))
    assert stats["ts9"] == (None, None, 0)  # Java writes TIMESTAMP(9) to Parquet as INT96: no stats
    assert read_back(table, [m]).column("ts9").to_pylist() == moments


def _physical_types(path: str) -> dict[str, str]:
    """Parquet physical type of every leaf column, by its dotted path."""
    schema = pq.ParquetFile(path).schema
    return {schema.column(i).path: schema.column(i).physical_type for i in range(len(schema))}


def _logical_types(path: str) -> dict[str, str]:
    schema = pq.ParquetFile(path).schema
    return {schema.column(i).path: str(schema.column(i).logical_type) for i in range(len(schema))}


def test_timestamps_of_every_precision_in_one_parquet_file_are_stored_as_java_reads_them(
    tmp_path: Path,
) -> None:
    """Java 0.9/1.0 read TIMESTAMP(7..9) only from INT96 and TIMESTAMP(<= 6) only from INT64, nested ones
    too; pyarrow's INT96 switch is per file, so a file with both stores the lower precisions as plain
    INT64 (no TIMESTAMP annotation) of their unit. Every value reads back as written."""
    from paimon_meta.model.types import TIMESTAMP, TIMESTAMP_LTZ, ArrayType, MapType, RowType

    row = RowType(True, (DataField(10, "r6", TIMESTAMP(6)), DataField(11, "r9", TIMESTAMP(9))))
    fields: list[tuple[str, DataType]] = [
        ("ts3", TIMESTAMP(3)),
        ("ltz6", TIMESTAMP_LTZ(6)),
        ("ts9", TIMESTAMP(9)),
        ("arr3", ArrayType(True, TIMESTAMP(3))),
        ("m6", MapType(True, STRING(False), TIMESTAMP(6))),
        ("row", row),
    ]
    table = make_table(tmp_path, fields)
    moments = [dt.datetime(2024, 1, 2, 3, 4, 5, 678000), dt.datetime(1900, 1, 1, 0, 0, 0, 1000), None]
    data = pa.Table.from_pylist(
        [
            {
                "ts3": t,
                "ltz6": t,
                "ts9": t,
                "arr3": None if t is None else [t, None],
                "m6": None if t is None else [("k", t)],
                "row": None if t is None else {"r6": t, "r9": t},
            }
            for t in moments
        ],
        schema=table.arrow_schema(),
    )
    (m,) = write_all(table, data)
    (meta,) = m.data_increment.new_files
    path = file_path(table, m, meta)
    assert _physical_types(path) == {
        "ts3": "INT64",
        "ltz6": "INT64",
        "ts9": "INT96",
        "arr3.list.element": "INT64",
        "m6.key_value.key": "BYTE_ARRAY",
        "m6.key_value.value": "INT64",
        "row.r6": "INT64",
        "row.r9": "INT96",
    }
    stored = pq.read_table(path)
    assert stored.column("ts3").to_pylist() == [1704164645678, -2208988799999, None]  # epoch millis
    assert stored.column("ltz6").to_pylist() == [1704164645678000, -2208988799999000, None]  # micros
    assert read_back(table, [m]).to_pylist() == data.to_pylist()
    # A file without TIMESTAMP(7..9) keeps the annotated INT64 timestamps Java writes.
    plain = make_table(tmp_path / "plain", fields[:2])
    (m,) = write_all(plain, data.select(["ts3", "ltz6"]))
    (meta,) = m.data_increment.new_files
    path = file_path(plain, m, meta)
    assert _physical_types(path) == {"ts3": "INT64", "ltz6": "INT64"}
    assert _logical_types(path) == {
        "ts3": "Timestamp(isAdjustedToUTC=false, timeUnit=milliseconds, is_from_converted_type=false, "
        "force_set_converted_type=false)",
        "ltz6": "Timestamp(isAdjustedToUTC=true, timeUnit=microseconds, is_from_converted_type=false, "
        "force_set_converted_type=false)",
    }


def test_changed_bucket_count_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    table = make_table(tmp_path, [("k", INT()), ("v", STRING())], options={"bucket": "2", "bucket-key": "k"})
    data = pa.table({"k": pa.array(range(20), pa.int32()), "v": [str(i) for i in range(20)]})
    publish_snapshot(table, write_all(table, data))
    rescaled = FileStoreTable(table.file_io, table.path, table.schema, {"bucket": "3"})
    w = TableWrite(rescaled, commit_user="u")
    with pytest.raises(ValidationError) as exc:
        w.write_arrow(data)
    assert exc.value.fields["option"] == "bucket" and "2 buckets" in str(exc.value)
    assert w.prepare_commit() == []


def test_failed_prepare_commit_leaves_no_files_behind(tmp_path: Path) -> None:
    from paimon_meta.errors import FileIOError
    from paimon_meta.io.faults import FaultInjectingFileIO

    table = make_table(tmp_path, [("k", INT()), ("v", STRING())], options={"bucket": "4", "bucket-key": "k"})
    faulty = FaultInjectingFileIO(table.file_io)
    # The third data file write lands on storage but reports an error (a lost response).
    faulty.fail_nth("write", 3, path_contains="/bucket-", after_write=True)
    w = TableWrite(table, commit_user="u", file_io=faulty, parallelism=1)
    w.write_arrow(pa.table({"k": pa.array(range(100), pa.int32()), "v": [str(i) for i in range(100)]}))
    with pytest.raises(FileIOError):
        w.prepare_commit()
    assert faulty.calls("write") >= 3
    assert list(Path(table.path).glob("bucket-*/*")) == []


def test_a_table_column_named_like_the_row_kind_column_needs_another_name(tmp_path: Path) -> None:
    table = make_table(
        tmp_path, [("k", INT(False)), ("_row_kind", STRING())], primary_keys=["k"], options={"bucket": "1"}
    )
    with pytest.raises(ValidationError) as exc:
        TableWrite(table, commit_user="u")
    assert _error(exc) == "_row_kind"
    w = TableWrite(table, commit_user="u", row_kind_column="op")
    w.write_arrow(pa.table({"k": pa.array([1, 1], pa.int32()), "_row_kind": ["x", "y"], "op": ["+I", "-D"]}))
    (m,) = w.prepare_commit()
    (meta,) = m.data_increment.new_files
    assert meta.delete_row_count == 1
    assert read_file(file_path(table, m, meta))["_row_kind"].to_pylist() == ["y"]


def test_write_pandas(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    table = make_table(tmp_path, [("k", BIGINT()), ("v", STRING())])
    w = TableWrite(table, commit_user="u")
    w.write_pandas(pd.DataFrame({"k": [3, 1], "v": ["c", "a"]}, index=[10, 11]))
    (m,) = w.prepare_commit()
    assert read_back(table, [m]).to_pylist() == [{"k": 3, "v": "c"}, {"k": 1, "v": "a"}]
