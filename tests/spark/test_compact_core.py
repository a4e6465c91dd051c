"""Full compaction without Spark (``paimon_meta.table.compact``): plans, merges, upgrades,
conflicts.

Lives beside the Spark tests because ``spark_jobs.compaction`` is its main user; nothing here needs
Spark.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimon_meta.errors import UnsupportedError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import FileSource
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.table.compact import CompactTask, compact, plan_compaction, run_tasks_locally
from paimon_meta.table.table import FileStoreTable
from tests.spark.helpers import STRING_SCHEMA, append_table, create_table, live_files, pk_table, read_rows


def write(table: FileStoreTable, rows: Sequence[tuple[int, str, str | None, str]]) -> None:
    builder = table.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(
        pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "p": [r[1] for r in rows],
                "v": [r[2] for r in rows],
                "_row_kind": [r[3] for r in rows],
            }
        )
    )
    builder.new_commit().commit(w.prepare_commit())
    w.close()


def churn(table: FileStoreTable, rounds: int = 5, size: int = 60) -> None:
    """Overlapping upserts and some deletes: several level-0 files per bucket."""
    for r in range(rounds):
        rows: list[tuple[int, str, str | None, str]] = [
            (i, f"p{i % 2}", f"r{r}-{i}", "+I") for i in range(r * 10, r * 10 + size)
        ]
        rows += [(i, f"p{i % 2}", None, "-D") for i in range(r, size, 7)]
        write(table, rows)


def files_on_disk(root: Path) -> set[str]:
    return {p.name for p in root.rglob("data-*")}


def test_primary_key_full_compaction_keeps_reads_and_sequence_numbers(tmp_path: Path) -> None:
    table = pk_table(str(tmp_path), STRING_SCHEMA, **{"target-file-size": "4 kb"})
    churn(table, size=1000)
    before_rows, before_files = read_rows(table), live_files(table)
    before_raw = raw_rows(table)
    result = compact(table)
    snapshot = table.latest_snapshot()
    assert snapshot is not None and snapshot.commit_kind is CommitKind.COMPACT
    assert result.snapshot_ids == (snapshot.id,) and result.conflicts == 0
    assert read_rows(table) == before_rows
    after = live_files(table)
    assert all(f.level == 4 and f.delete_row_count == 0 for f in after)
    assert all(f.file_source is FileSource.COMPACT for f in after)
    # every surviving key keeps the _SEQUENCE_NUMBER and value of its newest row
    newest: dict[tuple[int, str], dict[str, Any]] = {}
    for row in sorted(before_raw, key=lambda r: r["_SEQUENCE_NUMBER"]):
        newest[(row["id"], row["p"])] = row
    expected_raw = sorted(
        (r for r in newest.values() if r["_VALUE_KIND"] in (0, 2)), key=lambda r: (r["p"], r["id"])
    )
    assert sorted(raw_rows(table), key=lambda r: (r["p"], r["id"])) == expected_raw
    assert len(after) < len(before_files)
    # several output files per bucket (4 kb target), never overlapping in key range
    by_bucket: dict[tuple[bytes, int], list[Any]] = defaultdict(list)
    splits = table.new_read_builder().new_scan().plan().splits()
    for s in splits:
        by_bucket[(s.partition, s.bucket)] += s.files
    assert any(len(files) > 1 for files in by_bucket.values())
    for files in by_bucket.values():
        ranges = sorted(
            (deserialize_row(f.min_key, [_bigint()]), deserialize_row(f.max_key, [_bigint()])) for f in files
        )
        assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    # the compacted table takes more writes (new level-0 over level 4) and compacts again
    write(table, [(0, "p0", "late", "+U"), (1, "p1", None, "-D")])
    expected = {(r["id"], r["p"]): r["v"] for r in before_rows}
    expected[(0, "p0")] = "late"
    expected.pop((1, "p1"), None)
    assert {(r["id"], r["p"]): r["v"] for r in read_rows(table)} == expected
    compact(table)
    assert {(r["id"], r["p"]): r["v"] for r in read_rows(table)} == expected
    assert compact(table).snapshot_ids == ()  # one sorted run at the max level: nothing to do
    # everything written and not committed was cleaned up; compacted-away files stay until expiry
    assert {f.file_name for f in live_files(table)} <= files_on_disk(tmp_path)


def raw_rows(table: FileStoreTable) -> list[dict[str, Any]]:
    """Every row of the live data files as stored (with ``_SEQUENCE_NUMBER`` and ``_VALUE_KIND``)."""
    out = []
    for split in table.new_read_builder().new_scan().plan().splits():
        for path in split.file_paths:
            data = pq.read_table(path, columns=["id", "p", "v", "_SEQUENCE_NUMBER", "_VALUE_KIND"])
            out += data.to_pylist()
    return out


def _bigint() -> Any:
    from paimon_meta.model.types import BIGINT

    return BIGINT(False)


def test_single_large_file_is_upgraded_not_rewritten(tmp_path: Path) -> None:
    table = pk_table(str(tmp_path), STRING_SCHEMA)
    write(table, [(i, f"p{i % 2}", "x", "+I") for i in range(100)])
    level0 = {f.file_name for f in live_files(table)}
    plan = plan_compaction(table)
    # small files are rewritten unless alone: a lone file per bucket is upgraded
    assert all(t.upgrade and not t.rewrite for t in plan.tasks)
    compact(table)
    after = live_files(table)
    assert {f.file_name for f in after} == level0 and all(f.level == 4 for f in after)
    assert files_on_disk(tmp_path) == level0


def test_file_with_deletes_is_rewritten_to_drop_them(tmp_path: Path) -> None:
    table = pk_table(str(tmp_path), STRING_SCHEMA)
    write(table, [(1, "p1", "x", "+I"), (3, "p1", "y", "-D")])
    compact(table)
    after = live_files(table)
    assert [f.row_count for f in after] == [1] and after[0].delete_row_count == 0
    assert read_rows(table) == [{"id": 1, "p": "p1", "v": "x"}]


def test_append_compaction_merges_small_files_in_order(tmp_path: Path) -> None:
    table = append_table(str(tmp_path), "db.a", STRING_SCHEMA, buckets=2)
    for r in range(4):
        write(table, [(r * 100 + i, f"p{i % 2}", f"r{r}", "+I") for i in range(40)])
    before_rows, before_files = read_rows(table), live_files(table)
    result = compact(table)
    after = live_files(table)
    assert read_rows(table) == before_rows
    assert len(after) == 4 < len(before_files) == 16 and result.files_after == 4
    assert all(f.level == 0 and f.file_source is FileSource.COMPACT for f in after)
    for s in table.new_read_builder().new_scan().plan().splits():
        (f,) = s.files
        assert f.max_sequence_number - f.min_sequence_number + 1 == f.row_count
        assert table.new_read_builder().new_read().to_arrow([s]).column("v").to_pylist() == sorted(
            table.new_read_builder().new_read().to_arrow([s]).column("v").to_pylist()
        )  # rows kept in write order: r0 rows, then r1, ...
    assert compact(table).snapshot_ids == ()  # fewer than 3 small files per bucket now


def test_conflicting_compaction_is_replanned_and_reuses_unaffected_rewrites(tmp_path: Path) -> None:
    table = pk_table(str(tmp_path), STRING_SCHEMA)
    churn(table, rounds=3)
    expected = read_rows(table)
    calls: list[int] = []

    def runner_with_rival(t: FileStoreTable, tasks: Sequence[CompactTask]) -> list[CommitMessage]:
        messages = run_tasks_locally(t, tasks)
        if not calls:  # a rival compacts partition p0 after our plan: our p0 rewrites now conflict
            rival = compact(t, partition_filter={"p": "p0"})
            assert rival.snapshot_ids
        calls.append(len(tasks))
        return messages

    result = compact(table, runner=runner_with_rival)
    assert result.conflicts == 1 and result.attempts == 2
    assert calls == [4, 0]  # p1's two rewrites were reused; p0 had nothing left to do
    assert read_rows(table) == expected
    assert all(f.level == 4 for f in live_files(table))
    kinds = [table.snapshot(i).commit_kind for i in range(1, table.latest_snapshot().id + 1)]  # type: ignore[union-attr]
    assert kinds == [CommitKind.APPEND] * 3 + [CommitKind.COMPACT] * 2
    # our conflicting p0 rewrites were deleted; every other file is referenced or compacted away
    compacted_away = {f.file_name for f in live_files(table, 3)}
    assert files_on_disk(tmp_path) == {f.file_name for f in live_files(table)} | compacted_away


def test_unsupported_tables_are_refused(tmp_path: Path) -> None:
    table = create_table(
        str(tmp_path),
        "db.dv",
        STRING_SCHEMA,
        options={"bucket": "1", "bucket-key": "id", "deletion-vectors.enabled": "true"},
    )
    with pytest.raises(UnsupportedError, match="deletion vectors"):
        plan_compaction(table)
