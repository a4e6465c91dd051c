"""Dedicated compaction job: plan on the driver, rewrite buckets on executors, commit once.

The compaction logic (what to merge, how rows merge, the COMPACT commit and its conflict retry) is
:mod:`paimon_meta.table.compact`, which is Spark-free; this module only distributes its tasks. Each
:class:`~paimon_meta.table.compact.CompactTask` (one partition/bucket) is pickled into a row of its
own Spark partition, ``mapInArrow`` runs it on an executor against the table opened by path, and the
resulting CommitMessages come back as ``(message, version)`` rows like the batch writer's.

Writers keep committing while this runs: their new files are not in the plan and do not conflict.
If a planned file disappears meanwhile (another compaction, an overwrite), the commit conflicts and
the plan is redone on the new snapshot (``compact(max_attempts=...)``).

Run it: ``python -m spark_jobs.compaction --table-path /wh/db.db/t`` (or ``--table db.t`` with a
metastore).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.table.compact import (
    DEFAULT_MAX_ATTEMPTS,
    CompactResult,
    CompactTask,
    TaskRunner,
    compact,
    run_task,
)
from paimon_meta.table.read.scan import PartitionFilterArg
from paimon_meta.table.table import FileStoreTable
from spark_jobs.common import IoOptions, TableHandle
from spark_jobs.pipeline import MESSAGE_SCHEMA, decode_rows, encode_messages

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_pickled_tasks(handle: TableHandle, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: run every task of the partition, one message row per task."""
    table = handle.open()
    for batch in batches:
        for payload in batch.column("task").to_pylist():
            task: CompactTask = pickle.loads(payload)  # bytes the driver just pickled for us
            yield encode_messages([run_task(table, task)])


def spark_runner(spark: SparkSession, io_options: IoOptions | None = None) -> TaskRunner:
    """A task runner that executes each task in its own Spark partition, opening the table with
    ``io_options`` (a provider is asked again for each run: a conflict's re-plan may start much later)."""

    def run(table: FileStoreTable, tasks: Sequence[CompactTask]) -> list[CommitMessage]:
        if not tasks:
            return []
        handle = TableHandle.of(table, io_options)
        payloads = [(pickle.dumps(t, protocol=pickle.HIGHEST_PROTOCOL),) for t in tasks]
        rdd = spark.sparkContext.parallelize(payloads, numSlices=len(payloads))
        frame = spark.createDataFrame(rdd, "task binary")
        out = frame.mapInArrow(lambda it: run_pickled_tasks(handle, it), MESSAGE_SCHEMA)
        return decode_rows(out.collect())

    return run


def compact_table(
    spark: SparkSession,
    table: FileStoreTable,
    *,
    io_options: IoOptions | None = None,
    partition_filter: PartitionFilterArg | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> CompactResult:
    """Fully compact ``table`` (open for writing) with the rewrites running on Spark executors;
    ``io_options`` are the FileIO options executors open the table with, or their provider
    (``OpenedTable.fresh_io_options``), asked for each set of tasks."""
    runner = spark_runner(spark, io_options)
    return compact(table, runner=runner, partition_filter=partition_filter, max_attempts=max_attempts)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spark_jobs.compaction``: compact one table and print what changed."""
    from spark_jobs.cli_args import add_table_arguments, open_target
    from spark_jobs.common import parse_options
    from spark_jobs.session import build_session

    parser = argparse.ArgumentParser(prog="spark_jobs.compaction", description=__doc__.split("\n")[0])
    add_table_arguments(parser)
    parser.add_argument("--partition", action="append", default=[], help="compact only k=v (repeatable)")
    parser.add_argument("--max-attempts", type=int, default=DEFAULT_MAX_ATTEMPTS)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the result as one JSON object (the last line; for the service's maintenance workers)",
    )
    args = parser.parse_args(argv)

    spark = build_session("paimon_meta.compaction", master=args.master)
    opened = open_target(args)
    started = time.monotonic()
    try:
        result = compact_table(
            spark,
            opened.table,
            io_options=opened.fresh_io_options,
            partition_filter=parse_options(args.partition) if args.partition else None,
            max_attempts=args.max_attempts,
        )
    finally:
        opened.close()
    if args.json:
        print(
            json.dumps(
                {
                    "table": opened.table.path,
                    "snapshot_ids": list(result.snapshot_ids),
                    "buckets": result.buckets,
                    "conflicts": result.conflicts,
                    "rows_rewritten": result.rows_rewritten,
                    "compacted_files": result.files_before,
                    "written_files": result.files_after,
                    "seconds": round(time.monotonic() - started, 3),
                }
            )
        )
        return 0
    if not result.snapshot_ids:
        print(f"{opened.table.path}: nothing to compact{opened.retries_note()}")
        return 0
    print(
        f"{opened.table.path}: COMPACT snapshot {list(result.snapshot_ids)}, {result.buckets} buckets, "
        f"{result.files_before} -> {result.files_after} files, {result.rows_rewritten} rows rewritten, "
        f"{result.conflicts} conflicts, {time.monotonic() - started:.1f} s{opened.retries_note()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
