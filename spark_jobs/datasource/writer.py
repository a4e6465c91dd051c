"""Batch writes: executors write data files and return CommitMessages, the driver commits them once.

``df.write.format("paimon_meta").mode("append" | "overwrite").save("db.table")``:

* ``writer`` (driver side) opens the table, checks the DataFrame's columns and resolves the
  overwrite scope before any task runs (``overwrite-partition`` = ``k=v[,k=v]``: static; without it
  the table's ``dynamic-partition-overwrite``, as :func:`spark_jobs.batch_write.write_dataframe`).
* ``write`` (one per Spark task) feeds its rows to a ``TableWrite`` -- each row goes to Java's
  bucket -- and returns the task's CommitMessages as Java's bytes
  (:func:`paimon_meta.serde.commit_message.serialize_commit_message`) with the task's partition id.
* ``commit`` (driver side, once, only when every task succeeded) decodes them and commits one
  snapshot through the catalog (the metastore lock and event log, or the commit service);
  ``abort`` deletes the files the successful tasks wrote (never after a commit of unknown outcome,
  below). A failed task attempt deletes its own.

**Unknown outcomes.** Spark calls ``abort`` after *any* failed ``commit``, with no way to tell it
that the commit's outcome is unknown (the snapshot may exist and reference the files). So ``commit``
resolves an unknown outcome itself, by committing the same messages again as the same commit user
and identifier (exactly once: a commit that landed is deduplicated), up to
:data:`UNKNOWN_OUTCOME_ATTEMPTS` times. Through a commit service each of those attempts is itself sent
again by the client on 5xx answers and broken connections, same body, within its
``rest.retry.deadline-seconds`` (an option of the write, as any other catalog option).
An outcome still unknown after that (a commit service may still be working on a request the client
gave up on, and publish it after ``abort`` looked) is recorded (:mod:`spark_jobs.datasource.attempts`,
in the driver host's temp directory: Spark runs ``commit`` and ``abort`` in Python workers on the
driver's host) and ``abort`` then deletes nothing: the files are left to orphan-file cleanup. ``abort``
deletes the files only when no commit was attempted (a task failed) or it definitely failed, and no
snapshot of this write's commit user exists.

**One writer per bucket.** Spark's Python data source API (4.x) cannot ask Spark for a distribution
of the rows it writes, so each task writes the buckets it happens to hold. For an append table that
only means more files per bucket (as ``shuffle=False`` of the batch job). A primary-key table needs
every row of a (partition, bucket) in one writer: two writers of one bucket number their rows with
overlapping sequence numbers, and a key written by both would then have no defined winner (Java's
reader and ours could disagree). So a primary-key table is written only from :func:`by_bucket`'s
output -- the batch job's packed shuffle by (partition, bucket) -- and ``commit`` still refuses (and
deletes the files) if two tasks wrote one bucket of it, e.g. after a ``repartition`` of that output.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from paimon_meta.errors import CommitOutcomeUnknownError, ValidationError, is_definite_failure
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.serde.commit_message import CURRENT_VERSION, deserialize_commit_message
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.arrow_input import UNAWARE_BUCKET, check_writable
from paimon_meta.table.write.overwrite import OverwriteSpec
from spark_jobs.batch_write import commit_messages, resolve_overwrite
from spark_jobs.common import TableHandle
from spark_jobs.datasource.attempts import AttemptState, CommitAttempts
from spark_jobs.datasource.target import SourceOptions, current_handle, open_target
from spark_jobs.pipeline import (
    check_column_names,
    check_columns,
    delete_message_files,
    pack_and_shuffle,
    unpack,
    write_files,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

PACKED_COLUMNS = ["task", "rows"]
UNKNOWN_OUTCOME_ATTEMPTS = 3
CLOCK_MARGIN_MS = 10 * 60 * 1000
#: Where a batch write records its commit attempt (a local directory of the driver's host).
ATTEMPTS_DIR = os.path.join(tempfile.gettempdir(), "paimon_meta-commit-attempts")


@dataclass(frozen=True, slots=True)
class PaimonCommitMessage(WriterCommitMessage):
    """What one write task returns: its CommitMessages (serializer ``version`` bytes) and its Spark
    partition id."""

    task: int
    messages: tuple[bytes, ...]
    version: int = CURRENT_VERSION

    def decode(self) -> list[CommitMessage]:
        return [deserialize_commit_message(m, self.version) for m in self.messages]


def is_packed(schema: StructType, table: FileStoreTable) -> bool:
    """Whether the DataFrame being written is :func:`by_bucket`'s packed output (not table rows)."""
    return schema.fieldNames() == PACKED_COLUMNS and table.schema.field_names != PACKED_COLUMNS


