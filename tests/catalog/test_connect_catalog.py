"""``paimon_meta.connect(dsn, catalog=NAME)``: the warehouse, catalog key and storage profile come from
the metastore's catalog; two catalogs hold the same ``db.t`` apart (rows, lock ids, files)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import Engine, text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege
from paimon_meta.errors import CatalogNotFoundError, ValidationError
from paimon_meta.metastore.catalogs import Catalogs, StorageProfile
from paimon_meta.metastore.principals import Principals
from paimon_meta.ops.tables import drop_table
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


def _grants_on(engine: Engine, identifier: str) -> list[tuple[str, str | None]]:
    db, name = identifier.split(".")
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT p.name, g.catalog_key FROM paimon_grants g JOIN paimon_principals p USING "
                "(principal_id) WHERE g.database_name = :db AND g.table_name = :t ORDER BY 1, 2"
            ),
            {"db": db, "t": name},
        ).all()
    return [(r[0], r[1]) for r in rows]


def test_the_default_catalog_by_name(clean_db: str, clean_engine: Engine, tmp_path: Path) -> None:
    """``connect(dsn, catalog=NAME)`` of the service's default catalog (recorded as ``serve`` does, its
    profile from the server's options) takes its warehouse and storage profile from the metastore and
    knows it is the default: the grants naming no catalog are its own (a drop moves them to its recycle
    bin), and only its own (a drop of the same ``db.t`` in another catalog leaves them)."""
    catalogs = Catalogs(clean_engine)
    default, _ = catalogs.ensure_default(
        "paimon",
        str(tmp_path / "wd"),
        catalog_key="jdbc",
        options={"s3.region": "eu-central-1", "s3.secret-key": "never kept", "x": "1"},
        created_by="serve",
    )
    assert default.default and default.options == {"x": "1"}  # the mark is no option
    catalogs.create("b", str(tmp_path / "wb"))
    # a second deployment naming another default does not take the mark
    other, _ = catalogs.ensure_default("q", str(tmp_path / "wq"), catalog_key="q")
    assert not other.default and [c.name for c in catalogs.list_all() if c.default] == ["paimon"]
    principals = Principals(clean_engine)
    principals.create("reader")
    with (
        paimon_meta.connect(clean_db, catalog="paimon", **FAST_LOCK) as d,
        paimon_meta.connect(clean_db, catalog="b", **FAST_LOCK) as b,
    ):
        assert (d.warehouse, d.registry.catalog_key) == (str(tmp_path / "wd"), "jdbc")
        assert d.file_io_options["s3.region"] == "eu-central-1" and d.options["x"] == "1"
        assert "s3.secret-key" not in d.file_io_options
        assert d.recycle_bin.default_catalog and not b.recycle_bin.default_catalog
        for catalog in (d, b):
            catalog.create_database("db")
            catalog.create_table("db.t", SCHEMA)
        principals.grant("reader", Privilege.READ, database="db", table="t")  # no catalog: the default's
        principals.grant("reader", Privilege.WRITE, database="db", table="t", catalog_key="b")
        drop_table(b, "db.t")  # into b's recycle bin, with b's grants only
        assert _grants_on(clean_engine, "db.t") == [("reader", None)]
        drop_table(d, "db.t")
        assert _grants_on(clean_engine, "db.t") == []
    # the mark survives an alter of the options, and nobody sets it by hand
    assert catalogs.alter("paimon", set_options={"y": "2"}).default
    with pytest.raises(ValidationError, match="not an option"):
        catalogs.alter("b", set_options={"paimon-meta.default-catalog": "true"})
    assert catalogs.get("paimon").options == {"x": "1", "y": "2"}
