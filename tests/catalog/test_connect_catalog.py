"""``paimon_meta.connect(dsn, catalog=NAME)``: the warehouse, catalog key and storage profile come from
the metastore's catalog; two catalogs hold the same ``db.t`` apart (rows, lock ids, files)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import Engine

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import CatalogNotFoundError, ValidationError
from paimon_meta.metastore.catalogs import Catalogs, StorageProfile
from tests.ops.helpers import FAST_LOCK

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def _write(catalog: MetastoreCatalog, identifier: str, keys: list[int]) -> None:
    wb = catalog.get_table(identifier).new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.table({"k": pa.array(keys, pa.int64()), "v": [str(k) for k in keys]}))
    wb.new_commit().commit(w.prepare_commit())


def _keys(catalog: MetastoreCatalog, identifier: str) -> list[int]:
    rb = catalog.get_table(identifier).new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist())


def test_two_catalogs_hold_the_same_table_apart(clean_db: str, clean_engine: Engine, tmp_path: Path) -> None:
    catalogs = Catalogs(clean_engine)
    catalogs.create("a", str(tmp_path / "wa"), options={"x": "1"})
    catalogs.create("b", str(tmp_path / "wb"), storage=StorageProfile(region="eu-west-1"))
    with (
        paimon_meta.connect(clean_db, catalog="a", **FAST_LOCK) as a,
        paimon_meta.connect(clean_db, catalog="b", **FAST_LOCK) as b,
    ):
        assert (a.warehouse, a.registry.catalog_key) == (str(tmp_path / "wa"), "a")
        assert (b.warehouse, b.registry.catalog_key) == (str(tmp_path / "wb"), "b")
        assert a.options["x"] == "1" and a.options["lock.lease-seconds"] == "2"
        assert b.file_io_options["s3.region"] == "eu-west-1"
        for catalog, keys in ((a, [1, 2]), (b, [7])):
            catalog.create_database("db")
            catalog.create_table("db.t", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
            _write(catalog, "db.t", keys)
        assert _keys(a, "db.t") == [1, 2] and _keys(b, "db.t") == [7]
        assert a.table_row("db.t").location == str(tmp_path / "wa" / "db.db" / "t")
        assert b.table_row("db.t").location == str(tmp_path / "wb" / "db.db" / "t")
        assert a.registry.lock_id("db", "t") != b.registry.lock_id("db", "t")
        a.drop_table("db.t")
        assert a.list_tables("db") == [] and b.list_tables("db") == ["t"]
    assert catalogs.databases("a") == ["db"] and catalogs.databases("b") == ["db"]


def test_refusals(clean_db: str, clean_engine: Engine, tmp_path: Path) -> None:
    Catalogs(clean_engine).create("a", str(tmp_path / "wa"))
    with pytest.raises(CatalogNotFoundError, match="'nope'"):
        paimon_meta.connect(clean_db, catalog="nope")
    with pytest.raises(ValidationError, match="not both"):
        paimon_meta.connect(clean_db, str(tmp_path / "wa"), catalog="a")
    with pytest.raises(ValidationError, match="catalog key 'a', not 'jdbc'"):
        paimon_meta.connect(clean_db, catalog="a", **{"catalog-key": "jdbc"})
