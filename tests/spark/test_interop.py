"""pypaimon 2.1.0 reads what the Spark jobs committed, row for row."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spark_jobs.batch_write import write_dataframe
from spark_jobs.compaction import compact_table
from tests.fixtures.interop import run_pypaimon
from tests.spark.helpers import append_table, pk_table, read_rows, sort_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.interop]

READ_SCRIPT = r"""
import json, sys
from pypaimon import CatalogFactory

warehouse, identifier = sys.argv[1], sys.argv[2]
table = CatalogFactory.create({"warehouse": warehouse}).get_table(identifier)
builder = table.new_read_builder()
rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
print(json.dumps(rows))
"""


def test_pypaimon_reads_the_batch_job_result(spark: SparkSession, tmp_path: Path) -> None:
    table = append_table(str(tmp_path))
    frame = spark.range(0, 2000, numPartitions=3).selectExpr(
        "id", "concat('p', cast(id % 4 as string)) as p", "id / 3 as v"
    )
    write_dataframe(frame, table)
    write_dataframe(frame.where("id < 100").selectExpr("id + 5000 as id", "p", "v"), table)
    ours = read_rows(table)
    assert len(ours) == 2100
    assert sort_rows(run_pypaimon(READ_SCRIPT, str(tmp_path), "db.t")) == ours


def test_pypaimon_reads_a_compacted_primary_key_table(spark: SparkSession, tmp_path: Path) -> None:
    table = pk_table(str(tmp_path))
    ddl = "id long, p string, v double, _row_kind string"
    write_dataframe(spark.createDataFrame([(i, f"p{i % 2}", float(i), "+I") for i in range(300)], ddl), table)
    changes: list[tuple[int, str, float | None, str]] = [
        (i, f"p{i % 2}", -1.0, "+U") for i in range(0, 300, 3)
    ]
    changes += [(i, f"p{i % 2}", None, "-D") for i in range(1, 300, 10)]
    write_dataframe(spark.createDataFrame(changes, ddl), table)
    before = read_rows(table)
    compact_table(spark, table)
    assert read_rows(table) == before
    assert sort_rows(run_pypaimon(READ_SCRIPT, str(tmp_path), "db.pk")) == before
