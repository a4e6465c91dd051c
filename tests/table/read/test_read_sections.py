"""Primary-key reads by key section (Java's ``IntervalPartition`` in ``MergeFileSplitRead``): a bucket
reads as its sections in key order, a section of one file without merging; the result is the merge of
the whole bucket whatever the runs, levels, retractions and sequence fields."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.table.compact import compact
from paimon_meta.table.mergetree.intervals import key_sections
from paimon_meta.table.mergetree.universal import UniversalCompaction
from paimon_meta.table.read.split_read import SplitReader
from paimon_meta.table.table import FileStoreTable
from tests.spark.helpers import create_table, live_files

SCHEMA = pa.schema([("id", pa.int64(), False), ("v", pa.string()), ("ts", pa.int64())])


def _write(table: FileStoreTable, rows: list[tuple[int, str, int, str]]) -> None:
    builder = table.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(
        pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "v": [r[1] for r in rows],
                "ts": pa.array([r[2] for r in rows], pa.int64()),
                "_row_kind": [r[3] for r in rows],
            }
        )
    )
    builder.new_commit().commit(w.prepare_commit())
    w.close()


def _read(table: FileStoreTable) -> list[dict[str, Any]]:
    builder = table.new_read_builder()
    return list(builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist())


@pytest.fixture
def merged_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows each merge by key was given (the reader's ``_merge``)."""
    sizes: list[int] = []
    original = SplitReader._merge

    def spy(self: SplitReader, merged: pa.Table, *args: Any) -> pa.Table:
        sizes.append(merged.num_rows)
        return original(self, merged, *args)

    monkeypatch.setattr(SplitReader, "_merge", spy)
    return sizes


def test_a_compacted_base_next_to_new_keys_is_read_without_merging_it(
    tmp_path: Path, merged_rows: list[int]
) -> None:
    table = create_table(str(tmp_path), "db.pk", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    _write(table, [(i, f"base{i}", 0, "+I") for i in range(1000, 6000)])
    compact(table)
    for i in range(5):
        _write(table, [(i, f"new{i}", 0, "+I")])  # below the base: sections of their own
    _write(table, [(3000, "changed", 0, "+U"), (3001, "", 0, "-D")])  # inside the base's range
    assert len(live_files(table)) == 7

    rows = _read(table)
    expected = {i: f"base{i}" for i in range(1000, 6000)} | {i: f"new{i}" for i in range(5)}
    expected[3000] = "changed"
    del expected[3001]
    assert [(r["id"], r["v"]) for r in rows] == sorted(expected.items())  # key order, as Java
    # the base overlaps only the two-row file: that section merges; the five one-row files do not
    assert merged_rows == [5000 + 2]
    merged_rows.clear()

    _write(table, [(7000, "after", 0, "+I")])
    rows = _read(table)
    assert rows[-1]["id"] == 7000 and len(rows) == len(expected) + 1
    assert merged_rows == [5002]  # the file above the base is a section of its own


def test_a_lone_file_drops_its_retractions(tmp_path: Path, merged_rows: list[int]) -> None:
    table = create_table(str(tmp_path), "db.pk", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    _write(table, [(i, "a", 0, "+I") for i in range(10)])
    _write(table, [(20, "x", 0, "-D"), (21, "y", 0, "+I")])  # a retraction of a key nobody holds
    assert [r["id"] for r in _read(table)] == [*range(10), 21]
    assert merged_rows == []


def test_random_runs_read_as_the_model_says(tmp_path: Path) -> None:
    """Random upserts and deletes over overlapping and disjoint key ranges, with partial (universal) and
    full compactions between them: every read equals the model, and equals the whole-bucket merge."""
    rng = random.Random(38)
    table = create_table(
        str(tmp_path),
        "db.pk",
        SCHEMA,
        primary_keys=["id"],
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "3"},
    )
    strategy = UniversalCompaction.of(table.schema.options)
    model: dict[int, str] = {}
    for step in range(40):
        low = rng.choice([0, 0, 200, 400, 1000 + step * 50])
        span = rng.choice([1, 5, 60])
        keys = sorted(rng.sample(range(low, low + span), min(span, rng.choice([1, 3, 20]))))
        batch = []
        for k in keys:
            if k in model and rng.random() < 0.25:
                batch.append((k, "", step, "-D"))
                model.pop(k)
            else:
                batch.append((k, f"s{step}k{k}", step, "+I"))
                model[k] = f"s{step}k{k}"
        _write(table, batch)
        if step % 7 == 6:
            compact(table, strategy=strategy)
        if step % 13 == 12:
            compact(table)
        rows = _read(table)
        by_key = [(r["id"], r["v"]) for r in rows]
        assert sorted(by_key) == sorted(model.items()), step

    # the same rows when every bucket is merged whole (sections switched off)
    sectioned = sorted((r["id"], r["v"]) for r in _read(table))
    original = SplitReader._sections
    try:
        SplitReader._sections = lambda self, split: None  # type: ignore[method-assign]
        whole = sorted((r["id"], r["v"]) for r in _read(table))
    finally:
        SplitReader._sections = original  # type: ignore[method-assign]
    assert sectioned == whole


def test_sections_cut_where_no_earlier_file_reaches(tmp_path: Path) -> None:
    table = create_table(str(tmp_path), "db.pk", SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    for ids in ([1, 5], [5, 9], [10, 12], [11], [20]):  # 1-5 and 5-9 touch at 5: one section
        _write(table, [(i, "v", 0, "+I") for i in ids])
    files = live_files(table)
    key_types = [table.schema.field("id").type]
    sections = key_sections(files, key_types)
    assert sections is not None
    assert [sorted(f.row_count for f in s) for s in sections] == [[2, 2], [1, 2], [1]]
    # keys that do not decode as the key types give no sections (the caller merges the bucket whole)
    assert key_sections(files, [table.schema.field("v").type, table.schema.field("v").type]) is None
