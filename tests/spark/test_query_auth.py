"""The Spark data source (batch and streaming) and the Spark read job on a ``query-auth.enabled`` table
through the service: the driver's plan asks ``/auth`` once, every split carries the answer and the
executors apply it, so Spark returns exactly what ``connect_service`` returns (the filtered rows, the
column masked from the raw row); a malformed answer fails the read. The answers are scripted
(tests.fixtures.query_auth) against the real service app."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import paimon_meta
import spark_jobs
from paimon_meta import errors
from spark_jobs.read import to_dataframe
from tests.catalog.test_query_auth_reads import EU, MASK_EMAIL, MASK_NAME, NOT_5, read, served
from tests.fixtures.query_auth import AuthAnswers

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.postgres]
__all__ = ["served"]  # the fixture

#: What connect_service reads under [EU, NOT_5] with email and name masked.
EXPECTED = [
    {"id": 1, "region": "eu", "name": "a", "email": "***@eu"},
    {"id": 3, "region": "eu", "name": "c", "email": "***@eu"},
]


def rows(df: DataFrame) -> list[dict[str, Any]]:
    return sorted((r.asDict() for r in df.collect()), key=lambda r: r.get("id", 0))


def test_the_data_source_and_the_job_read_what_connect_service_reads(
    spark: SparkSession, served: tuple[AuthAnswers, str, str]
) -> None:
    answers, base, reader = served
    answers.rules("db.t", [EU, NOT_5], {"email": MASK_EMAIL, "name": MASK_NAME})
    spark_jobs.register(spark)
    options = {"service": base, "token": reader}
    with paimon_meta.connect_service(base, token=reader) as catalog:
        ours = read(catalog, "db.t")
        assert ours == EXPECTED
        source = spark.read.format("paimon_meta").options(**options).load("db.t")
        assert rows(source) == ours
        # a projection (the columns option): only those columns, the rules' columns read and dropped
        narrow = spark.read.format("paimon_meta").options(**options, columns="email,name").load("db.t")
        assert narrow.columns == ["email", "name"]
        assert sorted(rows(narrow), key=lambda r: r["name"]) == [
            {"email": "***@eu", "name": "a"},
            {"email": "***@eu", "name": "c"},
        ]
        job = to_dataframe(spark, catalog.get_table("db.t"))
        assert rows(job) == ours
    asked = [a.body for a in answers.asked if a.table == "db.t"]
    assert {"select": ["email", "name"]} in asked


def test_a_malformed_answer_fails_the_spark_read(
    spark: SparkSession, served: tuple[AuthAnswers, str, str]
) -> None:
    answers, base, reader = served
    answers.answer("db.t", 200, {"filter": [EU.replace('"EQUAL"', '"SOUNDS_LIKE"')], "columnMasking": {}})
    spark_jobs.register(spark)
    df = spark.read.format("paimon_meta").options(service=base, token=reader).load("db.t")
    with pytest.raises(Exception, match="SOUNDS_LIKE") as failed:
        df.collect()
    assert "PolicyRuleError" in str(failed.value) or isinstance(failed.value, errors.PolicyRuleError)


def test_a_stream_read_applies_the_rules(
    spark: SparkSession, served: tuple[AuthAnswers, str, str], tmp_path: Path
) -> None:
    answers, base, reader = served
    answers.rules("db.log", [EU], {"email": MASK_EMAIL})
    spark_jobs.register(spark)
    got: list[dict[str, Any]] = []

    def collect(df: DataFrame, _: int) -> None:
        got.extend(r.asDict() for r in df.collect())

    stream = (
        spark.readStream.format("paimon_meta")
        .options(service=base, token=reader, **{"scan.snapshot-id": "1"})
        .load("db.log")
    )
    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert sorted(got, key=lambda r: r["id"]) == [
        {"id": 1, "region": "eu", "name": "alice", "email": "***@eu"},
        {"id": 3, "region": "eu", "name": "carol", "email": "***@eu"},
        {"id": 5, "region": "eu", "name": "erin", "email": "***@eu"},
    ]
    assert any(a.table == "db.log" for a in answers.asked)
