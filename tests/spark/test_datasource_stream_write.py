"""``df.writeStream.format("paimon_meta")``: exactly once per micro-batch across a SIGKILL of the driver
between publishing a batch's snapshot and Spark's checkpoint; ``abort`` never deletes the files of a
commit whose outcome is unknown (stream and batch writers).

Run as a module, this file is the stream's driver: ``python -m tests.spark.test_datasource_stream_write
TABLE_PATH SOURCE_DIR CHECKPOINT`` (parquet files of SOURCE_DIR, one per micro-batch, available-now).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from paimon_meta.errors import CommitConflictError, CommitOutcomeUnknownError
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.table.write.builder import StreamTableCommit
from spark_jobs.datasource import PaimonDataSource
from spark_jobs.datasource.stream_writer import PaimonStreamWriter
from spark_jobs.datasource.writer import PaimonWriter
from spark_jobs.streaming_write import COMMIT_USER_FILE, HANG_AFTER_COMMIT_ENV
from tests.spark.helpers import (
    SCHEMA,
    append_table,
    live_files,
    pk_table,
    read_rows,
    sort_rows,
    source_files,
    wait_hanging,
    write_source_file,
)
from tests.spark.test_datasource import assert_java_buckets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from paimon_meta.table.table import FileStoreTable

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
STRUCT = StructType(
    [
        StructField("id", LongType(), False),
        StructField("p", StringType(), False),
        StructField("v", DoubleType()),
    ]
)


def _driver(table: FileStoreTable, source: Path, checkpoint: Path, log: Path, env: dict[str, str]) -> Any:
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.spark.test_datasource_stream_write",
                table.path,
                str(source),
                str(checkpoint),
            ],
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            process_group=0,  # its JVM and Python workers with it: one SIGKILL takes them all
        )


@pytest.mark.skipif(
    os.environ.get("PAIMON_META_SLOW") != "1",
    reason="the same driver kill runs on the standalone cluster (test_cluster_stream.py); set "
    "PAIMON_META_SLOW=1 for this local[2] copy",
)
def test_exactly_once_across_a_driver_kill_between_publish_and_checkpoint(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = append_table(str(tmp_path / "wh"), "db.s", buckets=2)
    source, checkpoint = tmp_path / "in", tmp_path / "ckpt"
    rows = source_files(source, files=3, rows_per_file=40)  # one file per micro-batch: batches 0, 1, 2

    # Run 1 hangs in the sink's commit right after batch 1's snapshot is published, and is SIGKILLed
    # (driver, JVM, Python workers) before Spark records the batch in commits/.
    log = tmp_path / "driver-1.log"
    driver = _driver(table, source, checkpoint, log, {HANG_AFTER_COMMIT_ENV: "1"})
    try:
        wait_hanging(driver, log)
        published = table.latest_snapshot()
        assert published is not None and (published.id, published.commit_identifier) == (2, 1)
        assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(60)
    assert driver.returncode == -signal.SIGKILL
    assert not (checkpoint / "commits" / "1").exists()

    # Run 2 from the same checkpoint (on the tests' session): Spark replays batch 1 (its rows are
    # written again, the commit is deduplicated and the rewritten files deleted), then runs batch 2.
    assert main([table.path, str(source), str(checkpoint)]) == 0
    assert read_rows(table) == rows  # every row once
    snapshots = [table.snapshot(i) for i in range(1, 4)]
    assert table.latest_snapshot() == snapshots[-1]
    user = (checkpoint / COMMIT_USER_FILE).read_text().strip()
    assert [(s.commit_user, s.commit_identifier) for s in snapshots] == [(user, 0), (user, 1), (user, 2)]
    assert all(s.commit_kind is CommitKind.APPEND for s in snapshots)
    on_disk = {p.name for p in (tmp_path / "wh").rglob("data-*")}
    assert on_disk == {f.file_name for f in live_files(table)}  # the replay's files are gone


def _batch(start: int, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"id": i, "p": f"p{i % 2}", "v": i * 0.5} for i in range(start, start + n)], schema=SCHEMA
    )


def _data_files(table: FileStoreTable) -> set[str]:
    return {p.name for p in Path(table.path).rglob("data-*")}


Messages = list[WriterCommitMessage | None]


def test_abort_never_deletes_after_an_unknown_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark calls ``abort`` after any failed ``commit``: after an unknown outcome the files stay (a
    snapshot may reference them); after a definite failure they go. Stream and batch writers."""
    from spark_jobs.datasource import writer as writer_module

    table = append_table(str(tmp_path / "wh"), "db.t", buckets=2)
    options = {"path": table.path, "checkpointLocation": str(tmp_path / "ckpt")}
    errors: list[type[Exception]] = []
    calls: list[int] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        raise errors[-1]("injected")

    monkeypatch.setattr(StreamTableCommit, "commit", failing)
    monkeypatch.setattr(writer_module, "commit_messages", failing)
    stream = PaimonDataSource(dict(options)).streamWriter(STRUCT, False)
    batch = PaimonDataSource(dict(options)).writer(STRUCT, False)
    assert isinstance(stream, PaimonStreamWriter) and isinstance(batch, PaimonWriter)

    def stream_commit(messages: Messages) -> None:
        stream.commit(messages, 5)

    def stream_abort(messages: Messages) -> None:
        stream.abort(messages, 5)

    for write, commit, abort in [
        (stream.write, stream_commit, stream_abort),
        (batch.write, batch.commit, batch.abort),
    ]:
        errors.append(CommitOutcomeUnknownError)
        message = write(iter([_batch(0, 20)]))
        written = _data_files(table)
        assert written
        calls.clear()
        with pytest.raises(CommitOutcomeUnknownError):
            commit([message])
        assert len(calls) == writer_module.UNKNOWN_OUTCOME_ATTEMPTS  # retried, as the same (user, id)
        abort([message])  # as Spark does after a failed commit
        assert _data_files(table) == written  # kept: left to orphan-file cleanup

        errors.append(CommitConflictError)  # definitely not landed: abort deletes this write's files
        again = write(iter([_batch(100, 20)]))
        assert _data_files(table) > written
        with pytest.raises(CommitConflictError):
            commit([again])
        abort([again])
        assert _data_files(table) == written
    assert table.latest_snapshot() is None


