"""The Spark jobs' ``--catalog NAME`` and the data source's ``catalog`` option open a catalog of the
metastore (``paimon-meta catalogs create``): its warehouse and storage profile are the metastore's, and a
``db.t`` of another catalog is never touched. A warehouse with a catalog is refused, naming both."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from sqlalchemy import Engine

import paimon_meta
import spark_jobs
from paimon_meta.errors import CatalogNotFoundError, ValidationError
from paimon_meta.metastore.catalogs import Catalogs
from spark_jobs.batch_write import main
from spark_jobs.cli_args import add_table_arguments, open_target
from spark_jobs.datasource.target import SourceOptions
from tests.ops.helpers import FAST_LOCK

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
LOCK_ARGS = [a for k, v in FAST_LOCK.items() for a in ("--option", f"{k}={v}")]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_table_arguments(p)
    return p


def two_catalogs(clean_db: str, engine: Engine, tmp_path: Path) -> None:
    """Catalogs ``a`` and ``b``, each with a ``db.t``; ``a``'s holds ids 1000..1009."""
    catalogs = Catalogs(engine)
    catalogs.create("a", str(tmp_path / "wa"))
    catalogs.create("b", str(tmp_path / "wb"))
    for name in ("a", "b"):
        with paimon_meta.connect(clean_db, catalog=name, **FAST_LOCK) as cat:
            cat.create_database("db")
            table = cat.create_table("db.t", SCHEMA, options={"bucket": "2", "bucket-key": "id"})
            if name == "a":
                wb = table.new_batch_write_builder()
                w = wb.new_write()
                ids = list(range(1000, 1010))
                w.write_arrow(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"a{i}" for i in ids]}))
                wb.new_commit().commit(w.prepare_commit())


def test_job_opens_the_named_catalog(clean_db: str, clean_engine: Engine, tmp_path: Path) -> None:
    two_catalogs(clean_db, clean_engine, tmp_path)
    opened = open_target(parser().parse_args(["--table", "db.t", "--metastore", clean_db, "--catalog", "b"]))
    try:
        assert opened.table.path == str(tmp_path / "wb" / "db.db" / "t")
    finally:
        opened.close()
    with pytest.raises(CatalogNotFoundError, match="'nope'"):
        open_target(parser().parse_args(["--table", "db.t", "--metastore", clean_db, "--catalog", "nope"]))


def test_warehouse_and_catalog_are_refused_naming_both(tmp_path: Path) -> None:
    args = parser().parse_args(["--table", "db.t", "--catalog", "b", "--warehouse", str(tmp_path)])
    with pytest.raises(ValidationError, match="--catalog 'b' or --warehouse") as e:
        open_target(args)
    assert e.value.fields["options"] == ["--warehouse", "--catalog"]
    args = parser().parse_args(["--table-path", str(tmp_path / "t"), "--catalog", "b"])
    with pytest.raises(ValidationError, match="not --table-path"):
        open_target(args)
    with pytest.raises(ValidationError, match="catalog 'b' or warehouse") as e:
        SourceOptions.parse({"path": "db.t", "catalog": "b", "warehouse": str(tmp_path)})
    assert e.value.fields["options"] == ["warehouse", "catalog"]
    assert "--catalog NAME" in parser().format_help()


@pytest.mark.spark
def test_batch_job_writes_into_catalog_b_only(
    spark: SparkSession, clean_db: str, clean_engine: Engine, tmp_path: Path, capsys: Any
) -> None:
    two_catalogs(clean_db, clean_engine, tmp_path)
    argv = ["--table", "db.t", "--metastore", clean_db, "--catalog", "b", "--generate", "50", *LOCK_ARGS]
    assert main(argv) == 0
    assert f"to {tmp_path / 'wb' / 'db.db' / 't'}" in capsys.readouterr().out

    spark_jobs.register(spark)

    def ids(catalog: str) -> list[int]:
        df = spark.read.format("paimon_meta").options(metastore=clean_db, catalog=catalog, **FAST_LOCK)
        return sorted(r["id"] for r in df.load("db.t").collect())

    assert ids("b") == list(range(50))
    assert ids("a") == list(range(1000, 1010))


def test_catalog_with_service_is_the_services_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_jobs.datasource import target

    asked: list[str | None] = []

    def fake(uri: str, token: str, identifier: str, options: Any, *, catalog_name: str | None = None) -> Any:
        asked.append(catalog_name)
        raise CatalogNotFoundError(f"no catalog {catalog_name!r}")

    monkeypatch.setattr(target, "open_service_table", fake)
    service = {"path": "db.t", "service": "http://127.0.0.1:9", "token": "t"}
    with pytest.raises(CatalogNotFoundError):
        target.open_target(SourceOptions.parse({**service, "catalog": "b"}))
    with pytest.raises(ValidationError, match="name two catalogs"):
        target.open_target(SourceOptions.parse({**service, "catalog": "b", "catalog-name": "c"}))
    assert asked == ["b"]
