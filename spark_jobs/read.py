"""Read a Paimon table into a Spark DataFrame.

Splits are planned on the driver (manifests are read once, through the table's caches) and read on
the executors: each split -- one (partition, bucket) with its files -- is pickled into a row of its
own Spark partition, and ``mapInArrow`` reads it with the table's read API (merge-on-read for
primary-key tables, deletion vectors, schema evolution), opened by path on the executor. Reading on
the executors even for small tables keeps one code path and never pulls data through the driver;
the cost is one small Spark job per read.

On a ``query-auth.enabled`` table opened through a commit service the driver's plan asks for the
row filters and column masks (``POST .../auth``); each pickled split carries them and the executors
apply them (:mod:`paimon_meta.table.read.query_auth`).

The DataFrame is pinned to one snapshot (the latest, or ``snapshot_id``): re-evaluating it later
reads the same files. TIME columns are refused (Spark's Arrow bridge cannot carry them);
timestamps are read at microsecond precision.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from paimon_meta.table.read.builder import ReadBuilder
from paimon_meta.table.read.scan import PartitionFilterArg, Split
from paimon_meta.table.table import FileStoreTable
from spark_jobs.common import IoOptions, TableHandle, cast_batch, spark_arrow_schema, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _builder(
    table: FileStoreTable,
    snapshot_id: int | None,
    projection: Sequence[str] | None,
    partition_filter: PartitionFilterArg | None = None,
) -> ReadBuilder:
    builder = table.new_read_builder()
    if snapshot_id is not None:
        builder = builder.with_snapshot(snapshot_id)
    if projection is not None:
        builder = builder.with_projection(projection)
    if partition_filter is not None:
        builder = builder.with_partition_filter(partition_filter)
    return builder


def read_splits(
    handle: TableHandle,
    snapshot_id: int | None,
    projection: Sequence[str] | None,
    target: pa.Schema,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: read the pickled splits of this partition as Spark-typed batches."""
    read = _builder(handle.open(), snapshot_id, projection).new_read()
    for batch in batches:
        for payload in batch.column("split").to_pylist():
            split: Split = pickle.loads(payload)  # bytes the driver just pickled for us
            for out in read.to_arrow_batches([split]):
                yield cast_batch(out, target)


def to_dataframe(
    spark: SparkSession,
    table: FileStoreTable,
    snapshot_id: int | None = None,
    *,
    projection: Sequence[str] | None = None,
    partition_filter: PartitionFilterArg | None = None,
    io_options: IoOptions | None = None,
) -> DataFrame:
    """The rows of ``table`` at ``snapshot_id`` (default: the latest) as a DataFrame.

    ``projection`` selects columns, ``partition_filter`` partitions (as
    ``ReadBuilder.with_partition_filter``); ``io_options`` are the FileIO options executors open the
    table with (``catalog.file_io_options``; needed for S3), or their provider, asked now. The
    DataFrame keeps the options it was planned with: with vended credentials, one evaluated after they
    expired fails on storage -- call this again (a new plan, new credentials) for a later read.
    """
    builder = _builder(table, snapshot_id, projection, partition_filter)
    read_schema = builder.new_read().schema
    target = spark_arrow_schema(read_schema)
    struct = spark_schema(read_schema)
    plan = builder.new_scan().plan()
    splits = plan.splits()
    if plan.snapshot_id is None or not splits:
        return spark.createDataFrame([], struct)
    handle = TableHandle.of(table, io_options)
    columns = list(projection) if projection is not None else None
    payloads = [(pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL),) for s in splits]
    frame = spark.createDataFrame(spark.sparkContext.parallelize(payloads, len(payloads)), "split binary")
    # Executors resolve the read schema as the driver did (the snapshot's schema for time travel,
    # the latest otherwise); the splits themselves pin the files.
    return frame.mapInArrow(lambda it: read_splits(handle, snapshot_id, columns, target, it), struct)
