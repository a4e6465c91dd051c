"""Thin-mode primary-key data files (``data-file.thin-mode``): no ``_KEY_*`` columns, the keys are the
value columns of the same names. Written by us when the option is set (as Java >= 1.0), by paimon-rust
always; read, merged and compacted whatever mix of thin and full files a bucket holds."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimon_meta.catalog.storage import open_table
from paimon_meta.errors import CorruptMetadataError
from paimon_meta.io import get_file_io
from paimon_meta.model.arrow import from_arrow_schema
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.manifest import DataFileMeta
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, STRING
from paimon_meta.table.compact import compact
from paimon_meta.table.read.deletion_vectors import DeletionFile
from paimon_meta.table.read.scan import Split
from paimon_meta.table.schema_change import SetOption, alter
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from tests.table.read.test_deletion_vectors import v1
from tests.table.write.test_write import decode_stats, read_file

# Value columns in another order than the primary key (id, name, p), so the key -> value column mapping
# is not the identity; p is the partition, so the trimmed key is (id, name).
SCHEMA = pa.schema(
    [("v", pa.float64()), ("name", pa.string(), False), ("p", pa.string(), False), ("id", pa.int64(), False)]
)
THIN_COLUMNS = ["_SEQUENCE_NUMBER", "_VALUE_KIND", "v", "name", "p", "id"]
FULL_COLUMNS = ["_KEY_id", "_KEY_name", *THIN_COLUMNS]
KEY_TYPES = [BIGINT(False), STRING(False)]
THIN = "data-file.thin-mode"

Key = tuple[int, str, str]  # (id, name, p)
Row = tuple[int, str, str, float | None, str]  # (id, name, p, v, row kind)


def create(tmp_path: Path, **options: str) -> FileStoreTable:
    path = str(tmp_path / "db.db" / "t")
    fields, highest = from_arrow_schema(SCHEMA)
    schema = TableSchema(0, fields, highest, ("p",), ("id", "name", "p"), options)
    assert SchemaManager(get_file_io(path), path).commit_new_schema(schema)
    return open_table(path)


def name_of(i: int) -> str:
    # Longer than the default truncate(16): key stats (truncate(128)) keep it whole.
    return f"customer-{i % 3}-{'x' * 30}"


def write(table: FileStoreTable, rows: Iterable[Row], model: dict[Key, float | None]) -> None:
    rows = list(rows)
    builder = table.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(
        pa.table(
            {
                "v": pa.array([r[3] for r in rows], pa.float64()),
                "name": [r[1] for r in rows],
                "p": [r[2] for r in rows],
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "_row_kind": [r[4] for r in rows],
            }
        )
    )
    builder.new_commit().commit(w.prepare_commit())
    w.close()
    for i, name, p, v, kind in rows:  # deduplicate: the last row of a key wins; -U/-D remove it
        if kind in ("+I", "+U"):
            model[(i, name, p)] = v
        else:
            model.pop((i, name, p), None)


def rows_of(table: FileStoreTable) -> list[tuple[int, str, str, float | None]]:
    builder = table.new_read_builder()
    out = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    assert out.column_names == ["v", "name", "p", "id"]
    return sorted((r["id"], r["name"], r["p"], r["v"]) for r in out.to_pylist())


def expected(model: dict[Key, float | None]) -> list[tuple[int, str, str, float | None]]:
    return sorted((*key, v) for key, v in model.items())


def live(table: FileStoreTable) -> list[tuple[Split, DataFileMeta, str]]:
    splits = table.new_read_builder().new_scan().plan().splits()
    return [(s, f, path) for s in splits for f, path in zip(s.files, s.file_paths)]


def churn(table: FileStoreTable, model: dict[Key, float | None], rounds: range) -> None:
    """Per round: new keys, updates (+U, and -U/+U pairs) of older ones, deletes, a re-insert."""
    for r in rounds:
        rows: list[Row] = [
            (i, name_of(i), f"p{i % 2}", float(r * 100 + i), "+I") for i in range(r * 8, r * 8 + 12)
        ]
        rows += [(i, name_of(i), f"p{i % 2}", -float(r), "+U") for i in range(0, r * 8, 3)]
        rows += [(i, name_of(i), f"p{i % 2}", None, "-U") for i in range(1, r * 8, 5)]
        rows += [(i, name_of(i), f"p{i % 2}", float(r), "+U") for i in range(1, r * 8, 10)]
        rows += [(i, name_of(i), f"p{i % 2}", None, "-D") for i in range(2, r * 8 + 12, 4)]
        rows += [(2, name_of(2), "p0", 2.5, "+I")]  # deleted above in this same write: the last row wins
        write(table, rows, model)


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_thin_mode_table_reads_back_updates_and_deletes(tmp_path: Path, fmt: str) -> None:
    table = create(tmp_path, bucket="2", **{"file.format": fmt, THIN: "true"})
    model: dict[Key, float | None] = {}
    churn(table, model, range(4))
    assert model and rows_of(table) == expected(model)
    files = live(table)
    assert len({s.bucket for s, _, _ in files}) == 2 and len(files) > 4  # several files per bucket
    for _, meta, path in files:
        data = read_file(path)
        assert data.column_names == THIN_COLUMNS  # as Java writes them: no _KEY_ copies
        keys = sorted(zip(data["id"].to_pylist(), data["name"].to_pylist()))
        assert [deserialize_row(meta.min_key, KEY_TYPES), deserialize_row(meta.max_key, KEY_TYPES)] == [
            keys[0],
            keys[-1],
        ]
        # KeyValueThinDataFileWriterImpl: key stats are the value stats of the key columns, which
        # get truncate(128) like _KEY_ columns (the default truncate(16) would cut the names).
        names, ids = data["name"].to_pylist(), data["id"].to_pylist()
        kmin = deserialize_row(meta.key_stats.min_values, [BIGINT(), STRING()])
        kmax = deserialize_row(meta.key_stats.max_values, [BIGINT(), STRING()])
        assert (kmin, kmax, meta.key_stats.null_counts) == (
            (min(ids), min(names)),
            (max(ids), max(names)),
            (0, 0),
        )
        value_stats = decode_stats(meta, table.schema.fields)
        assert value_stats["name"] == (min(names), max(names), 0)
        assert value_stats["id"] == (min(ids), max(ids), 0)


def test_compaction_merges_thin_and_full_files_both_ways(tmp_path: Path) -> None:
    table = create(tmp_path, bucket="1")
    model: dict[Key, float | None] = {}
    churn(table, model, range(2))  # full files (the option is off)
    alter(table, [SetOption(THIN, "true")])  # not an immutable option in Java either
    table = open_table(table.path)
    churn(table, model, range(2, 4))  # thin files updating and deleting keys of the full ones
    kinds = {tuple(read_file(path).column_names) for _, _, path in live(table)}
    assert kinds == {tuple(FULL_COLUMNS), tuple(THIN_COLUMNS)}
    assert rows_of(table) == expected(model)  # merge-on-read across both kinds

    assert compact(table).snapshot_ids
    assert rows_of(table) == expected(model)
    after = live(table)
    assert {f.level for _, f, _ in after} == {4}
    assert all(read_file(path).column_names == THIN_COLUMNS for _, _, path in after)
    assert sum(f.row_count for _, f, _ in after) == len(model)  # one row per live key, deletes dropped

    # and back: thin (level 4) and full (level 0) files compacted into full files
    alter(table, [SetOption(THIN, "false")])
    table = open_table(table.path)
    churn(table, model, range(4, 5))
    assert rows_of(table) == expected(model)
    assert compact(table).snapshot_ids
    assert rows_of(table) == expected(model)
    assert all(read_file(path).column_names == FULL_COLUMNS for _, _, path in live(table))


def test_deletion_vector_applies_to_a_thin_file(tmp_path: Path) -> None:
    table = create(tmp_path, bucket="1", **{THIN: "true"})
    model: dict[Key, float | None] = {}
    write(table, [(i, name_of(i), "p0", float(i), "+I") for i in range(10)], model)
    [(split, _, path)] = live(table)
    assert read_file(path).column_names == THIN_COLUMNS
    index = Path(table.paths.index_dir) / "index-dv"  # reads open only the table's own files
    index.parent.mkdir(parents=True, exist_ok=True)
    vector = v1([0, 4, 9])
    index.write_bytes(b"\x01" + vector)
    deletion = DeletionFile(str(index), 1, len(vector) - 8, 3)
    with_dv = dataclasses.replace(split, deletion_files=(deletion,))
    got = table.new_read_builder().new_read().to_arrow([with_dv]).to_pylist()
    stored = read_file(path).to_pylist()  # sorted by key: positions are the key order
    gone = {(stored[i]["id"], stored[i]["name"]) for i in (0, 4, 9)}
    assert sorted((r["id"], r["name"]) for r in got) == sorted(
        (i, name) for i, name, _ in model if (i, name) not in gone
    )
    assert len(got) == 7


def _strip(path: str, columns: list[str]) -> None:
    data = read_file(path)
    assert path.endswith(".parquet")
    pq.write_table(data.drop_columns([c for c in columns if c in data.column_names]), path)


@pytest.mark.parametrize("stage", ["read", "compact"])
def test_file_without_key_copies_and_key_values_is_corrupt(tmp_path: Path, stage: str) -> None:
    table = create(tmp_path, bucket="1", **{THIN: "true"})
    model: dict[Key, float | None] = {}
    churn(table, model, range(2))
    files = live(table)
    assert len(files) == 4  # two overlapping files per partition: compaction rewrites (reads) them
    victim = files[-1][2]
    _strip(victim, ["_KEY_name", "name"])
    with pytest.raises(CorruptMetadataError) as err:
        if stage == "read":
            rows_of(table)
        else:
            compact(table)
    assert err.value.path == victim and "['name']" in err.value.message
