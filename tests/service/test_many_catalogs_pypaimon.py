"""Two catalogs behind one real ``paimon-meta serve``, each driven by unmodified pypaimon 2.1.0 configured
with ``warehouse=NAME`` (issue 35): the default catalog ``paimon`` on a local warehouse (``serve
--warehouse``, unchanged) and catalog ``lake`` on (moto) S3 with its own storage profile and STS role,
created in the metastore. Both hold ``db.t``; each client creates, commits and reads in its own catalog
only. ``lake``'s client holds no storage keys: the service vends credentials with ``lake``'s role for
``lake``'s bucket. Our own ``connect_service(url, warehouse=NAME)`` reaches each catalog too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import paimon_meta
from paimon_meta.db.models import Privilege
from paimon_meta.errors import NotFoundError
from paimon_meta.metastore.access_events import access_events
from paimon_meta.metastore.catalogs import Catalogs, StorageProfile
from paimon_meta.metastore.principals import Principals
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.s3 import MotoS3
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.fixtures.vending import AWS_KEY_VARIABLES

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.interop]

ROLE = "arn:aws:iam::123456789012:role/lake-vending"

#: argv: uri warehouse token tag. Creates db (if absent) and db.t, commits 2 batches whose ``v`` carry
#: ``tag``, prints what it reads back and the table's location.
PYPAIMON = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

uri, warehouse, token, tag = sys.argv[1:5]
cat = CatalogFactory.create({"metastore": "rest", "uri": uri, "warehouse": warehouse,
                             "token.provider": "bear", "token": token})
cat.create_database("db", True)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
cat.create_table("db.t", Schema.from_pyarrow_schema(schema, options={"bucket": "1"}), True)
table = cat.get_table("db.t")
for b in range(2):
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.Table.from_pylist([{"id": b, "v": f"{tag}-{b}"}], schema=schema))
    c.commit(w.prepare_commit())
    w.close(); c.close()
table = cat.get_table("db.t")
rb = table.new_read_builder()
rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
print(json.dumps({"rows": sorted(r["v"] for r in rows), "path": str(table.table_path)}))
"""


#: argv: uri warehouse token tag. paimon-rust (pypaimon-rust 0.4.0): creates db and db.t (DataFusion
#: DDL), commits one batch whose ``v`` carry ``tag``, prints what it reads back and the table's location.
RUST = r"""
import json, sys
import pyarrow as pa
from pypaimon_rust.datafusion import PaimonCatalog, SQLContext

uri, warehouse, token, tag = sys.argv[1:5]
options = {"metastore": "rest", "uri": uri, "warehouse": warehouse, "token.provider": "bear", "token": token}
ctx = SQLContext()
ctx.register_catalog("pm", options, default_database="")
ctx.sql("CREATE SCHEMA IF NOT EXISTS pm.db")
ctx.sql("CREATE TABLE IF NOT EXISTS pm.db.t (k BIGINT NOT NULL, v STRING) WITH ('bucket' = '-1')")
cat = PaimonCatalog(options)
schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
wb = cat.get_table("db.t").new_batch_write_builder()
w = wb.new_write()
w.write_arrow(pa.record_batch({"k": [1, 2], "v": [tag + "-1", tag + "-2"]}, schema=schema))
messages = w.prepare_commit()
w.close()
c = wb.new_commit()
c.commit(messages)
c.close()
t = cat.get_table("db.t")
rb = t.new_read_builder()
batches = rb.new_read().read(rb.new_scan().plan().splits())
rows = pa.Table.from_batches(batches).to_pylist() if batches else []
print(json.dumps({"rows": sorted(r["v"] for r in rows), "location": t.location()}))
"""


@dataclass
class Rig:
    db: str
    bucket: str
    local: Path
    moto: MotoS3
    server: ServiceProcess
    alice: str  # admin of the default catalog
    bob: str  # admin of lake


