"""Structured Streaming: exactly once per micro-batch across a driver crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from paimon_meta.errors import CommitConflictError, CommitOutcomeUnknownError, ValidationError
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.table.write.builder import BatchTableCommit, StreamTableCommit
from spark_jobs.batch_write import commit_messages
from spark_jobs.common import TableHandle
from spark_jobs.pipeline import write_messages
from spark_jobs.streaming_write import (
    COMMIT_USER_FILE,
    CRASH_AFTER_COMMIT_ENV,
    CRASH_EXIT_CODE,
    checkpoint_commit_user,
    commit_batch,
)
from tests.spark.helpers import SCHEMA, append_table, live_files, read_rows, source_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from paimon_meta.table.table import FileStoreTable

pytestmark = pytest.mark.spark

FILES, ROWS_PER_FILE = 4, 50


def _table(tmp_path: Path) -> FileStoreTable:
    return append_table(str(tmp_path / "wh"), "db.s", buckets=2)


def _run_stream(table: FileStoreTable, source: Path, checkpoint: Path, env: dict[str, str]) -> int:
    args = [
        sys.executable,
        "-m",
        "spark_jobs.streaming_write",
        "--table-path",
        table.path,
        "--source-dir",
        str(source),
        "--checkpoint",
        str(checkpoint),
        "--max-files-per-trigger",
        "1",
        "--available-now",
        "--num-partitions",
        "2",
    ]
    done = subprocess.run(
        args, env={**os.environ, **env}, capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode not in (0, CRASH_EXIT_CODE):
        pytest.fail(f"stream driver exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.returncode


@pytest.mark.usefixtures("spark")  # skips (or fails under CI) without Java, like the other tests
def test_restart_after_crash_between_publish_and_checkpoint(tmp_path: Path) -> None:
    table = _table(tmp_path)
    source, checkpoint = tmp_path / "in", tmp_path / "ckpt"
    rows = source_files(source, FILES, ROWS_PER_FILE)

    # Run 1 dies right after batch 1 is published, before Spark records it in commits/.
    assert _run_stream(table, source, checkpoint, {CRASH_AFTER_COMMIT_ENV: "1"}) == CRASH_EXIT_CODE
    assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()
    assert len(read_rows(table)) == 2 * ROWS_PER_FILE

    # Run 2 replays batch 1 (already committed: skipped), then batches 2 and 3.
    assert _run_stream(table, source, checkpoint, {}) == 0
    assert read_rows(table) == rows
    snapshots = [table.snapshot(i) for i in range(1, 5)]
    assert table.latest_snapshot() == snapshots[-1]
    assert [s.commit_identifier for s in snapshots] == [0, 1, 2, 3]
    user = (checkpoint / COMMIT_USER_FILE).read_text().strip()
    assert {s.commit_user for s in snapshots} == {user}
    assert all(s.commit_kind is CommitKind.APPEND for s in snapshots)
    # the replay wrote nothing: every data file on disk is referenced
    on_disk = {p.name for p in (tmp_path / "wh").rglob("data-*")}
    assert on_disk == {f.file_name for f in live_files(table)}


@pytest.mark.usefixtures("spark")
def test_checkpoint_commit_user_is_created_once(tmp_path: Path) -> None:
    first = checkpoint_commit_user(str(tmp_path / "ckpt"))
    assert first.startswith("spark-stream-")
    assert checkpoint_commit_user(str(tmp_path / "ckpt")) == first
    assert checkpoint_commit_user(str(tmp_path / "other")) != first


def test_replayed_batch_is_deduplicated_and_its_files_deleted(spark: SparkSession, tmp_path: Path) -> None:
    table = _table(tmp_path)
    df = spark.createDataFrame([(i, f"p{i % 2}", 1.0) for i in range(20)], SCHEMA.names)
    handle = TableHandle.of(table)
    first = write_messages(df, handle, table.schema, "user-1")
    assert commit_batch(table, "user-1", first, 7).snapshot_ids == (1,)
    replay = write_messages(df, handle, table.schema, "user-1")
    outcome = commit_batch(table, "user-1", replay, 7)
    assert outcome.deduplicated and outcome.snapshot_ids == (1,)
    assert len(read_rows(table)) == 20
    on_disk = {p.name for p in (tmp_path / "wh").rglob("data-*")}
    assert on_disk == {f.file_name for f in live_files(table)}


@pytest.mark.parametrize("job", ["stream", "batch"])
def test_the_jobs_delete_files_only_after_a_definite_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, job: str
) -> None:
    """A conflict (nothing landed) deletes the messages' files; an unknown outcome or an error we do not
    know (an I/O error mid-publish, a bug) keeps them: a snapshot may reference them."""
    table = _table(tmp_path)
    wh = tmp_path / "wh"

    def write(start: int) -> list[CommitMessage]:
        w = table.new_batch_write_builder().new_write()
        w.write_arrow(pa.table({"id": range(start, start + 10), "p": ["p0"] * 10, "v": [1.0] * 10}, SCHEMA))
        return w.prepare_commit()

    def commit(messages: list[CommitMessage]) -> None:
        if job == "stream":
            commit_batch(table, "user-1", messages, 3)
        else:
            commit_messages(table, "user-1", messages)

    errors: list[Exception] = []

    def failing(self: object, *args: object, **kwargs: object) -> None:
        raise errors[-1]

    monkeypatch.setattr(StreamTableCommit, "commit", failing)
    monkeypatch.setattr(BatchTableCommit, "commit", failing)
    for error, kept in [
        (CommitOutcomeUnknownError("injected"), True),
        (OSError("injected: the store stopped answering"), True),
        (RuntimeError("injected: a bug"), True),
        (CommitConflictError("injected"), False),
        (ValidationError("injected"), False),
    ]:
        before = {p.name for p in wh.rglob("data-*")}
        messages = write(100 * len(errors))
        written = {f.file_name for m in messages for f in m.data_increment.new_files}
        assert written and not written & before
        errors.append(error)
        with pytest.raises(type(error)):
            commit(messages)
        on_disk = {p.name for p in wh.rglob("data-*")}
        assert on_disk == (before | written if kept else before), error
    assert table.latest_snapshot() is None
