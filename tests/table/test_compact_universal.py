"""Compaction by the universal pick on a real table: only the picked runs are merged, into the picked level;
the oldest run is left alone; retractions survive while older data lies below the output level."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from paimon_meta.model.snapshot import CommitKind
from paimon_meta.table.compact import compact, plan_compaction
from paimon_meta.table.mergetree.universal import UniversalCompaction
from paimon_meta.table.table import FileStoreTable
from tests.spark.helpers import create_table, live_files, read_rows

SCHEMA = pa.schema([("id", pa.int64(), False), ("v", pa.string())])


def _write(table: FileStoreTable, ids: list[int], value: str, kind: str = "+I") -> None:
    builder = table.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(
        pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "v": [f"{value}{i}" for i in ids],
                "_row_kind": [kind] * len(ids),
            }
        )
    )
    builder.new_commit().commit(w.prepare_commit())
    w.close()


def test_the_pick_merges_the_new_runs_above_the_oldest_and_keeps_their_deletes(tmp_path: Path) -> None:
    table = create_table(
        str(tmp_path),
        "db.pk",
        SCHEMA,
        primary_keys=["id"],
        options={"bucket": "1", "num-sorted-run.compaction-trigger": "3"},
    )
    _write(table, list(range(5000)), "old-")
    compact(table)  # one run at the max level (4)
    (oldest,) = live_files(table)
    assert oldest.level == 4
    _write(table, list(range(10)), "new-")
    _write(table, [50], "", kind="-D")
    _write(table, list(range(10, 20)), "new-")
    strategy = UniversalCompaction.of(table.schema.options)

    # 3 level-0 runs + level 4: size ratio takes the level-0 runs, the level-4 run is far larger
    (task,) = plan_compaction(table, strategy=strategy).tasks
    assert task.output_level == 3 and not task.drop_delete
    assert {f.level for f in task.files} == {0} and len(task.files) == 3

    result = compact(table, strategy=strategy)
    snapshot = table.latest_snapshot()
    assert snapshot is not None and snapshot.commit_kind is CommitKind.COMPACT
    assert result.files_before == 3
    files = live_files(table)
    assert oldest.file_name in {f.file_name for f in files if f.level == 4}  # left alone
    merged = [f for f in files if f.level == 3]
    assert merged and not [f for f in files if f.level == 0]
    # the -D of key 50 is kept: level 4 still holds key 50
    assert sum(f.delete_row_count or 0 for f in merged) == 1
    rows = {r["id"]: r["v"] for r in read_rows(table)}
    assert 50 not in rows and len(rows) == 4999
    assert all(rows[i] == f"new-{i}" for i in range(20)) and rows[20] == "old-20"
    # 2 runs now, fewer than the trigger: nothing is picked
    assert plan_compaction(table, strategy=strategy).tasks == ()


def test_merge_engines_give_the_same_rows_after_a_partial_compaction(tmp_path: Path) -> None:
    # the picked (newer) runs are merged by the engine without the older run below (level 4): the rows
    # read must not change, whatever the engine
    cases = {
        "sum": {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"},
        "partial": {"merge-engine": "partial-update"},
        "first": {"merge-engine": "first-row"},
    }
    schema = pa.schema([("id", pa.int64(), False), ("n", pa.int64()), ("s", pa.string())])
    for name, options in cases.items():
        table = create_table(
            str(tmp_path),
            f"db.{name}",
            schema,
            primary_keys=["id"],
            options={"bucket": "1", "num-sorted-run.compaction-trigger": "3", **options},
        )

        def write(ids: list[int], n: int | None, s: str | None, t: FileStoreTable = table) -> None:
            builder = t.new_batch_write_builder()
            w = builder.new_write()
            w.write_arrow(
                pa.table(
                    {
                        "id": pa.array(ids, pa.int64()),
                        "n": pa.array([n] * len(ids), pa.int64()),
                        "s": pa.array([s] * len(ids), pa.string()),
                    }
                )
            )
            builder.new_commit().commit(w.prepare_commit())
            w.close()

        write(list(range(3000)), 1, "base")
        compact(table)
        # first-row drops the keys it has (a commit of only those writes no file): new keys for it,
        # updates of the base else; its writer puts files on the levels above the base (3, 2, 1), the
        # others on level 0
        new = 5000 if name == "first" else 0
        write(list(range(new, new + 10)), 2, None)
        write(list(range(new + 5, new + 15)), None, "new")
        write(list(range(new + 20 if new else 0, (new + 20 if new else 0) + 10)), 4, None)
        before = read_rows(table)
        (task,) = plan_compaction(table, strategy=UniversalCompaction.of(table.schema.options)).tasks
        assert task.output_level == 3 and 4 not in {f.level for f in task.files}, name
        assert len(task.files) == 3, name
        compact(table, strategy=UniversalCompaction.of(table.schema.options))
        assert {f.level for f in live_files(table)} == {3, 4}, name
        assert read_rows(table) == before, name
        compact(table)
        assert read_rows(table) == before, name