@pytest.fixture
def rig(
    service_processes: list[ServiceProcess],
    clean_db: str,
    moto_server: MotoS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Rig]:
    # the clients hold no storage keys (lake's come from the service's vending)
    for name in (*AWS_KEY_VARIABLES, "PAIMON_META_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    bucket = moto_server.create_bucket()
    local = tmp_path / "wh-paimon"
    catalog = paimon_meta.connect(clean_db, str(local), **FAST_LOCK)
    try:
        alice = make_principal(catalog, "alice", [("admin", None, None)])
        principals = Principals(catalog.engine)
        bob = principals.create("bob")
        opts = moto_server.options()
        info = Catalogs(catalog.engine).create(
            "lake",
            f"s3://{bucket}/warehouse",
            storage=StorageProfile(opts["s3.endpoint"], opts["s3.region"], True),
            options={"s3.access-key": opts["s3.access-key"], "s3.secret-key": opts["s3.secret-key"]},
            sts_role_arn=ROLE,
            created_by="tests",
        )
        principals.grant("bob", Privilege.ADMIN, catalog_key=info.catalog_key)
    finally:
        catalog.close()
    server = spawn_service(service_processes, clean_db, str(local), tmp_path)
    try:
        yield Rig(clean_db, bucket, local, moto_server, server, alice, bob)
    finally:
        moto_server.drop_bucket(bucket)


def _keys(rig: Rig, prefix: str) -> list[str]:
    pages = rig.moto.client().get_paginator("list_objects_v2").paginate(Bucket=rig.bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_pypaimon_creates_commits_and_reads_in_each_catalog(rig: Rig, pypaimon_python: Path) -> None:
    base = rig.server.base
    a: dict[str, Any] = run_pypaimon(PYPAIMON, base, "paimon", rig.alice, "a", python=pypaimon_python)
    b: dict[str, Any] = run_pypaimon(PYPAIMON, base, "lake", rig.bob, "b", python=pypaimon_python)
    assert a["rows"] == ["a-0", "a-1"] and b["rows"] == ["b-0", "b-1"]
    assert str(rig.local) in a["path"] and a["path"].endswith("db.db/t")
    assert b["path"] == f"s3://{rig.bucket}/warehouse/db.db/t"
    # each table's files are in its own catalog's warehouse
    assert (rig.local / "db.db" / "t" / "snapshot" / "snapshot-2").exists()
    assert "warehouse/db.db/t/snapshot/snapshot-2" in _keys(rig, "warehouse/db.db/t/snapshot/")
    # lake's client got credentials vended with lake's role (the default catalog vends none)
    catalog = paimon_meta.connect(rig.db, str(rig.local), **FAST_LOCK)
    try:
        vends = [
            e for e in access_events(catalog.engine, principal="bob") if e.event_type == "credentials_vended"
        ]
        assert vends and {e.payload["role_arn"] for e in vends} == {ROLE}
        assert not [
            e
            for e in access_events(catalog.engine, principal="alice")
            if e.event_type == "credentials_vended"
        ]
    finally:
        catalog.close()
    # a second round in each: still their own rows only (the same names, two tables)
    again = run_pypaimon(PYPAIMON, base, "lake", rig.bob, "b2", python=pypaimon_python)
    assert again["rows"] == ["b-0", "b-1", "b2-0", "b2-1"]

    # our own client, by warehouse
    with paimon_meta.connect_service(base, rig.bob, warehouse="lake") as remote:
        assert remote.prefix == "lake"
        rows = remote.get_table("db.t")
        rb = rows.new_read_builder()
        got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
        assert sorted(got.column("v").to_pylist()) == ["b-0", "b-1", "b2-0", "b2-1"]
    with paimon_meta.connect_service(base, rig.alice) as remote:
        t = remote.get_table("db.t")
        rb = t.new_read_builder()
        got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
        assert sorted(got.column("v").to_pylist()) == ["a-0", "a-1"]
    with pytest.raises(NotFoundError):
        paimon_meta.connect_service(base, rig.bob, warehouse="nope")


def test_paimon_rust_creates_commits_and_reads_in_each_catalog(rig: Rig, rust_python: Path) -> None:
    base = rig.server.base
    a: dict[str, Any] = run_pypaimon(RUST, base, "paimon", rig.alice, "ra", python=rust_python)
    b: dict[str, Any] = run_pypaimon(RUST, base, "lake", rig.bob, "rb", python=rust_python)
    assert a["rows"] == ["ra-1", "ra-2"] and b["rows"] == ["rb-1", "rb-2"]
    assert str(rig.local) in a["location"]
    assert b["location"].startswith(f"s3://{rig.bucket}/warehouse/db.db/t")
    assert _keys(rig, "warehouse/db.db/t/snapshot/")
    assert (rig.local / "db.db" / "t" / "snapshot" / "snapshot-1").exists()
