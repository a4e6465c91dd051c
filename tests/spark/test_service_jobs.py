"""The Spark jobs through a served catalog (``--service URL --token T``): executors write data files, the
driver sends the messages to the control plane; no database credentials in the job. The streaming job keeps
exactly-once across a SIGKILL of its driver between the service's publish and Spark's checkpoint."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import paimon_meta
from spark_jobs import batch_write, compaction, streaming_write
from spark_jobs.common import TableHandle
from spark_jobs.pipeline import write_messages
from spark_jobs.streaming_write import COMMIT_USER_FILE, HANG_AFTER_COMMIT_ENV, commit_batch
from tests.fixtures.service import FAST_LOCK, REPO, ServiceProcess, make_principal, spawn_service
from tests.spark.helpers import SCHEMA, live_files, read_rows, source_files, wait_hanging

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

DB_URL = re.compile(r"postgres(ql)?(\+\w+)?://")


def test_batch_and_compaction_jobs_commit_through_the_service(
    spark: SparkSession,
    clean_db: str,
    tmp_path: Path,
    *,
    service_processes: list[ServiceProcess],
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        catalog.create_database("db")
        token = make_principal(catalog, "spark-job", [("admin", "db", None)])
    server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
    remote = paimon_meta.connect_service(server.base, token=token)
    table = remote.create_table("db.g", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    monkeypatch.delenv("PAIMON_META_URL", raising=False)  # the job must not need the database
    job = ["--table", "db.g", "--service", server.base, "--token", token]
    for _ in range(3):  # three files per bucket: enough for an append compaction
        assert batch_write.main([*job, "--generate", "300"]) == 0
    assert "committed snapshots [3]" in capsys.readouterr().out
    assert compaction.main(job) == 0
    rows = read_rows(remote.get_table("db.g"))
    assert len(rows) == 900
    history = remote.commits("db.g")
    assert [c["commitKind"] for c in history] == ["COMPACT", "APPEND", "APPEND", "APPEND"]
    assert {c["principal"] for c in history} == {"spark-job"}
    assert table.path == remote.get_table("db.g").path


def test_streaming_job_through_the_service_keeps_exactly_once_across_a_driver_kill(
    spark: SparkSession,
    clean_db: str,
    tmp_path: Path,
    *,
    service_processes: list[ServiceProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        catalog.create_database("db")
        catalog.create_table(
            "db.s", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "id"}
        )
        token = make_principal(catalog, "spark-stream", [("write", "db", None)])
    server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
    remote = paimon_meta.connect_service(server.base, token=token)
    source, checkpoint = tmp_path / "in", tmp_path / "ckpt"
    rows = source_files(source, files=3, rows_per_file=40)  # one file per micro-batch: batches 0, 1, 2
    job = [
        *("--table", "db.s", "--service", server.base, "--token", token),
        *("--source-dir", str(source), "--checkpoint", str(checkpoint)),
        *("--max-files-per-trigger", "1", "--available-now", "--num-partitions", "2"),
    ]
    # The driver gets the service and a token, nothing that reaches the database.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIMON_META_") and not DB_URL.search(v)}
    assert not any(DB_URL.search(s) or clean_db in s for s in [*job, *env.values()])

    # Run 1, its own driver: hangs right after the service answered batch 1's commit, then is SIGKILLed
    # (with its JVM and Python workers, its process group) before Spark records the batch in commits/.
    log = tmp_path / "driver-1.log"
    with log.open("wb") as out:
        driver = subprocess.Popen(
            [sys.executable, "-m", "spark_jobs.streaming_write", *job],
            env={**env, HANG_AFTER_COMMIT_ENV: "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            process_group=0,
        )
    try:
        wait_hanging(driver, log)
        table = remote.get_table("db.s")
        published = table.latest_snapshot()
        assert published is not None and (published.id, published.commit_identifier) == (2, 1)
        assert (checkpoint / "offsets" / "1").exists() and not (checkpoint / "commits" / "1").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(60)
    assert driver.returncode == -signal.SIGKILL
    assert not (checkpoint / "commits" / "1").exists()
    user = (checkpoint / COMMIT_USER_FILE).read_text().strip()

    # Run 2 from the same checkpoint (on the tests' session): Spark replays batch 1, which the service
    # says is committed (filter-committed), then runs batch 2.
    monkeypatch.delenv("PAIMON_META_URL", raising=False)
    assert streaming_write.main(job) == 0
    table = remote.get_table("db.s")
    assert read_rows(table) == rows
    snapshots = [table.snapshot(i) for i in range(1, 4)]
    assert table.latest_snapshot() == snapshots[-1]
    assert [(s.commit_user, s.commit_identifier) for s in snapshots] == [(user, 0), (user, 1), (user, 2)]
    history = remote.commits("db.s")
    assert [(c["commitIdentifier"], c["outcome"], c["principal"]) for c in history] == [
        (b, "published", "spark-stream") for b in (2, 1, 0)
    ]
    on_disk = {p.name for p in Path(warehouse).rglob("data-*")}
    assert on_disk == {f.file_name for f in live_files(table)}  # the replay wrote nothing

    # A second driver on the checkpoint that raced past filter-committed re-sends batch 1's rows: the
    # service deduplicates (user, 1) and the job deletes the files it wrote for them.
    replay = write_messages(
        spark.read.parquet(str(source / "part-001.parquet")), TableHandle.of(table), table.schema, user
    )
    outcome = commit_batch(table, user, replay, 1)
    assert outcome.deduplicated and outcome.snapshot_ids == (2,)
    assert read_rows(remote.get_table("db.s")) == rows
    assert {p.name for p in Path(warehouse).rglob("data-*")} == on_disk
