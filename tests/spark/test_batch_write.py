"""The batch job end to end: DataFrame -> bucketed data files on executors -> one commit."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.model.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind
from paimon_meta.model.types import BIGINT
from paimon_meta.table.write.bucket import bucket_array
from paimon_meta.table.write.overwrite import OverwriteSpec
from spark_jobs.batch_write import main, write_dataframe
from tests.spark.helpers import SCHEMA, append_table, create_table, live_files, pk_table, read_rows, sort_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark


def frame(spark: SparkSession, start: int, n: int, partitions: int = 3) -> DataFrame:
    return spark.range(start, start + n, numPartitions=3).selectExpr(
        "id", f"concat('p', cast(id % {partitions} as string)) as p", "id * 0.5 as v"
    )


def expected(start: int, n: int, partitions: int = 3) -> list[dict[str, Any]]:
    return sort_rows([{"id": i, "p": f"p{i % partitions}", "v": i * 0.5} for i in range(start, start + n)])


def test_append_commits_once_with_java_buckets(spark: SparkSession, tmp_path: Path) -> None:
    table = append_table(str(tmp_path))
    result = write_dataframe(frame(spark, 0, 3000), table)
    assert read_rows(table) == expected(0, 3000)
    assert result.rows == 3000 and result.snapshot_ids == (1,)
    snapshot = table.latest_snapshot()
    assert snapshot is not None and snapshot.commit_kind is CommitKind.APPEND
    assert (snapshot.commit_user, snapshot.commit_identifier) == (result.commit_user, BATCH_COMMIT_IDENTIFIER)
    # The shuffle gives every (partition, bucket) to one task: one message and one file each.
    splits = table.new_read_builder().new_scan().plan().splits()
    assert result.messages == len(splits) == 9
    assert all(len(s.files) == 1 for s in splits)
    for split in splits:  # every row sits in the bucket Java's bucket function gives it
        ids = table.new_read_builder().new_read().to_arrow([split]).column("id")
        assert set(bucket_array([ids], [BIGINT(False)], 3).tolist()) == {split.bucket}


def test_append_without_shuffle_keeps_java_buckets(spark: SparkSession, tmp_path: Path) -> None:
    table = append_table(str(tmp_path))
    result = write_dataframe(frame(spark, 0, 3000).repartition(3), table, shuffle=False)
    assert read_rows(table) == expected(0, 3000)
    splits = table.new_read_builder().new_scan().plan().splits()
    # Each of the 3 input tasks writes a file for every (partition, bucket) it holds.
    assert len(splits) == 9 and sum(len(s.files) for s in splits) == result.files > 9
    for split in splits:
        ids = table.new_read_builder().new_read().to_arrow([split]).column("id")
        assert set(bucket_array([ids], [BIGINT(False)], 3).tolist()) == {split.bucket}
    with pytest.raises(ValidationError, match="shuffle=False is for append tables"):
        write_dataframe(frame(spark, 0, 10), pk_table(str(tmp_path / "pk")), shuffle=False)


def test_primary_key_table_upserts_and_deletes(spark: SparkSession, tmp_path: Path) -> None:
    table = pk_table(str(tmp_path))
    write_dataframe(frame(spark, 0, 1000), table)
    changes = spark.createDataFrame(
        [(1, "p1", 100.0, "+U"), (2, "p2", None, "-D"), (5000, "p0", 1.0, "+I")],
        "id long, p string, v double, _row_kind string",
    )
    write_dataframe(changes, table)
    rows = {(r["id"], r["p"]): r["v"] for r in read_rows(table)}
    assert len(rows) == 1000
    assert rows[(1, "p1")] == 100.0 and (2, "p2") not in rows and rows[(5000, "p0")] == 1.0


def test_overwrite_static_and_dynamic(spark: SparkSession, tmp_path: Path) -> None:
    table = append_table(str(tmp_path))
    write_dataframe(frame(spark, 0, 300), table)
    # dynamic: only the partition present in the data (p1) is replaced
    new_p1 = spark.createDataFrame([(10_001, "p1", 1.0)], SCHEMA.names)
    result = write_dataframe(new_p1, table, mode="overwrite")
    assert result.overwrite == OverwriteSpec({}, dynamic=True)
    rows = read_rows(table)
    assert sorted(r["id"] for r in rows if r["p"] == "p1") == [10_001]
    assert Counter(r["p"] for r in rows) == {"p0": 100, "p1": 1, "p2": 100}
    # static: the named partition is replaced even by empty data
    write_dataframe(new_p1.limit(0), table, mode="overwrite", overwrite_partition={"p": "p0"})
    assert Counter(r["p"] for r in read_rows(table)) == {"p1": 1, "p2": 100}
    snapshot = table.latest_snapshot()
    assert snapshot is not None and snapshot.commit_kind is CommitKind.OVERWRITE
    # rows outside a static partition are refused and their files deleted
    before = _data_files_on_disk(tmp_path)
    with pytest.raises(ValidationError):
        write_dataframe(frame(spark, 0, 30), table, mode="overwrite", overwrite_partition={"p": "p0"})
    assert _data_files_on_disk(tmp_path) == before


def test_dynamic_overwrite_replaces_every_partition_in_the_data_in_one_snapshot(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = append_table(str(tmp_path))
    write_dataframe(frame(spark, 0, 300), table)
    fresh = spark.createDataFrame(
        [(20_000, "p0", 1.0), (20_001, "p2", 2.0), (20_002, "p2", 3.0)], SCHEMA.names
    )
    result = write_dataframe(fresh, table, mode="overwrite")
    assert result.overwrite == OverwriteSpec({}, dynamic=True) and len(result.snapshot_ids) == 1
    rows = read_rows(table)
    assert Counter(r["p"] for r in rows) == {"p0": 1, "p1": 100, "p2": 2}
    assert sorted(r["id"] for r in rows if r["p"] != "p1") == [20_000, 20_001, 20_002]
    # no rows: nothing replaced, no snapshot (Java's dynamic mode)
    empty = write_dataframe(fresh.limit(0), table, mode="overwrite")
    assert empty.snapshot_ids == () and len(read_rows(table)) == 103


def test_missing_columns_fail_before_any_job(spark: SparkSession, tmp_path: Path) -> None:
    table = append_table(str(tmp_path))
    with pytest.raises(ValidationError, match=r"missing \['v'\]"):
        write_dataframe(frame(spark, 0, 10).drop("v"), table)
    assert table.latest_snapshot() is None


def _data_files_on_disk(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("data-*")}


def _fail_first_attempt_of_task_0(messages: list[Any]) -> None:
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None
    if context.partitionId() == 0 and context.attemptNumber() == 0 and messages:
        raise RuntimeError("injected failure after the task wrote its files")


def _die_in_first_attempt_of_task_0(messages: list[Any]) -> None:
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None
    if context.partitionId() == 0 and context.attemptNumber() == 0 and messages:
        os._exit(3)  # the Python worker dies: nothing cleans up after it


def test_task_retry_commits_each_row_once(spark: SparkSession, tmp_path: Path) -> None:
    table = append_table(str(tmp_path))
    result = write_dataframe(frame(spark, 0, 2000), table, after_prepare=_fail_first_attempt_of_task_0)
    assert read_rows(table) == expected(0, 2000)
    assert result.rows == 2000
    # the failed attempt raised, so it deleted its own files: everything on disk is committed
    referenced = {f.file_name for f in live_files(table)}
    assert {Path(p).name for p in _data_files_on_disk(tmp_path)} == referenced


def test_dead_attempt_leaves_only_unreferenced_orphans(spark: SparkSession, tmp_path: Path) -> None:
    table = append_table(str(tmp_path))
    write_dataframe(frame(spark, 0, 2000), table, after_prepare=_die_in_first_attempt_of_task_0)
    assert read_rows(table) == expected(0, 2000)
    referenced = {f.file_name for f in live_files(table)}
    on_disk = {Path(p).name for p in _data_files_on_disk(tmp_path)}
    assert referenced < on_disk  # the dead attempt's files are orphans, none of them committed


@pytest.mark.s3
def test_append_on_s3_warehouse(spark: SparkSession, s3_warehouse: tuple[str, dict[str, str]]) -> None:
    uri, options = s3_warehouse
    table = append_table(uri, io_options=options)
    result = write_dataframe(frame(spark, 0, 1500), table, io_options=options)
    assert result.snapshot_ids == (1,)
    assert read_rows(table) == expected(0, 1500)
    write_dataframe(frame(spark, 1500, 1500), table, io_options=options)
    assert read_rows(table) == expected(0, 3000)


def test_command_line_generates_and_commits(spark: SparkSession, tmp_path: Path, capsys: Any) -> None:
    table = create_table(str(tmp_path), "db.g", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    assert main(["--table-path", table.path, "--generate", "500"]) == 0
    assert "committed snapshots [1]" in capsys.readouterr().out
    rows = read_rows(table)
    assert len(rows) == 500 and len({r["id"] for r in rows}) == 500
    assert {r["p"] for r in rows} == {"p0", "p1", "p2", "p3"}