def test_a_lost_answer_is_committed_again_once_and_its_files_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first commit of a batch lands but its answer is lost: the retry is deduplicated, and the files
    (the landed snapshot's) stay. A replay of the batch later is deduplicated and its new files go."""
    table = append_table(str(tmp_path / "wh"), "db.t", buckets=2)
    options = {"path": table.path, "checkpointLocation": str(tmp_path / "ckpt")}
    real_commit = StreamTableCommit.commit
    calls: list[int] = []

    def lost_answer(self: StreamTableCommit, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        outcome = real_commit(self, *args, **kwargs)
        if len(calls) == 1:
            raise CommitOutcomeUnknownError("injected: the answer was lost")
        return outcome

    monkeypatch.setattr(StreamTableCommit, "commit", lost_answer)
    writer = PaimonDataSource(dict(options)).streamWriter(STRUCT, False)
    assert isinstance(writer, PaimonStreamWriter)
    writer.commit([writer.write(iter([_batch(0, 20)]))], 0)
    assert len(calls) == 2
    latest = table.latest_snapshot()
    assert latest is not None and latest.id == 1 and latest.commit_identifier == 0
    assert sort_rows(read_rows(table)) == sort_rows(
        [{"id": i, "p": f"p{i % 2}", "v": i * 0.5} for i in range(20)]
    )
    committed = _data_files(table)
    assert committed == {f.file_name for f in live_files(table)}

    replay = PaimonDataSource(dict(options)).streamWriter(STRUCT, False)  # a restart: same commit user
    assert isinstance(replay, PaimonStreamWriter) and replay.commit_user == writer.commit_user
    replay.commit([replay.write(iter([_batch(0, 20)]))], 0)
    latest = table.latest_snapshot()
    assert latest is not None and latest.id == 1
    assert _data_files(table) == committed  # the replay's copies are deleted, the landed files kept


def test_a_primary_key_table_streamed_through_by_bucket_merges_each_batch_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``writeStream`` into a primary-key table: each micro-batch (a file of upserts and deletes through
    ``_row_kind``) packed by ``by_bucket`` so one task writes each bucket, committed once; a restart from
    the checkpoint commits only the new file's batch."""
    import spark_jobs
    from spark_jobs.common import spark_schema
    from spark_jobs.datasource import by_bucket

    table = pk_table(str(tmp_path / "wh"))
    source, checkpoint = tmp_path / "in", tmp_path / "ckpt"
    source.mkdir()
    with_kind = SCHEMA.append(pa.field("_row_kind", pa.string()))
    batches: list[list[dict[str, Any]]] = [
        [{"id": i, "p": f"p{i % 2}", "v": float(i), "_row_kind": "+I"} for i in range(40)],
        [{"id": i, "p": f"p{i % 2}", "v": 100.0 + i, "_row_kind": "+U"} for i in range(0, 40, 4)]
        + [{"id": i, "p": f"p{i % 2}", "v": None, "_row_kind": "-D"} for i in range(1, 40, 4)],
        [{"id": i, "p": f"p{i % 2}", "v": 200.0 + i, "_row_kind": "+I"} for i in range(1, 40, 4)],
    ]
    want: dict[tuple[int, str], float] = {}
    for batch in batches:
        for r in batch:
            if r["_row_kind"] == "-D":
                want.pop((r["id"], r["p"]), None)
            else:
                want[(r["id"], r["p"])] = r["v"]
    spark_jobs.register(spark)

    def run(files: int) -> None:
        for f in range(files):
            path = source / f"part-{f:03d}.parquet"
            if not path.exists():  # in batch order: the upserts and deletes must follow the inserts
                write_source_file(path, pa.Table.from_pylist(batches[f], schema=with_kind))
        stream = (
            spark.readStream.format("parquet")
            .schema(spark_schema(with_kind))
            .option("maxFilesPerTrigger", "1")
            .load(str(source))
        )
        query = (
            by_bucket(stream, table.path)
            .writeStream.format("paimon_meta")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(table.path)
        )
        query.awaitTermination()

    run(2)
    latest = table.latest_snapshot()
    assert latest is not None and [table.snapshot(i).commit_identifier for i in (1, 2)] == [0, 1]
    run(3)  # restart: batches 0 and 1 are in commits/, only batch 2 runs
    snapshots = [table.snapshot(i) for i in range(1, 4)]
    assert table.latest_snapshot() == snapshots[-1]
    assert [s.commit_identifier for s in snapshots] == [0, 1, 2]
    assert len({s.commit_user for s in snapshots}) == 1
    got = read_rows(table)
    assert {(r["id"], r["p"]): r["v"] for r in got} == want and len(got) == len(want)
    assert_java_buckets(table, 2)


def main(argv: list[str]) -> int:
    """The stream's driver (see the module docstring)."""
    import spark_jobs
    from spark_jobs.common import spark_schema
    from spark_jobs.session import build_session

    table_path, source, checkpoint = argv
    spark = build_session("paimon_meta-stream-write-test", master="local[2]")
    spark_jobs.register(spark)
    stream = (
        spark.readStream.format("parquet")
        .schema(spark_schema(SCHEMA))
        .option("maxFilesPerTrigger", "1")
        .load(source)
    )
    query = (
        stream.writeStream.format("paimon_meta")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(table_path)
    )
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
