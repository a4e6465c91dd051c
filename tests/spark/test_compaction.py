"""The Spark compaction job, alone and beside concurrent writers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from paimon_meta.catalog.storage import open_table
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.table.table import FileStoreTable
from spark_jobs.batch_write import write_dataframe
from spark_jobs.compaction import compact_table, main
from tests.spark.helpers import STRING_SCHEMA, append_table, live_files, pk_table, read_rows, sort_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

ROW_TYPE = "id long, p string, v string, _row_kind string"


def file_count(table: FileStoreTable, snapshot_id: int) -> int:
    return len(live_files(table, snapshot_id))


def upserts(writer: int, round_: int) -> list[tuple[int, str, str | None, str]]:
    """Writer ``writer`` owns ids with ``id % 2 == writer``: it upserts 60 of them and deletes 3."""
    ids = [2 * i + writer for i in range(round_ * 20, round_ * 20 + 60)]
    rows: list[tuple[int, str, str | None, str]] = [
        (i, f"p{i % 3}", f"w{writer}r{round_}", "+I") for i in ids
    ]
    rows += [(i, f"p{i % 3}", None, "-D") for i in ids[5:20:5]]
    return rows


def frame_of(spark: SparkSession, rows: list[tuple[int, str, str | None, str]]) -> DataFrame:
    """The rows as one input partition: a round upserts and then deletes some keys, and the write
    pipeline keeps the order of one key's rows only within an input partition (across partitions it is
    Spark's shuffle order), so spread over several (as on a cluster) a delete could precede its upsert."""
    return spark.createDataFrame(rows, ROW_TYPE).coalesce(1)


def apply(state: dict[tuple[int, str], str | None], rows: list[tuple[int, str, str | None, str]]) -> None:
    for i, p, v, kind in rows:
        if kind == "-D":
            state.pop((i, p), None)
        else:
            state[(i, p)] = v


def test_compaction_job_merges_primary_key_files(spark: SparkSession, tmp_path: Path, capsys: Any) -> None:
    table = pk_table(str(tmp_path), STRING_SCHEMA)
    state: dict[tuple[int, str], str | None] = {}
    for r in range(3):
        rows = upserts(0, r)
        write_dataframe(frame_of(spark, rows), table)
        apply(state, rows)
    before = read_rows(table)
    assert main(["--table-path", table.path]) == 0
    assert "COMPACT snapshot [4]" in capsys.readouterr().out
    assert before == sort_rows([{"id": i, "p": p, "v": v} for (i, p), v in state.items()])
    assert read_rows(table) == before
    assert file_count(table, 4) < file_count(table, 3)
    assert main(["--table-path", table.path]) == 0
    assert "nothing to compact" in capsys.readouterr().out


def run_threads(*targets: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as e:
                errors.append(e)

        return run

    threads = [threading.Thread(target=guarded(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors


def test_compaction_beside_two_writers_loses_nothing(spark: SparkSession, tmp_path: Path) -> None:
    table = pk_table(str(tmp_path), STRING_SCHEMA)
    state: dict[tuple[int, str], str | None] = {}
    lock = threading.Lock()
    for r in range(2):  # level-0 files for the compaction to merge
        for w in (0, 1):
            rows = upserts(w, r)
            write_dataframe(frame_of(spark, rows), table)
            apply(state, rows)
    compactions: list[int] = []

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            own = open_table(table.path)  # one table object per thread
            for r in range(2, 5):
                rows = upserts(w, r)
                write_dataframe(frame_of(spark, rows), own)
                with lock:
                    apply(state, rows)

        return run

    def compactor() -> None:
        own = open_table(table.path)
        for _ in range(2):
            result = compact_table(spark, own)
            compactions.extend(result.snapshot_ids)

    run_threads(writer(0), writer(1), compactor)
    expected = sort_rows([{"id": i, "p": p, "v": v} for (i, p), v in state.items()])
    assert read_rows(table) == expected  # no lost or resurrected rows
    assert compactions
    for sid in compactions:
        assert table.snapshot(sid).commit_kind is CommitKind.COMPACT
        # a COMPACT snapshot changes files, never rows
        assert read_rows(table, sid) == read_rows(table, sid - 1)
        assert file_count(table, sid) < file_count(table, sid - 1)


def test_append_compaction_beside_two_writers(spark: SparkSession, tmp_path: Path) -> None:
    table = append_table(str(tmp_path), "db.a", STRING_SCHEMA, buckets=2)
    for r in range(3):
        rows = [(r * 100 + i, f"p{i % 2}", "x") for i in range(50)]
        write_dataframe(spark.createDataFrame(rows, STRING_SCHEMA.names), table)

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            own = open_table(table.path)
            for r in range(3):
                base = 10_000 * (w + 1) + 100 * r
                frame = spark.createDataFrame(
                    [(base + i, f"p{i % 2}", "y") for i in range(50)], STRING_SCHEMA.names
                )
                write_dataframe(frame, own)

        return run

    results = []

    def compactor() -> None:
        results.append(compact_table(spark, open_table(table.path)))

    run_threads(writer(0), writer(1), compactor)
    ids = [r["id"] for r in read_rows(table)]
    assert len(ids) == len(set(ids)) == 3 * 50 + 2 * 3 * 50
    (result,) = results
    (sid,) = result.snapshot_ids
    assert read_rows(table, sid) == read_rows(table, sid - 1)
    assert file_count(table, sid) < file_count(table, sid - 1)