def new_writer(opts: SourceOptions, schema: StructType, overwrite: bool) -> PaimonWriter:
    """The writer of one ``df.write`` (checks run on the driver, before any task)."""
    opened = open_target(opts)
    try:
        table = opened.table
        check_writable(table.schema)  # what TableWrite refuses on the executors, refused before any task
        packed = is_packed(schema, table)
        if not packed:
            check_column_names(schema.fieldNames(), table.schema)
            if table.is_primary_key_table:
                raise ValidationError(
                    f"primary-key table {opts.table} needs every row of a bucket in one Spark task: "
                    "write spark_jobs.datasource.by_bucket(df, table, options) instead of df (the batch "
                    "job's shuffle by bucket), or use spark_jobs.batch_write.write_dataframe",
                    table=opts.table,
                )
        if overwrite:
            spec = resolve_overwrite(table.schema, "overwrite", opts.overwrite_partition)
        elif opts.overwrite_partition is not None:
            raise ValidationError("option overwrite-partition needs mode('overwrite')")
        else:
            spec = None
        handle = TableHandle.of(table, opened.io_options)  # the write's tasks start next: taken now
        return PaimonWriter(opts, handle, str(uuid.uuid4()), spec, packed=packed, vends=opened.vends)
    finally:
        opened.close()


def landed(table: FileStoreTable, commit_user: str, since_ms: int) -> bool:
    """Whether a snapshot committed by ``commit_user`` exists, looking back from the latest snapshot
    over those created after ``since_ms`` (less :data:`CLOCK_MARGIN_MS`: the writer's and the
    committer's clocks may differ)."""
    snapshots = table.snapshot_manager
    snapshot = snapshots.latest_snapshot()
    while snapshot is not None and snapshot.time_millis >= since_ms - CLOCK_MARGIN_MS:
        if snapshot.commit_user == commit_user:
            return True
        previous = snapshot.id - 1
        if previous < 1 or not snapshots.snapshot_exists(previous):
            return False
        snapshot = snapshots.snapshot(previous)
    return False


