"""The Spark batch job and the data source through a commit service that vends storage credentials, with
NO storage keys anywhere in the job (options or environment): the executors write and read the table's
files in (moto) S3 with the credentials the service vended, and the access log shows whom it vended them
to. Cheaper checks of the same paths (refresh, micro-batches, checkpoints): test_vended_io_options.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import paimon_meta
import spark_jobs
from paimon_meta.catalog.vended import VendedFileIO
from spark_jobs import batch_write
from tests.fixtures.vending import VendingRig
from tests.spark.helpers import SCHEMA, live_files, read_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.s3]


def test_batch_job_writes_and_the_data_source_reads_with_vended_credentials_only(
    spark: SparkSession, vending: VendingRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAIMON_META_URL", raising=False)  # nor the database
    with paimon_meta.connect_service(vending.server.base, vending.writer) as remote:
        table = remote.create_table("shop.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
        assert isinstance(table.file_io, VendedFileIO)
    before = len(vending.events("etl"))

    # No --option at all: the executors' FileIO gets the vended keys or nothing.
    job = ["--table", "shop.t", "--service", vending.server.base, "--token", vending.writer]
    assert batch_write.main([*job, "--generate", "300"]) == 0

    with paimon_meta.connect_service(vending.server.base, vending.writer) as remote:
        written = remote.get_table("shop.t")
        assert [c["commitKind"] for c in remote.commits("shop.t")] == ["APPEND"]
        rows = read_rows(written)
        files = {f.file_name for f in live_files(written)}
    assert sorted(r["id"] for r in rows) == list(range(300))  # every row, once
    # Landed once: the bucket holds exactly the files the one snapshot references (no task attempt's
    # leftovers, nothing written twice).
    in_bucket = {key.rsplit("/", 1)[1] for key in vending.keys("warehouse/shop.db/t/p=")}
    assert in_bucket == files
    vends = vending.events("etl")[: len(vending.events("etl")) - before]  # the job's, newest first
    assert vends and all(e.table_identifier == "shop.t" and e.level == "write" for e in vends)

    # A reader reads through the data source: its executors get read-only credentials.
    spark_jobs.register(spark)
    options = {"service": vending.server.base, "token": vending.reader}
    df = spark.read.format("paimon_meta").options(**options).load("shop.t")
    assert sorted(r["id"] for r in df.select("id").collect()) == list(range(300))
    reads = vending.events("analyst")
    assert reads and all(e.table_identifier == "shop.t" and e.level == "read" for e in reads)
    assert all("s3:PutObject" not in e.actions for e in reads)
