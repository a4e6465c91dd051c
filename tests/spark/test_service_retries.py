"""The Spark batch job and the data source through a commit service that answers 503 and loses answers
(the fault-injecting app of ``tests/service/test_client_retries.py``): the client's ``rest.retry.*``
options reach it from ``--option`` and from the data source's options, the commit is sent again with the
same identifier and lands exactly once, and the job reports the requests it sent again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

import spark_jobs
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from spark_jobs import batch_write
from tests.fixtures.service import make_principal
from tests.service.helpers import published_count
from tests.service.test_client_retries import Faults, serve_app
from tests.spark.helpers import SCHEMA, read_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

#: Short waits between re-sends (the faults' Retry-After: 1 still applies).
FAST = "rest.retry.max-backoff-seconds=0.05"


@pytest.fixture
def faulty(service_catalog: MetastoreCatalog) -> Iterator[tuple[Faults, str, str]]:
    """(the faults, the URL of the service behind them, an admin token), with table db.t."""
    service_catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    token = make_principal(service_catalog, "spark-job", [("admin", "db", None)])
    settings = ServiceSettings(auth_cache_seconds=0, max_body_bytes=16 << 20)
    faults = Faults(create_app(settings, state=ServiceState(settings, service_catalog)))
    with serve_app(faults) as base:
        yield faults, base, token


def test_the_batch_job_resends_its_commit_and_reports_it(
    spark: SparkSession,
    faulty: tuple[Faults, str, str],
    service_catalog: MetastoreCatalog,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    faults, base, token = faulty
    monkeypatch.delenv("PAIMON_META_URL", raising=False)
    faults.plan["POST commit-messages"] = ["503", "reset", "500"]
    job = ["--table", "db.t", "--service", base, "--token", token, "--option", FAST]
    assert batch_write.main([*job, "--generate", "120"]) == 0
    out = capsys.readouterr().out
    assert "committed snapshots [1]" in out and "3 request(s) to the service sent again" in out
    assert faults.reached["POST commit-messages"] == 3  # landed at the first it reached, then deduplicated
    assert published_count(service_catalog) == 1
    rows = read_rows(service_catalog.get_table("db.t"))
    assert sorted(r["id"] for r in rows) == list(range(120))


def test_the_data_source_resends_its_commit_with_the_same_identifier(
    spark: SparkSession, faulty: tuple[Faults, str, str], service_catalog: MetastoreCatalog
) -> None:
    faults, base, token = faulty
    spark_jobs.register(spark)
    faults.plan["POST commit-messages"] = ["reset", "503", "500"]
    options = {"service": base, "token": token, "rest.retry.max-backoff-seconds": "0.05"}
    df = spark.range(0, 60, numPartitions=3).selectExpr(
        "id", "concat('p', cast(id % 3 as string)) as p", "id * 0.5 as v"
    )
    df.write.format("paimon_meta").options(**options).mode("append").save("db.t")
    assert faults.reached["POST commit-messages"] == 3
    assert published_count(service_catalog) == 1
    assert service_catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == [1]
    rows = read_rows(service_catalog.get_table("db.t"))
    assert sorted(r["id"] for r in rows) == list(range(60))