class PaimonWriter(DataSourceArrowWriter):
    """See the module docstring. ``commit_user`` is shared by the executors' files and the snapshot."""

    def __init__(
        self,
        options: SourceOptions,
        handle: TableHandle,
        commit_user: str,
        overwrite: OverwriteSpec | None,
        *,
        packed: bool,
        vends: bool = False,
    ) -> None:
        self.options = options
        self.handle = handle
        self.commit_user = commit_user
        self.overwrite = overwrite
        self.packed = packed
        #: the handle holds credentials the service vends (scoped to the table only)
        self.vends = vends
        self.started_ms = int(time.time() * 1000)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PaimonCommitMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        if self.packed:
            tables: Iterator[pa.Table] = unpack(iterator)
        else:
            tables = (pa.Table.from_batches([b]) for b in iterator)
        handle = current_handle(self.handle, self.options)  # fresh credentials if these are stale
        encoded = list(write_files(handle, self.commit_user, tables))
        messages = tuple(bytes(m) for batch in encoded for m in batch.column("message").to_pylist())
        return PaimonCommitMessage(task, messages)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        per_task = _received(messages)
        decoded = [m for _, batch in per_task for m in batch]
        opened = open_target(self.options)
        try:
            table = opened.table
            try:
                if table.is_primary_key_table:
                    _check_one_writer_per_bucket(table, per_task)
            except ValidationError:
                delete_message_files(table, decoded)
                raise
            attempts = CommitAttempts(ATTEMPTS_DIR)
            attempts.begin(self.commit_user)
            try:
                for attempt in range(1, UNKNOWN_OUTCOME_ATTEMPTS + 1):
                    try:
                        commit_messages(table, self.commit_user, decoded, self.overwrite)
                        break
                    except CommitOutcomeUnknownError as e:
                        if attempt == UNKNOWN_OUTCOME_ATTEMPTS:
                            raise
                        log.warning(
                            "commit of %s: outcome unknown (%s); committing again to resolve it",
                            table.path,
                            e,
                        )
            except BaseException as e:
                if is_definite_failure(e):
                    attempts.failed(self.commit_user)
                raise  # otherwise the record stays UNKNOWN: abort keeps the files
            attempts.forget(self.commit_user)
            if opened.retries_note():
                log.info("commit of %s by %s%s", self.options.table, self.commit_user, opened.retries_note())
        finally:
            opened.close()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        decoded = [m for _, batch in _received(messages) for m in batch]
        if not decoded:
            return
        attempts = CommitAttempts(ATTEMPTS_DIR)
        if attempts.state(self.commit_user) is AttemptState.UNKNOWN:
            log.warning(
                "write of %s (commit user %s) aborted after a commit of unknown outcome: its %d file(s) "
                "are kept (a snapshot may reference them); orphan-file cleanup removes them if not",
                self.options.table,
                self.commit_user,
                sum(len(m.data_increment.new_files) for m in decoded),
            )
            return
        opened = open_target(self.options)
        try:
            if landed(opened.table, self.commit_user, self.started_ms):
                return  # the commit went through after all: the files are the table's now
            delete_message_files(opened.table, decoded)
        finally:
            opened.close()
        attempts.forget(self.commit_user)


def _received(messages: Sequence[WriterCommitMessage | None]) -> list[tuple[int, list[CommitMessage]]]:
    out = []
    for m in messages:
        if m is None:
            continue  # a task that failed: it deleted its own files
        if not isinstance(m, PaimonCommitMessage):
            raise ValidationError(f"unexpected commit message {type(m).__name__} from a write task")
        out.append((m.task, m.decode()))
    return out


def _check_one_writer_per_bucket(
    table: FileStoreTable, per_task: Sequence[tuple[int, Sequence[CommitMessage]]]
) -> None:
    writers: dict[tuple[bytes, int], set[int]] = {}
    for task, batch in per_task:
        for m in batch:
            writers.setdefault((m.partition, m.bucket), set()).add(task)
    shared = [(key, tasks) for key, tasks in writers.items() if len(tasks) > 1]
    if shared:
        (partition, bucket), tasks = shared[0]
        raise ValidationError(
            f"bucket {bucket} of partition {table.partition_spec(partition)} of primary-key table "
            f"{table.path} was written by {len(tasks)} Spark tasks ({len(shared)} bucket(s) so): write "
            "by_bucket(df, table) as it is, without repartitioning it; nothing was committed",
            bucket=bucket,
            tasks=sorted(tasks),
        )


def by_bucket(
    df: DataFrame, table: str, options: Mapping[str, str] | None = None, *, num_partitions: int | None = None
) -> DataFrame:
    """``df``'s rows packed and shuffled by Paimon (partition, bucket) -- the batch job's shuffle
    (:func:`spark_jobs.pipeline.pack_and_shuffle`) -- ready for ``.write.format("paimon_meta")``:
    every bucket is then written by one task, with one set of files. Required for primary-key tables,
    optional for append tables (fewer, larger files; a bucket-unaware table gets ``df`` back).

    ``table`` and ``options`` are what the write will get (``save(table)``, ``.options(**options)``:
    ``metastore``, ``warehouse``, storage options...). ``num_partitions``: the number of write tasks
    (default: one per bucket for unpartitioned tables, else ``spark.sql.shuffle.partitions``)."""
    opened = open_target(SourceOptions.parse({**(options or {}), "path": table}))
    try:
        schema = opened.table.schema
        check_columns(df, schema)
        if schema.num_buckets == UNAWARE_BUCKET:
            return df
        return pack_and_shuffle(df, TableHandle.of(opened.table, opened.io_options), schema, num_partitions)
    finally:
        opened.close()
