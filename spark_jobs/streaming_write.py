"""Structured Streaming into a Paimon table, exactly once per micro-batch.

Every micro-batch goes through the batch job's write path (:func:`spark_jobs.batch_write.
write_messages`) inside ``foreachBatch`` and is committed with **identifier = batch id** under a
**commit user that is stable per checkpoint location**: a uuid created once and kept in the
checkpoint directory (``<checkpoint>/paimon-commit-user``). A uuid rather than a hash of the path,
so deleting a checkpoint and starting again under the same path -- where Spark restarts batch ids
at 0 -- is a new writer instead of one whose batches all look committed.

Restart after a crash between publishing a snapshot and Spark writing ``commits/<batch id>``: Spark
runs the same batch id again. The first batch a sink sees is checked with ``filter_committed``;
if this commit user already committed it, the batch is skipped without writing anything. Should a
replay race past that check (two drivers on one checkpoint), the commit path deduplicates the
(user, identifier) and the replayed files are deleted (``abort``). Through the commit service
(``--service URL --token T``) both answers come from the service, over HTTP: the driver holds no
database credentials.

Run it: ``python -m spark_jobs.streaming_write --table-path /wh/db.db/t --source-dir /in
--format parquet --checkpoint /ckpt --available-now``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from paimon_meta.errors import FileAlreadyExistsError, FileNotFound, is_definite_failure
from paimon_meta.io import get_file_io
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.builder import CommitOutcome
from spark_jobs.cli_args import outside_table_storage
from spark_jobs.common import IoOptions, TableHandle
from spark_jobs.pipeline import TaskHook, write_messages

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

COMMIT_USER_FILE = "paimon-commit-user"
# Test hooks, for the window the exactly-once protocol exists for: right after committing this batch
# id (its snapshot published, by this process or by the commit service), before Spark records the
# batch as done in the checkpoint, the driver exits at once (CRASH: ``os._exit``) or hangs in the sink
# until killed (HANG: a test looks at the window, then SIGKILLs the driver). Hanging, not stopping
# itself (SIGSTOP): any SIGCONT resumes a stopped process (the kernel sends one to a stopped orphaned
# process group), and a resumed sink lets Spark record the batch.
CRASH_AFTER_COMMIT_ENV = "PAIMON_META_CRASH_AFTER_COMMIT_BATCH"
HANG_AFTER_COMMIT_ENV = "PAIMON_META_HANG_AFTER_COMMIT_BATCH"
HANG_MARKER = "paimon_meta: hanging after committing batch"
CRASH_EXIT_CODE = 75


def checkpoint_commit_user(
    checkpoint_location: str, io_options: Mapping[str, str] | None = None, *, table_vends: bool = False
) -> str:
    """The commit user of the stream checkpointed at ``checkpoint_location``: read from the
    checkpoint directory, or created there (atomically: concurrent starters agree on one).

    ``io_options`` are the job's *own* storage options, never vended credentials: those are scoped to
    the table's location, and the checkpoint is not in it. ``table_vends``: the table's files are
    opened with vended credentials, so a checkpoint the job's options cannot reach is reported as such
    (:func:`spark_jobs.cli_args.outside_table_storage`)."""
    with outside_table_storage(checkpoint_location, "checkpoint location", table_vends=table_vends):
        file_io = get_file_io(checkpoint_location, io_options)
        path = file_io.join(checkpoint_location, COMMIT_USER_FILE)
        try:
            return file_io.read(path).decode("utf-8").strip()
        except FileNotFound:
            pass
        # If someone else created it first, theirs is the one.
        with contextlib.suppress(FileAlreadyExistsError):
            file_io.create_if_absent(path, f"spark-stream-{uuid.uuid4()}".encode())
        return file_io.read(path).decode("utf-8").strip()


def commit_batch(
    table: FileStoreTable, commit_user: str, messages: Sequence[CommitMessage], batch_id: int
) -> CommitOutcome:
    """Commit one micro-batch's messages as ``(commit_user, batch_id)``. A deduplicated commit (the
    batch was committed before) or a definitely failed one deletes the messages' files."""
    commit = table.new_stream_write_builder().with_commit_user(commit_user).new_commit()
    try:
        outcome = commit.commit(messages, batch_id)
    except Exception as e:
        if is_definite_failure(e):
            commit.abort(messages)
        raise  # anything else (an unknown outcome included) may have published: keep the files
    if outcome.deduplicated:
        commit.abort(messages)
    return outcome


