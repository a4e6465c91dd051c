"""Streaming through the ``paimon_meta`` data source on the standalone cluster (tests/spark/cluster.py),
the warehouse on moto S3, the metastore on the test Postgres: a streaming write stays exactly once when
its driver is SIGKILLed between publishing a batch and Spark's checkpoint, and a streaming read sees
each appended row once across a restart from its checkpoint.

Two driver processes (tests/spark/cluster_stream_driver.py): the first hangs after committing batch 1
and is killed with its JVM; the second resumes the write, then reads. About two driver start-ups more
than tests/spark/test_cluster.py (~2-3 min on a loaded 2-core machine); the local[2] copy of the driver
kill (test_datasource_stream_write.py) runs only with ``PAIMON_META_SLOW=1`` instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import paimon_meta
from paimon_meta.model.snapshot import CommitKind
from spark_jobs.streaming_write import COMMIT_USER_FILE, HANG_AFTER_COMMIT_ENV, HANG_MARKER
from tests.fixtures.s3 import MotoS3
from tests.fixtures.service import FAST_LOCK
from tests.spark.cluster import REPO_ROOT, SparkCluster, cluster_env
from tests.spark.helpers import SCHEMA, live_files, read_rows, sort_rows, source_files

pytestmark = [
    pytest.mark.spark,
    pytest.mark.postgres,
    pytest.mark.s3,
]

_TIMEOUT_S = 300.0
_DRIVER = Path(__file__).with_name("cluster_stream_driver.py")


def _spawn(args: Path, log: Path, extra_env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, str(_DRIVER), str(args)],
            env={**cluster_env(), **extra_env},
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the driver, its JVM and driver-side Python workers: one group
        )


def _kill(driver: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(60)


def _fail(what: str, log: Path, cluster: SparkCluster) -> None:
    pytest.fail(f"{what}:\n{log.read_text(errors='replace')[-6000:]}\n{cluster.logs()}")


def test_stream_write_exactly_once_across_a_driver_kill_and_read_across_a_restart(
    spark_cluster: SparkCluster, clean_db: str, moto_server: MotoS3, tmp_path: Path
) -> None:
    bucket = moto_server.create_bucket()
    warehouse = f"s3://{bucket}/warehouse"
    options = {"metastore": clean_db, "warehouse": warehouse, **moto_server.options(), **FAST_LOCK}
    catalog = paimon_meta.connect(clean_db, warehouse, **moto_server.options(), **FAST_LOCK)
    try:
        catalog.create_database("db")
        catalog.create_table(
            "db.s", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "id"}
        )
        source, write_ckpt = tmp_path / "in", tmp_path / "write-ckpt"
        rows = source_files(source, files=3, rows_per_file=40)  # one file per micro-batch: 0, 1, 2
        extra = [[5000 + i, f"p{i % 2}", i * 0.5] for i in range(7)]
        args = {
            "master": spark_cluster.master_url,
            "options": options,
            "source": str(source),
            "write_checkpoint": str(write_ckpt),
            "read_checkpoint": str(tmp_path / "read-ckpt"),
            "extra": extra,
            "result": str(tmp_path / "result.json"),
        }
        first_args, second_args = tmp_path / "run-1.json", tmp_path / "run-2.json"
        first_args.write_text(json.dumps(args))
        second_args.write_text(json.dumps({**args, "read": True}))

        # Run 1 hangs in the sink's commit right after batch 1's snapshot is published and is SIGKILLed
        # (driver, JVM, driver-side Python workers) before Spark records batch 1 in commits/.
        log = tmp_path / "driver-1.log"
        driver = _spawn(first_args, log, {HANG_AFTER_COMMIT_ENV: "1"})
        try:
            deadline = time.monotonic() + _TIMEOUT_S
            while HANG_MARKER not in log.read_text(errors="replace"):
                if driver.poll() is not None:
                    _fail(f"run 1 exited {driver.returncode} before hanging", log, spark_cluster)
                if time.monotonic() > deadline:
                    _fail(f"run 1 did not hang within {_TIMEOUT_S:.0f} s", log, spark_cluster)
                time.sleep(0.2)
            table = catalog.get_table("db.s")
            published = table.latest_snapshot()
            assert published is not None and (published.id, published.commit_identifier) == (2, 1)
            assert (write_ckpt / "offsets" / "1").exists() and not (write_ckpt / "commits" / "1").exists()
        finally:
            _kill(driver)
        assert driver.returncode == -signal.SIGKILL

        # Run 2 from the same checkpoint: Spark replays batch 1 (the commit is deduplicated, the rewritten
        # files deleted), runs batch 2; then the streaming read, a batch append, the read restarted.
        log = tmp_path / "driver-2.log"
        driver = _spawn(second_args, log, {})
        try:
            code = driver.wait(_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _fail(f"run 2 did not finish within {_TIMEOUT_S:.0f} s", log, spark_cluster)
        finally:
            _kill(driver)
        if code != 0:
            _fail(f"run 2 failed ({code})", log, spark_cluster)

        table = catalog.get_table("db.s")
        user = (write_ckpt / COMMIT_USER_FILE).read_text().strip()
        streamed = [table.snapshot(i) for i in range(1, 4)]
        assert [(s.commit_user, s.commit_identifier, s.commit_kind) for s in streamed] == [
            (user, n, CommitKind.APPEND) for n in range(3)
        ]
        latest = table.latest_snapshot()
        assert latest is not None and latest.id == 4  # the batch append of `extra`
        extra_rows = [dict(zip(SCHEMA.names, r)) for r in extra]
        assert read_rows(table) == sort_rows(rows + extra_rows)  # every streamed row once
        keys = [
            o["Key"]
            for page in moto_server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])
        ]
        on_store = {k.rsplit("/", 1)[1] for k in keys if k.rsplit("/", 1)[1].startswith("data-")}
        assert on_store == {f.file_name for f in live_files(table)}  # the replay's copies are gone

        result = json.loads((tmp_path / "result.json").read_text())

        def counted(batches: list[Any]) -> Counter[tuple[Any, ...]]:
            return Counter(tuple(r) for _, batch in batches for r in batch)

        assert counted(result["first"]) == Counter((r["id"], r["p"], r["v"]) for r in rows)
        assert counted(result["restarted"]) == Counter(tuple(r) for r in extra)
        # resumed from the checkpoint, not started again
        assert min(b for b, _ in result["restarted"]) > max(b for b, _ in result["first"])
    finally:
        catalog.close()
        moto_server.drop_bucket(bucket)
