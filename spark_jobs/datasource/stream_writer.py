"""Streaming writes: ``df.writeStream.format("paimon_meta").option("checkpointLocation", C).start("db.t")``.

Each micro-batch is written as a batch write is (:mod:`spark_jobs.datasource.writer`: executors write
data files and return CommitMessages) and committed once, on the driver, as a *stream* commit:
**commit identifier = Spark's batch id**, under a **commit user stable across restarts of the query**
-- the uuid kept in the checkpoint directory (``<checkpoint>/paimon-commit-user``, as the
``foreachBatch`` job :mod:`spark_jobs.streaming_write`), or the ``commit-user`` option if given (it
must then be unique to this query and never change).

Exactly once: a driver that dies after the snapshot of batch N is published and before Spark records
N in ``<checkpoint>/commits`` is restarted by Spark with batch N again. Its executors write the rows
again (the writer cannot know the batch id before ``commit``), and the commit finds ``(user, N)``
already committed (``filter_committed`` semantics: the commit path deduplicates it) and deletes the
replayed files instead of publishing them.

``abort(messages, batchId)``: Spark calls it after a failed task and after a failed ``commit``. The
files are deleted only when no commit of this batch was attempted or it definitely failed; after an
unknown outcome (recorded under ``<checkpoint>/paimon-commit-attempts/<batchId>``, see
:mod:`spark_jobs.datasource.attempts`) nothing is deleted: the snapshot may reference the files, and
a restart resolves the batch (deduplicated if it landed). Files of an outcome that never landed are
left to orphan-file cleanup.

Append tables take any DataFrame; a primary-key table takes only :func:`~spark_jobs.datasource.by_bucket`'s
output (every bucket in one task), as batch writes. Output mode ``append`` only (``complete`` would
be an overwrite per micro-batch: refused).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from paimon_meta.errors import (
    CommitOutcomeUnknownError,
    UnsupportedError,
    ValidationError,
    is_definite_failure,
)
from paimon_meta.io import get_file_io
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import FileKind
from paimon_meta.table.table import FileStoreTable
from spark_jobs.datasource.attempts import AttemptState, CommitAttempts
from spark_jobs.datasource.target import SourceOptions, open_target
from spark_jobs.datasource.writer import (
    UNKNOWN_OUTCOME_ATTEMPTS,
    PaimonCommitMessage,
    PaimonWriter,
    _check_one_writer_per_bucket,
    _received,
    new_writer,
)
from spark_jobs.pipeline import delete_message_files
from spark_jobs.streaming_write import after_commit_hooks, checkpoint_commit_user

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

ATTEMPTS_DIR = "paimon-commit-attempts"


def new_stream_writer(opts: SourceOptions, schema: StructType, overwrite: bool) -> PaimonStreamWriter:
    """The writer of one streaming query (at each start of it, on the driver)."""
    if overwrite:
        raise UnsupportedError(
            f"streaming into {opts.table}: only outputMode('append') is supported (complete mode would "
            "overwrite the table every micro-batch)",
            table=opts.table,
        )
    if opts.checkpoint_location is None:
        raise ValidationError(
            f"streaming into {opts.table} needs .option('checkpointLocation', ...): the commit user that "
            "makes each micro-batch exactly once is kept there (Spark's session-wide "
            "spark.sql.streaming.checkpointLocation is not passed to data sources)",
            option="checkpointLocation",
        )
    batch = new_writer(opts, schema, overwrite=False)
    # The checkpoint is not in the table's location: opened with the job's own storage options, never
    # with credentials the service vends for the table.
    commit_user = opts.commit_user or checkpoint_commit_user(
        opts.checkpoint_location, opts.storage, table_vends=batch.vends
    )
    batch.commit_user = commit_user  # the executors' files and every snapshot of this query
    file_io = get_file_io(opts.checkpoint_location, opts.storage)
    attempts_dir = file_io.join(opts.checkpoint_location, ATTEMPTS_DIR)
    return PaimonStreamWriter(batch, attempts_dir)


class PaimonStreamWriter(DataSourceStreamArrowWriter):
    """See the module docstring. ``batch`` does the executors' part (and holds the options and the
    commit user); ``attempts_dir`` records commits of unknown outcome per batch id."""

    def __init__(self, batch: PaimonWriter, attempts_dir: str) -> None:
        self.batch = batch
        self.attempts_dir = attempts_dir

    @property
    def commit_user(self) -> str:
        return self.batch.commit_user

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PaimonCommitMessage:
        return self.batch.write(iterator)

    def _attempts(self) -> CommitAttempts:
        return CommitAttempts(self.attempts_dir, self.batch.options.storage, table_vends=self.batch.vends)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        per_task = _received(messages)
        decoded = [m for _, batch in per_task for m in batch]
        key = str(batchId)
        attempts = self._attempts()
        opened = open_target(self.batch.options)
        try:
            table = opened.table
            if table.is_primary_key_table:
                _check_one_writer_per_bucket(table, per_task)  # ValidationError: abort deletes
            commit = table.new_stream_write_builder().with_commit_user(self.commit_user).new_commit()
            attempts.begin(key)
            try:
                for attempt in range(1, UNKNOWN_OUTCOME_ATTEMPTS + 1):
                    try:
                        # Deduplicated when (user, batchId) was committed before: a replay after a
                        # restart, or an earlier attempt of this loop whose answer was lost.
                        outcome = commit.commit(decoded, batchId)
                        break
                    except CommitOutcomeUnknownError as e:
                        if attempt == UNKNOWN_OUTCOME_ATTEMPTS:
                            raise
                        log.warning(
                            "batch %s into %s: outcome unknown (%s); committing again", key, table.path, e
                        )
            except BaseException as e:
                if is_definite_failure(e):
                    attempts.failed(key)
                raise  # otherwise the record stays UNKNOWN: abort keeps the files
            if outcome.deduplicated and not _referenced(table, outcome.snapshot_ids, decoded):
                # A replay after a restart: its files are new copies of rows already committed. (If
                # they are referenced, an earlier attempt of this loop landed them: keep them.)
                log.info("batch %s was committed before (a replay): deleting its rewritten files", key)
                delete_message_files(table, decoded)
            attempts.forget(key)
            log.info("batch %s -> snapshots %s of %s", key, list(outcome.snapshot_ids), table.path)
        finally:
            opened.close()
        after_commit_hooks(batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        decoded = [m for _, batch in _received(messages) for m in batch]
        key = str(batchId)
        attempts = self._attempts()
        if attempts.state(key) is AttemptState.UNKNOWN:
            log.warning(
                "batch %s into %s aborted after a commit of unknown outcome: its files are kept (a "
                "snapshot may reference them; restarting the query resolves the batch)",
                key,
                self.batch.options.table,
            )
            return
        if decoded:
            opened = open_target(self.batch.options)
            try:
                if (
                    not opened.table.new_stream_write_builder()
                    .with_commit_user(self.commit_user)
                    .new_commit()
                    .filter_committed([batchId])
                ):
                    return  # (user, batchId) is committed: whatever these files are, keep them
                delete_message_files(opened.table, decoded)
            finally:
                opened.close()
        attempts.forget(key)


def _referenced(
    table: FileStoreTable, snapshot_ids: Sequence[int], messages: Sequence[CommitMessage]
) -> bool:
    """Whether a data file of ``messages`` was added by one of ``snapshot_ids`` (existing ones)."""
    names = {f.file_name for m in messages for f in m.data_increment.new_files}
    if not names:
        return False
    for snapshot_id in snapshot_ids:
        if not table.snapshot_manager.snapshot_exists(snapshot_id):
            return True  # cannot tell (expired already): keep the files, orphan cleanup decides
        snapshot = table.snapshot(snapshot_id)
        metas = table.manifest_reader.manifest_list(snapshot.delta_manifest_list)
        for entries in table.manifest_reader.manifests(metas):
            if any(e.kind is FileKind.ADD and e.file.file_name in names for e in entries):
                return True
    return False
