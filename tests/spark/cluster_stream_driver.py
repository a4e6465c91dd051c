"""The driver program of tests/spark/test_cluster_stream.py, one process per run (a run may be SIGKILLed).

``python tests/spark/cluster_stream_driver.py ARGS.json``: a streaming write through
``writeStream.format("paimon_meta")`` of the parquet files of ARGS' source dir (one per micro-batch,
available-now) into ``db.s``; with ``read`` in ARGS, then a streaming read of ``db.s`` from snapshot 1
(available-now, into a ``foreachBatch`` sink), a batch append of ``extra`` rows, and the read restarted
from its checkpoint. What the reads saw goes to ARGS' ``result``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

import spark_jobs
from spark_jobs.common import spark_schema
from spark_jobs.session import build_session
from tests.spark.cluster import app_conf
from tests.spark.helpers import SCHEMA

Batches = list[tuple[int, list[list[Any]]]]


def write_stream(spark: SparkSession, args: dict[str, Any]) -> None:
    stream = (
        spark.readStream.format("parquet")
        .schema(spark_schema(SCHEMA))
        .option("maxFilesPerTrigger", "1")
        .load(args["source"])
    )
    query = (
        stream.writeStream.format("paimon_meta")
        .options(**args["options"])
        .option("checkpointLocation", args["write_checkpoint"])
        .trigger(availableNow=True)
        .start("db.s")
    )
    query.awaitTermination()


def read_stream(spark: SparkSession, args: dict[str, Any]) -> Batches:
    """One available-now run of the streaming read from its checkpoint: the rows of each micro-batch."""
    batches: Batches = []

    def sink(df: DataFrame, batch_id: int) -> None:
        batches.append((batch_id, [[r.id, r.p, r.v] for r in df.collect()]))

    stream = (
        spark.readStream.format("paimon_meta")
        .options(**args["options"])
        .option("scan.snapshot-id", "1")
        .load("db.s")
    )
    query = (
        stream.writeStream.foreachBatch(sink)
        .option("checkpointLocation", args["read_checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return batches


def main(args_path: str) -> None:
    args = json.loads(Path(args_path).read_text())
    spark = build_session("paimon_meta-cluster-stream", master=args["master"], conf=app_conf(args["master"]))
    spark.sparkContext.setLogLevel("ERROR")
    spark_jobs.register(spark)
    try:
        write_stream(spark, args)
        if args.get("read"):
            first = read_stream(spark, args)
            extra = spark.createDataFrame([tuple(r) for r in args["extra"]], "id long, p string, v double")
            extra.write.format("paimon_meta").options(**args["options"]).mode("append").save("db.s")
            restarted = read_stream(spark, args)
            Path(args["result"]).write_text(json.dumps({"first": first, "restarted": restarted}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
