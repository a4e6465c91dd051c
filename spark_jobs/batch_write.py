"""Batch write: a Spark DataFrame -> Paimon data files on executors -> one commit on the driver.

The rows go through :mod:`spark_jobs.pipeline` (bucket assignment and packing in ``mapInArrow``, a
shuffle by (partition, bucket), ``TableWrite`` in ``mapInArrow``; no Paimon jars), and the driver
decodes the returned CommitMessages and commits them once through the table's commit path (the
metastore lock + event log for catalog tables), with the batch builder's commit user and Java's
batch identifier (``Long.MAX_VALUE``); both are recorded in the snapshot. Only the successful
attempt of each Spark task contributes messages, so task retries never duplicate files in the commit.

Run it: ``python -m spark_jobs.batch_write --table-path /wh/db.db/t --generate 1000000`` or
``spark-submit spark_jobs/batch_write.py --table db.t --metastore ... --source-parquet s3://...``.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from paimon_meta.errors import ValidationError, is_definite_failure
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import BATCH_COMMIT_IDENTIFIER
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.builder import CommitOutcome
from paimon_meta.table.write.overwrite import OverwriteSpec
from spark_jobs.common import IoOptions, TableHandle
from spark_jobs.pipeline import TaskHook, write_messages

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

WriteMode = Literal["append", "overwrite"]


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What one :func:`write_dataframe` call committed.

    ``snapshot_ids`` is empty when nothing was committed (a dynamic overwrite of no rows).
    ``overwrite`` is the resolved overwrite scope (None for an append).
    ``rows`` counts the rows in the new data files (after primary-key de-duplication within a task).
    """

    table_path: str
    commit_user: str
    commit_identifier: int
    snapshot_ids: tuple[int, ...]
    deduplicated: bool
    messages: int
    files: int
    rows: int
    overwrite: OverwriteSpec | None
    seconds: float


# ---- driver side --------------------------------------------------------------------------------------


def write_dataframe(
    df: DataFrame,
    table: FileStoreTable,
    *,
    mode: WriteMode = "append",
    overwrite_partition: Mapping[str, Any] | None = None,
    io_options: IoOptions | None = None,
    num_partitions: int | None = None,
    after_prepare: TaskHook | None = None,
    shuffle: bool = True,
) -> WriteResult:
    """Write ``df`` into ``table`` and commit it once.

    ``mode="append"`` adds the rows; ``mode="overwrite"`` replaces ``overwrite_partition`` (a full or
    partial partition spec; ``{}`` = the whole table: a static overwrite, as Spark's default
    ``partitionOverwriteMode``, so empty data empties it) or, when it is None, the table's default
    (Java's ``dynamic-partition-overwrite``, on unless the table turns it off: only the partitions
    present in the data are replaced, any number of them in one snapshot; the whole table if it is
    unpartitioned). Rows outside ``overwrite_partition`` are a ``ValidationError``. ``table`` must be
    open for writing (``paimon_meta.open_table`` or a catalog's ``get_table``); ``io_options`` are the
    FileIO options executors open the table with (``catalog.file_io_options``; needed for S3), or
    their provider (``OpenedTable.fresh_io_options``: vended credentials), asked once, before the tasks.
    ``num_partitions`` fixes the number of write tasks (default: one per bucket for unpartitioned
    tables, else ``spark.sql.shuffle.partitions``; bucket-unaware tables keep the input's partitioning).
    ``after_prepare`` runs on the executor after a task prepared its messages (instrumentation, fault
    injection). ``shuffle=False`` (append tables) writes each input task's rows without the shuffle by
    bucket: faster, more files per bucket (see :func:`spark_jobs.pipeline.write_messages`).

    The DataFrame has the table's columns (any order, types cast exactly as ``TableWrite`` does) and
    optionally ``_row_kind`` for primary-key tables. Raises ``ValidationError`` on bad input or
    mode; on a commit that definitely failed (``paimon_meta.errors.is_definite_failure``) the new
    files are deleted and the error re-raised; any other error (``CommitOutcomeUnknownError``
    included) deletes nothing.
    """
    started = time.monotonic()
    overwrite = resolve_overwrite(table.schema, mode, overwrite_partition)  # before any Spark job
    handle = TableHandle.of(table, io_options)
    # Executors write with the commit's user so files and snapshot agree on who wrote them.
    commit_user = str(uuid.uuid4())
    messages = write_messages(
        df,
        handle,
        table.schema,
        commit_user,
        num_partitions=num_partitions,
        after_prepare=after_prepare,
        shuffle=shuffle,
    )
    outcome = commit_messages(table, commit_user, messages, overwrite)
    return _result(
        table,
        commit_user=commit_user,
        snapshot_ids=outcome.snapshot_ids,
        deduplicated=outcome.deduplicated,
        messages=messages,
        overwrite=overwrite,
        started=started,
    )