class PaimonBatchSink:
    """The ``foreachBatch`` function: write and commit one micro-batch (see the module docstring)."""

    def __init__(
        self,
        table: FileStoreTable,
        commit_user: str,
        *,
        io_options: IoOptions | None = None,
        num_partitions: int | None = None,
        after_prepare: TaskHook | None = None,
    ) -> None:
        self.table = table
        self.commit_user = commit_user
        # Runs on the driver (foreachBatch), never pickled: a provider is asked for each micro-batch.
        self.io_options = io_options
        self.num_partitions = num_partitions
        self.after_prepare = after_prepare
        self._recovered = False

    def already_committed(self, batch_id: int) -> bool:
        """Whether this commit user committed ``batch_id`` (asked once, for the first batch after
        a start: later batch ids are new by construction, and the commit deduplicates anyway)."""
        if self._recovered:
            return False
        self._recovered = True
        commit = self.table.new_stream_write_builder().with_commit_user(self.commit_user).new_commit()
        return not commit.filter_committed([batch_id])

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        if self.already_committed(batch_id):
            log.info("batch %s was committed before the restart; skipping it", batch_id)
            return
        messages = write_messages(
            batch_df,
            TableHandle.of(self.table, self.io_options),  # this batch's tasks: credentials taken now
            self.table.schema,
            self.commit_user,
            num_partitions=self.num_partitions,
            after_prepare=self.after_prepare,
        )
        outcome = commit_batch(self.table, self.commit_user, messages, batch_id)
        log.info("batch %s -> snapshots %s", batch_id, list(outcome.snapshot_ids))
        after_commit_hooks(batch_id)


def after_commit_hooks(batch_id: int) -> None:
    """The test hooks (:data:`HANG_AFTER_COMMIT_ENV`, :data:`CRASH_AFTER_COMMIT_ENV`) after a commit."""
    if os.environ.get(HANG_AFTER_COMMIT_ENV) == str(batch_id):
        sys.stderr.write(f"{HANG_MARKER} {batch_id} (pid {os.getpid()})\n")
        sys.stderr.flush()
        while True:  # the batch never returns to Spark
            time.sleep(3600)
    if os.environ.get(CRASH_AFTER_COMMIT_ENV) == str(batch_id):
        os._exit(CRASH_EXIT_CODE)


def start_stream(
    df: DataFrame,
    table: FileStoreTable,
    *,
    checkpoint_location: str,
    io_options: IoOptions | None = None,
    checkpoint_options: Mapping[str, str] | None = None,
    table_vends: bool = False,
    available_now: bool = False,
    processing_time: str | None = None,
    num_partitions: int | None = None,
    query_name: str | None = None,
) -> StreamingQuery:
    """Start writing the streaming DataFrame ``df`` into ``table`` (open for writing).

    ``checkpoint_location`` is Spark's checkpoint directory (local or S3). ``io_options`` open the
    table's files (a provider, ``OpenedTable.fresh_io_options``, is asked for each micro-batch);
    ``checkpoint_options`` open the checkpoint (default: ``io_options`` when they are a map; a job on
    vended credentials must give its own: those credentials are scoped to the table and do not reach
    the checkpoint; ``table_vends`` says it is such a job). Trigger: ``available_now`` (process what is
    there, then stop), ``processing_time`` (e.g. ``"10 seconds"``) or Spark's default (as fast as
    possible).
    """
    if checkpoint_options is None and not callable(io_options):
        checkpoint_options = io_options
    commit_user = checkpoint_commit_user(checkpoint_location, checkpoint_options, table_vends=table_vends)
    sink = PaimonBatchSink(table, commit_user, io_options=io_options, num_partitions=num_partitions)
    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint_location)
    if query_name:
        writer = writer.queryName(query_name)
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif processing_time:
        writer = writer.trigger(processingTime=processing_time)
    return writer.start()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spark_jobs.streaming_write``: stream files of a directory into a table."""
    from spark_jobs.cli_args import add_table_arguments, open_target
    from spark_jobs.common import spark_schema
    from spark_jobs.session import build_session

    parser = argparse.ArgumentParser(prog="spark_jobs.streaming_write", description=__doc__.split("\n")[0])
    add_table_arguments(parser)
    parser.add_argument("--source-dir", required=True, help="directory the file source watches")
    parser.add_argument("--format", default="parquet", choices=("parquet", "csv", "json"))
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint location")
    parser.add_argument("--max-files-per-trigger", type=int, default=None)
    trigger = parser.add_mutually_exclusive_group()
    trigger.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    trigger.add_argument("--processing-time", default=None, help='e.g. "10 seconds"')
    parser.add_argument("--num-partitions", type=int, default=None)
    args = parser.parse_args(argv)

    spark = build_session("paimon_meta.streaming_write", master=args.master)
    opened = open_target(args)
    try:
        reader = spark.readStream.format(args.format).schema(spark_schema(opened.table.arrow_schema()))
        if args.format == "csv":
            reader = reader.option("header", "true")
        if args.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", str(args.max_files_per_trigger))
        query = start_stream(
            reader.load(args.source_dir),
            opened.table,
            checkpoint_location=args.checkpoint,
            io_options=opened.fresh_io_options,
            checkpoint_options=opened.options,  # never the vended ones (not the table's location)
            table_vends=opened.vends,
            available_now=args.available_now,
            processing_time=args.processing_time,
            num_partitions=args.num_partitions,
        )
        query.awaitTermination()
    finally:
        opened.close()
    if opened.retries_note():
        print(f"{opened.table.path}: stream stopped{opened.retries_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
