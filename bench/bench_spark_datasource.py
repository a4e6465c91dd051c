"""The ``paimon_meta`` Spark data source against the existing job and plain Parquet, side by side.

Same session, same generated rows (``id BIGINT, p INT (id % 10), name STRING, score DOUBLE``), local
disk, a partitioned (``p``) append table with 4 buckets on ``id``. Writes, in ``--repeat`` interleaved
rounds (the best round of each counts; the machine is shared):

* ``df.write.parquet`` partitioned by ``p`` (zstd, Paimon's default codec): the baseline;
* ``write_dataframe`` (``spark_jobs.batch_write``, the existing job: bucket assignment in
  ``mapInArrow``, shuffle by (partition, bucket), one commit);
* ``df.write.format("paimon_meta").save(location)``: the data source (executors write files and return
  their messages, the driver commits once).

Reads of the data source's table, with a filter on the partition and on ``id``
(``p = 3 AND id < rows / 20``, 1 of 10 partitions and about 5 % of its files' ``id`` range), each
counted (``count()``) in ``--repeat`` interleaved rounds:

* with filter pushdown (``spark.sql.python.filterPushdown.enabled``, which ``register`` turns on):
  splits of other partitions are never planned and files whose ``id`` statistics exclude the range
  are skipped;
* without it: the same predicate written so that Spark cannot push it (``abs(p) = 3 AND abs(id) < ...``:
  not a column compared with a literal; Spark refuses to turn the pushdown setting off for a source
  that implements ``pushFilters``), so every split is read and Spark filters the rows;
* the same filter over the Parquet copy (Spark's own partition pruning and row-group statistics).

Each read reports the Spark partitions it planned (one per split) and the rows it returned (the same
with and without pushdown: checked).

    .venv/bin/python bench/bench_spark_datasource.py --rows 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

# Runnable from a checkout without installing the package (as the other benchmarks).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paimon_meta.catalog.storage import open_table
from paimon_meta.io import get_file_io
from paimon_meta.model.arrow import from_arrow_schema
from paimon_meta.model.schema import TableSchema
from paimon_meta.table.snapshots import SchemaManager
from spark_jobs import register
from spark_jobs.batch_write import write_dataframe
from spark_jobs.session import build_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCHEMA = pa.schema(
    [("id", pa.int64(), False), ("p", pa.int32(), False), ("name", pa.string()), ("score", pa.float64())]
)
OPTIONS = {"bucket": "4", "bucket-key": "id"}


def _frame(spark: SparkSession, rows: int) -> DataFrame:
    return spark.range(0, rows).selectExpr(
        "id",
        "cast(id % 10 as int) as p",
        "concat('name-', cast(id % 1000 as string)) as name",
        "rand(42) as score",
    )


def _table(root: Path, name: str) -> str:
    path = str(root / "bench.db" / name)
    fields, highest = from_arrow_schema(SCHEMA)
    schema = TableSchema(0, fields, highest, ("p",), (), OPTIONS)
    SchemaManager(get_file_io(path), path).commit_new_schema(schema)
    return path


def _files(path: str) -> int:
    table = open_table(path)
    return sum(len(s.files) for s in table.new_read_builder().new_scan().plan().splits())


def bench_writes(spark: SparkSession, root: Path, rows: int, repeat: int) -> dict[str, Any]:
    df = _frame(spark, rows)
    # warm-up: Python workers started and the code loaded on every path
    warm = _frame(spark, 20_000)
    warm.write.mode("overwrite").partitionBy("p").option("compression", "zstd").parquet(str(root / "warm"))
    write_dataframe(warm, open_table(_table(root, "warm-job")))
    warm.write.format("paimon_meta").mode("append").save(_table(root, "warm-ds"))

    last: dict[str, str] = {}

    def parquet(r: int) -> str:
        out = str(root / f"parquet-{r}")
        df.write.partitionBy("p").option("compression", "zstd").parquet(out)
        return out

    def job(r: int) -> str:
        path = _table(root, f"job-{r}")
        write_dataframe(df, open_table(path))
        return path

    def datasource(r: int) -> str:
        path = _table(root, f"ds-{r}")
        df.write.format("paimon_meta").mode("append").save(path)
        return path

    runs: dict[str, Callable[[int], str]] = {
        "df.write.parquet (zstd, partitionBy p)": parquet,
        "existing job (write_dataframe)": job,
        'data source (df.write.format("paimon_meta"))': datasource,
    }
    best: dict[str, float] = {}
    for r in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            last[name] = run(r)
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
    baseline = best["df.write.parquet (zstd, partitionBy p)"]
    results = [
        {"write": name, "seconds": s, "rows_per_s": rows / s, "vs_parquet": baseline / s}
        for name, s in best.items()
    ]
    return {
        "results": results,
        "parquet": last["df.write.parquet (zstd, partitionBy p)"],
        "table": last['data source (df.write.format("paimon_meta"))'],
        "table_files": _files(last['data source (df.write.format("paimon_meta"))']),
    }


def bench_reads(
    spark: SparkSession, table: str, parquet: str, rows: int, repeat: int
) -> list[dict[str, Any]]:
    pushed = f"p = 3 AND id < {rows // 20}"
    not_pushed = f"abs(p) = 3 AND abs(id) < {rows // 20}"
    expected = len(range(3, rows // 20, 10))

    def paimon(where: str) -> Callable[[], tuple[int, int]]:
        def run() -> tuple[int, int]:
            df = spark.read.format("paimon_meta").load(table).where(where)
            return df.rdd.getNumPartitions(), df.count()

        return run

    def plain() -> tuple[int, int]:
        df = spark.read.parquet(parquet).where(pushed)
        return df.rdd.getNumPartitions(), df.count()

    runs = {
        "data source, filter pushdown": paimon(pushed),
        "data source, no pushdown": paimon(not_pushed),
        "spark.read.parquet (same filter)": plain,
    }
    for run in runs.values():  # warm-up (and the row check)
        counted = run()[1]
        if counted != expected:
            raise AssertionError(f"filtered read returned {counted} rows, expected {expected}")
    best: dict[str, float] = {}
    partitions: dict[str, int] = {}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            partitions[name], _ = run()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
    base = best["data source, no pushdown"]
    return [
        {
            "read": name,
            "seconds": s,
            "spark_partitions": partitions[name],
            "rows": expected,
            "speedup": base / s,
        }
        for name, s in best.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved rounds; the best counts")
    args = parser.parse_args()
    spark = build_session(
        "paimon_meta.bench.datasource",
        master=args.master,
        conf={"spark.driver.memory": "2g", "spark.ui.showConsoleProgress": "false"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    root = Path(tempfile.mkdtemp(prefix="bench-spark-ds-"))
    report: dict[str, Any] = {"rows": args.rows, "master": args.master, "load_before": os.getloadavg()}
    try:
        writes = bench_writes(spark, root, args.rows, args.repeat)
        report["writes"] = writes["results"]
        report["table_files"] = writes["table_files"]
        report["reads"] = bench_reads(spark, writes["table"], writes["parquet"], args.rows, args.repeat)
        report["load_after"] = os.getloadavg()
        load = f"load average {report['load_before'][0]:.1f} -> {report['load_after'][0]:.1f}"
        print(f"\nwrites of {args.rows:,} rows ({args.master}, best of {args.repeat}, {load}):")
        print(f"{'write':<48}{'seconds':>9}{'M rows/s':>10}{'vs parquet':>12}")
        for w in report["writes"]:
            print(
                f"{w['write']:<48}{w['seconds']:>9.1f}{w['rows_per_s'] / 1e6:>10.2f}{w['vs_parquet']:>12.2f}"
            )
        print(f"\nfiltered reads ({report['table_files']} data files in the table; best of {args.repeat}):")
        print(f"{'read':<36}{'seconds':>9}{'partitions':>12}{'rows':>10}{'vs no pushdown':>16}")
        for r in report["reads"]:
            print(
                f"{r['read']:<36}{r['seconds']:>9.2f}{r['spark_partitions']:>12}{r['rows']:>10}"
                f"{r['speedup']:>16.2f}"
            )
        print(json.dumps(report, default=str))
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