def resolve_overwrite(
    schema: TableSchema, mode: WriteMode, overwrite_partition: Mapping[str, Any] | None
) -> OverwriteSpec | None:
    """The scope of a ``mode="overwrite"`` write (None for an append): ``overwrite_partition`` as a
    static spec, or the table's default when it is None (see :func:`write_dataframe`). Raises
    ``ValidationError`` on an unknown mode or partition column."""
    if mode not in ("append", "overwrite"):
        raise ValidationError(f"mode must be 'append' or 'overwrite', got {mode!r}", mode=mode)
    if mode == "append":
        if overwrite_partition is not None:
            raise ValidationError("overwrite_partition needs mode='overwrite'")
        return None
    if overwrite_partition is not None:
        return OverwriteSpec.resolve(OverwriteSpec.static(overwrite_partition), schema)
    return OverwriteSpec.resolve({}, schema)


def commit_messages(
    table: FileStoreTable,
    commit_user: str,
    messages: Sequence[CommitMessage],
    overwrite: OverwriteSpec | None = None,
) -> CommitOutcome:
    """Commit the executors' ``messages`` once, as a batch of ``commit_user`` (an OVERWRITE of
    ``overwrite`` when given). A commit that definitely failed deletes the messages' files and
    re-raises; any other error deletes nothing (a snapshot may reference them)."""
    builder = table.new_batch_write_builder()
    builder.commit_user = commit_user
    if overwrite is not None:
        builder.overwrite(overwrite)
    commit = builder.new_commit()
    try:
        return commit.commit(messages)
    except Exception as e:
        if is_definite_failure(e):
            commit.abort(messages)
        raise  # anything else (an unknown outcome included) may have published: keep the files


def _result(
    table: FileStoreTable,
    *,
    commit_user: str,
    snapshot_ids: tuple[int, ...],
    deduplicated: bool,
    messages: Sequence[CommitMessage],
    overwrite: OverwriteSpec | None,
    started: float,
) -> WriteResult:
    files = [f for m in messages for f in m.data_increment.new_files]
    return WriteResult(
        table_path=table.path,
        commit_user=commit_user,
        commit_identifier=BATCH_COMMIT_IDENTIFIER,
        snapshot_ids=tuple(snapshot_ids),
        deduplicated=deduplicated,
        messages=len(messages),
        files=len(files),
        rows=sum(f.row_count for f in files),
        overwrite=overwrite,
        seconds=time.monotonic() - started,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spark_jobs.batch_write``: write a source into a table and print the result."""
    from spark_jobs.cli_args import add_table_arguments, open_target

    parser = argparse.ArgumentParser(prog="spark_jobs.batch_write", description=__doc__.split("\n")[0])
    add_table_arguments(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--source-parquet")
    source.add_argument("--source-csv")
    source.add_argument("--source-table")
    source.add_argument("--generate", type=int, metavar="N", help="N generated rows")
    parser.add_argument("--mode", choices=("append", "overwrite"), default="append")
    parser.add_argument("--partition", action="append", default=[], help="static overwrite partition k=v")
    parser.add_argument("--num-partitions", type=int, default=None)
    parser.add_argument(
        "--no-shuffle", action="store_true", help="append tables: write input tasks as they are (more files)"
    )
    args = parser.parse_args(argv)

    from spark_jobs.common import parse_options
    from spark_jobs.session import build_session
    from spark_jobs.sources import load_source

    spark = build_session("paimon_meta.batch_write", master=args.master)
    opened = open_target(args)
    try:
        static = parse_options(args.partition) if args.partition else None
        result = write_dataframe(
            load_source(spark, args, opened.table.schema),
            opened.table,
            mode=args.mode,
            overwrite_partition=static,
            io_options=opened.fresh_io_options,
            num_partitions=args.num_partitions,
            shuffle=not args.no_shuffle,
        )
    finally:
        opened.close()
    print(
        f"committed snapshots {list(result.snapshot_ids)} to {result.table_path}: {result.rows} rows in "
        f"{result.files} files, commit user {result.commit_user}, identifier {result.commit_identifier}, "
        f"{result.seconds:.1f} s{opened.retries_note()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
