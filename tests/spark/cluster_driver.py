"""The driver program of the cluster tests (tests/spark/test_cluster.py), run as its own process: one
Spark driver per process, and the test session's ``local[2,2]`` session lives in the pytest process.

``python tests/spark/cluster_driver.py ARGS.json RESULT.json``: ARGS names the master, the data source
options (metastore, S3 warehouse and its ``s3.*`` options) and the S3 endpoint for phase markers; the
tables ``db.t`` (append, 3 buckets), ``db.pk`` (primary key, 2 buckets) and ``db.f`` (append, 3 buckets)
exist. It writes and reads them through ``format("paimon_meta")`` exactly as test_datasource.py does on
``local[2,2]``, and writes what it saw to RESULT; the test checks it against the tables and the store.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

import spark_jobs
from spark_jobs.datasource import by_bucket
from spark_jobs.session import build_session
from tests.spark.cluster import app_conf
from tests.spark.helpers import sort_rows

Row = dict[str, Any]


def frame(spark: SparkSession, start: int, n: int) -> DataFrame:
    return spark.range(start, start + n, numPartitions=3).selectExpr(
        "id", "concat('p', cast(id % 3 as string)) as p", "id * 0.5 as v"
    )


def rows_of(df: DataFrame) -> list[Row]:
    return sort_rows([r.asDict() for r in df.collect()])


def where_it_ran(df: DataFrame) -> list[dict[str, Any]]:
    """Per Spark partition of ``df``'s scan: the Python worker's cwd (an executor's dir under its
    worker's work dir), pid and row count."""

    def observe(rows: Iterable[Any]) -> Iterator[dict[str, Any]]:
        yield {"cwd": os.getcwd(), "pid": os.getpid(), "rows": sum(1 for _ in rows)}

    return df.rdd.mapPartitions(observe).collect()


def main(args_path: str, result_path: str) -> None:
    args = json.loads(Path(args_path).read_text())
    options: dict[str, str] = args["options"]
    started = time.monotonic()
    spark = build_session("paimon_meta-cluster-checks", master=args["master"], conf=app_conf(args["master"]))
    spark.sparkContext.setLogLevel("ERROR")
    session_seconds = round(time.monotonic() - started, 1)
    try:
        result = run_checks(spark, options, args["endpoint"])
        result["seconds"]["session"] = session_seconds
    finally:
        spark.stop()
    Path(result_path).write_text(json.dumps(result))


def wait_for_executors(spark: SparkSession, n: int, timeout: float = 60.0) -> int:
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout
    while len(tracker.getExecutorInfos()) < n + 1 and time.monotonic() < deadline:  # + the driver
        time.sleep(0.2)
    return len(tracker.getExecutorInfos()) - 1


def run_checks(spark: SparkSession, options: dict[str, str], endpoint: str) -> dict[str, Any]:
    spark_jobs.register(spark)
    started = time.monotonic()
    result: dict[str, Any] = {"executors": wait_for_executors(spark, 2), "seconds": {}}

    def lap(step: str) -> None:
        nonlocal started
        result["seconds"][step] = round(time.monotonic() - started, 1)
        started = time.monotonic()

    lap("executors")

    def load(table: str) -> DataFrame:
        return spark.read.format("paimon_meta").options(**options).load(table)

    def save(df: DataFrame, table: str) -> None:
        df.write.format("paimon_meta").options(**options).mode("append").save(table)

    def phase(name: str) -> None:
        with urllib.request.urlopen(f"{endpoint}/_phase/{name}", timeout=10):
            pass

    # append table: a plain write, then the batch job's shuffle (by_bucket)
    save(frame(spark, 0, 600), "db.t")
    save(by_bucket(frame(spark, 600, 600), "db.t", options), "db.t")
    appended = load("db.t")
    result["append"] = {"partitions": appended.rdd.getNumPartitions(), "rows": rows_of(appended)}
    result["where_it_ran"] = where_it_ran(appended)
    lap("append")

    # primary-key table: upserts and a delete through _row_kind
    save(by_bucket(frame(spark, 0, 500), "db.pk", options), "db.pk")
    changes = spark.createDataFrame(
        [(1, "p1", 100.0, "+U"), (2, "p2", None, "-D"), (5000, "p0", 1.0, "+I")],
        "id long, p string, v double, _row_kind string",
    )
    save(by_bucket(changes, "db.pk", options), "db.pk")
    result["pk"] = {"rows": rows_of(load("db.pk"))}
    lap("pk")

    # pruning: p follows the id range, so a filter on id excludes whole files by their statistics
    save(
        spark.range(0, 900, numPartitions=3).selectExpr(
            "id", "concat('p', cast(id div 300 as string)) as p", "id * 0.5 as v"
        ),
        "db.f",
    )
    filtered: dict[str, Any] = {}
    for name, condition in (("all", None), ("p1", "p = 'p1'"), ("id_range", "id >= 250 and id < 320")):
        df = load("db.f") if condition is None else load("db.f").where(condition)
        partitions = df.rdd.getNumPartitions()  # planned (on the driver side) before the marker
        phase(name)
        filtered[name] = {"partitions": partitions, "rows": rows_of(df)}
    phase("end")
    result["filtered"] = filtered
    lap("filtered")
    return result


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
