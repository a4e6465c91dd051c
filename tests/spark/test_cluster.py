"""The ``paimon_meta`` data source on a Spark standalone cluster (a master and two workers, separate JVMs
and Python workers, tests/spark/cluster.py), the warehouse on the moto S3 server, the metastore on the
test Postgres: append and primary-key round trips (rows exact, buckets as Java), a filtered read opens
only the files it must (counted by the store, from the executors' requests), and the work ran on both
workers.

One driver program (tests/spark/cluster_driver.py, in its own process) does every Spark step; these tests
check what it reported against the tables (read here) and the store's request log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model.snapshot import CommitKind
from tests.fixtures.postgres import PgServer
from tests.fixtures.service import FAST_LOCK
from tests.spark.cluster import REPO_ROOT, WORKER_DIRS_ENV, SparkCluster, cluster_env
from tests.spark.cluster_s3 import RecordingS3, recording_moto
from tests.spark.helpers import SCHEMA, read_rows
from tests.spark.test_datasource import assert_java_buckets, expected

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.s3]

_DRIVER_TIMEOUT_S = 300


class Run:
    """What the driver reported, where it wrote, and how long it took."""

    def __init__(self, report: dict[str, Any], catalog: MetastoreCatalog, s3: RecordingS3, bucket: str):
        self.report = report
        self.catalog = catalog
        self.s3 = s3
        self.bucket = bucket


@pytest.fixture(scope="module")
def run(
    spark_cluster: SparkCluster,
    pg_server: PgServer,
    pg_template: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("cluster-run")
    database = f"paimon_meta_c_{uuid.uuid4().hex[:12]}"
    metastore = pg_server.create_database(database, template=pg_template)
    try:
        with recording_moto() as s3:
            bucket = s3.create_bucket()
            warehouse = f"s3://{bucket}/warehouse"
            options = {"metastore": metastore, "warehouse": warehouse, **s3.options(), **FAST_LOCK}
            with paimon_meta.connect(metastore, warehouse, **s3.options(), **FAST_LOCK) as catalog:
                catalog.create_database("db")
                for name in ("db.t", "db.f"):
                    catalog.create_table(
                        name, SCHEMA, partition_keys=["p"], options={"bucket": "3", "bucket-key": "id"}
                    )
                catalog.create_table(
                    "db.pk", SCHEMA, partition_keys=["p"], primary_keys=["id", "p"], options={"bucket": "2"}
                )
                args = {"master": spark_cluster.master_url, "options": options, "endpoint": s3.endpoint}
                (tmp / "args.json").write_text(json.dumps(args))
                report = _drive(spark_cluster, tmp)
                yield Run(report, catalog, s3, bucket)
    finally:
        pg_server.drop_database(database)


def _drive(cluster: SparkCluster, tmp: Path) -> dict[str, Any]:
    started = time.monotonic()
    output = tmp / "driver.log"
    with open(output, "wb") as log:
        driver = subprocess.Popen(
            [
                *(sys.executable, str(Path(__file__).with_name("cluster_driver.py"))),
                *(str(tmp / "args.json"), str(tmp / "result.json")),
            ],
            env=cluster_env(),
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the driver and its JVM: one group, killed below whatever happens
        )
        try:
            code: int | None = driver.wait(_DRIVER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    if code != 0:
        why = f"ran over {_DRIVER_TIMEOUT_S} s" if code is None else f"failed ({code})"
        tail = output.read_text(errors="replace")[-8000:]
        pytest.fail(f"the cluster driver {why}:\n{tail}\n{cluster.logs()}")
    report: dict[str, Any] = json.loads((tmp / "result.json").read_text())
    print(f"cluster driver: {time.monotonic() - started:.1f} s, steps {report['seconds']}")
    return report


def test_append_round_trip_with_java_buckets(run: Run) -> None:
    report = run.report["append"]
    assert report["partitions"] == 9  # one Spark partition per split: 3 partitions x 3 buckets
    assert report["rows"] == expected(0, 1200)
    table = run.catalog.get_table("db.t")
    assert read_rows(table) == expected(0, 1200)
    assert_java_buckets(table, 3)
    snapshot = table.latest_snapshot()
    assert snapshot is not None and (snapshot.id, snapshot.commit_kind) == (2, CommitKind.APPEND)


def test_primary_key_round_trip_upserts_and_deletes(run: Run) -> None:
    want = {(r["id"], r["p"]): r["v"] for r in expected(0, 500)}
    want[(1, "p1")] = 100.0
    del want[(2, "p2")]
    want[(5000, "p0")] = 1.0
    got = run.report["pk"]["rows"]
    assert {(r["id"], r["p"]): r["v"] for r in got} == want and len(got) == len(want)
    table = run.catalog.get_table("db.pk")
    assert read_rows(table) == got
    assert_java_buckets(table, 2)


def test_filtered_reads_open_only_the_files_they_need(run: Run) -> None:
    """The executors' GETs of data files, as the store saw them: every file for the full read, one
    partition's for ``p = 'p1'``, and none of ``p2``'s (ids 600..899, excluded by statistics) for the
    id range."""
    every = run.report["filtered"]["all"]["rows"]
    assert len(every) == 900
    table_files = _data_file_names(run, "db.f")
    assert len(table_files) == 9
    opened_all = run.s3.opened_in("all")
    assert {path.rsplit("/", 1)[1] for path in opened_all} == table_files and len(opened_all) == 9
    p1 = run.s3.opened_in("p1")
    assert len(p1) == 3 and all("/p=p1/" in path for path in p1)
    assert run.report["filtered"]["p1"] == {"partitions": 3, "rows": [r for r in every if r["p"] == "p1"]}
    id_range = run.s3.opened_in("id_range")
    assert len(id_range) == 6 and not any("/p=p2/" in path for path in id_range)
    assert run.report["filtered"]["id_range"] == {
        "partitions": 6,
        "rows": [r for r in every if 250 <= r["id"] < 320],
    }


def _data_file_names(run: Run, name: str) -> set[str]:
    splits = run.catalog.get_table(name).new_read_builder().new_scan().plan().splits()
    return {f.file_name for s in splits for f in s.files}


def test_the_work_ran_on_both_workers(run: Run, spark_cluster: SparkCluster) -> None:
    """Each scan partition reports its Python worker's cwd: an executor's directory under one worker's
    work dir. Both workers' executors read, in different processes."""
    if not spark_cluster.worker_dirs:
        pytest.skip(f"an external cluster without {WORKER_DIRS_ENV}: its workers' dirs are unknown")
    assert run.report["executors"] == 2
    seen = run.report["where_it_ran"]
    assert sum(p["rows"] for p in seen) == 1200 and len(seen) == 9
    workers = {d for p in seen for d in spark_cluster.worker_dirs if p["cwd"].startswith(f"{d}/")}
    assert workers == set(spark_cluster.worker_dirs) and len(workers) == 2
    assert len({p["pid"] for p in seen}) >= 2
