"""The Spark jobs through a served catalog (``--service URL --token T``): executors write data files, the
driver sends the messages to the control plane; no database credentials in the job."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import paimon_meta
from spark_jobs import batch_write, compaction
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.spark.helpers import SCHEMA, read_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


def test_batch_and_compaction_jobs_commit_through_the_service(
    spark: SparkSession,
    clean_db: str,
    tmp_path: Path,
    *,
    service_processes: list[ServiceProcess],
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        catalog.create_database("db")
        token = make_principal(catalog, "spark-job", [("admin", "db", None)])
    server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
    remote = paimon_meta.connect_service(server.base, token=token)
    table = remote.create_table("db.g", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    monkeypatch.delenv("PAIMON_META_URL", raising=False)  # the job must not need the database
    job = ["--table", "db.g", "--service", server.base, "--token", token]
    for _ in range(3):  # three files per bucket: enough for an append compaction
        assert batch_write.main([*job, "--generate", "300"]) == 0
    assert "committed snapshots [3]" in capsys.readouterr().out
    assert compaction.main(job) == 0
    rows = read_rows(remote.get_table("db.g"))
    assert len(rows) == 900
    history = remote.commits("db.g")
    assert [c["commitKind"] for c in history] == ["COMPACT", "APPEND", "APPEND", "APPEND"]
    assert {c["principal"] for c in history} == {"spark-job"}
    assert table.path == remote.get_table("db.g").path
