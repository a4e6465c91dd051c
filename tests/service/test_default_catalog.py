"""``serve`` records the catalog it serves (``--catalog-name``, ``catalog-key``, ``--warehouse``) as a
catalog of the metastore when it has none (issue 35: how a single-catalog metastore becomes one catalog
with its rows), and never refuses to start over it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from paimon_meta.metastore.catalogs import Catalogs
from paimon_meta.metastore.registry import Registry
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings

pytestmark = pytest.mark.postgres


def test_serve_adopts_the_default_catalog(
    clean_db: str, clean_engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Registry(clean_engine).create_database("db")  # written before catalogs existed (key jdbc)
    options = {"s3.secret-key": "hunter2", "s3.region": "eu-west-1", "lock.lease-seconds": "5", "x": "1"}
    settings = ServiceSettings(
        metastore_url=clean_db,
        warehouse=str(tmp_path / "wh"),
        options=options,
        catalog_name="prod",
        recovery_interval_seconds=0,
    )
    with TestClient(create_app(settings)) as client:
        assert client.get("/readyz").status_code == 200
    catalogs = Catalogs(clean_engine)
    (info,) = catalogs.list_all()
    assert (info.name, info.catalog_key, info.warehouse) == ("prod", "jdbc", str(tmp_path / "wh"))
    assert info.storage.region == "eu-west-1" and info.options == {"x": "1"}
    assert info.created_by == "serve" and catalogs.databases("prod") == ["db"]

    # A later start with another warehouse is served as configured (warned about), the row unchanged.
    moved = ServiceSettings(
        metastore_url=clean_db,
        warehouse=str(tmp_path / "other"),
        catalog_name="prod",
        recovery_interval_seconds=0,
    )
    with (
        caplog.at_level(logging.WARNING, logger="paimon_meta.service"),
        TestClient(create_app(moved)) as client,
    ):
        assert client.get("/readyz").status_code == 200
    assert any("'prod'" in r.getMessage() and "catalogs alter" in r.getMessage() for r in caplog.records)
    assert catalogs.list_all() == [info]
