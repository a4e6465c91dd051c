"""Reading tables into Spark DataFrames (splits read on executors)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from spark_jobs.batch_write import write_dataframe
from spark_jobs.read import to_dataframe
from tests.spark.helpers import create_table, read_rows, sort_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_read_matches_the_table_read_api(spark: SparkSession, tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("id", pa.int32(), False),
            ("p", pa.string(), False),
            ("ts", pa.timestamp("ms")),
            ("amount", pa.decimal128(10, 2)),
            ("d", pa.date32()),
        ]
    )
    table = create_table(
        str(tmp_path), "db.r", schema, partition_keys=["p"], primary_keys=["id", "p"], options={"bucket": "2"}
    )
    rows = [
        (i, f"p{i % 2}", dt.datetime(2024, 1, 1, 0, 0, i % 60), Decimal(i) / 4, dt.date(2024, 1, 1 + i % 28))
        for i in range(200)
    ]
    ddl = "id int, p string, ts timestamp_ntz, amount decimal(10,2), d date"
    frame = spark.createDataFrame(rows, ddl)
    write_dataframe(frame, table)
    delete = spark.createDataFrame([(7, "p1", None, None, None, "-D")], ddl + ", _row_kind string")
    write_dataframe(delete, table)

    df = to_dataframe(spark, table)
    assert df.count() == 199
    got = sort_rows([r.asDict() for r in df.collect()])
    assert got == read_rows(table)
    # time travel and projection
    assert to_dataframe(spark, table, 1).count() == 200
    assert to_dataframe(spark, table, projection=["p", "id"]).columns == ["p", "id"]
    assert to_dataframe(spark, table, partition_filter={"p": "p0"}).count() == 100


def test_empty_table_reads_as_empty_frame(spark: SparkSession, tmp_path: Path) -> None:
    table = create_table(str(tmp_path), "db.e", pa.schema([("id", pa.int64())]))
    df = to_dataframe(spark, table)
    assert df.columns == ["id"] and df.count() == 0
