"""Object tables through a real ``paimon-meta serve``, read and written by unmodified pypaimon 2.1.0.

On a local warehouse pypaimon reaches an object table's files through its virtual filesystem
(``pypaimon.filesystem.pvfs``: ``pvfs://<catalog>/<db>/<table>/...``), which asks the service for the table
and picks the storage by the scheme of its ``path`` (``file:/`` or ``oss://``): the service answers an object
table's local location as a ``file://`` URI (a plain path: "Storage type doesn't support now"). pypaimon's
object-table reader lists the files on a local and on an S3 (moto) warehouse, the latter with the storage
credentials the service vends. pvfs itself knows no ``s3://`` (pypaimon 2.1.0: local and OSS only).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import paimon_meta
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.fixtures.vending import VendingRig

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

_PRELUDE = r"""
import json, sys
from pypaimon import CatalogFactory, Schema

OPTIONS = {"metastore": "rest", "uri": sys.argv[1], "warehouse": "paimon", "token.provider": "bear",
           "token": sys.argv[2]}
cat = CatalogFactory.create(OPTIONS)

def objects(name):
    table = cat.get_table(name)
    rb = table.new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    return {"type": type(table).__name__, "location": table.location(),
            "rows": sorted([r["path"], r["name"], r["length"]] for r in rows)}
"""

#: argv: uri token. An object table created through the catalog, files written, listed and read through
#: pvfs; another object table created by pvfs itself (``makedirs`` of an unknown table creates one).
PVFS_LOCAL = (
    _PRELUDE
    + r"""
from pypaimon.filesystem.pvfs import PaimonVirtualFileSystem

cat.create_database("shop", True)
cat.create_table("shop.docs", Schema(fields=[], options={"type": "object-table"}), False)
fs = PaimonVirtualFileSystem(OPTIONS)
fs.makedirs("pvfs://paimon/shop/docs/sub")
for name, data in (("a.txt", b"hello"), ("sub/b.bin", b"\x00\x01\x02")):
    with fs.open("pvfs://paimon/shop/docs/" + name, "wb") as f:
        f.write(data)
out = {"tables": fs.ls("pvfs://paimon/shop", detail=False),
       "listed": sorted(fs.ls("pvfs://paimon/shop/docs", detail=False)),
       "sub": [[e["name"], e["size"], e["type"]] for e in fs.ls("pvfs://paimon/shop/docs/sub", detail=True)],
       "cat": fs.cat_file("pvfs://paimon/shop/docs/a.txt").decode(),
       "objects": objects("shop.docs")}
fs.makedirs("pvfs://paimon/shop/made/inbox")
out["made"] = objects("shop.made")
print(json.dumps(out))
"""
)

#: argv: uri token. pypaimon's object-table reader on ``shop.docs``.
READ_OBJECTS = (
    _PRELUDE
    + r"""
print(json.dumps(objects("shop.docs")))
"""
)

#: argv: uri token. Creates the object table ``shop.docs``.
CREATE_OBJECT_TABLE = (
    _PRELUDE
    + r"""
cat.create_table("shop.docs", Schema(fields=[], options={"type": "object-table"}), False)
print(json.dumps({"created": True}))
"""
)

ROWS = [["a.txt", "a.txt", 5], ["sub/b.bin", "b.bin", 3]]


def test_pypaimon_object_table_on_a_local_warehouse(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path, pypaimon_python: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        token = make_principal(catalog, "etl", [("admin", None, None)])
        server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        out = run_pypaimon(PVFS_LOCAL, server.base, token, python=pypaimon_python)
        location = Path(catalog.table_location("shop", "docs"))
        # the files pvfs wrote are in the table's directory, as the catalog has it
        assert (location / "a.txt").read_bytes() == b"hello"
        assert (location / "sub" / "b.bin").read_bytes() == b"\x00\x01\x02"
        assert out["tables"] == ["pvfs://paimon/shop/docs"], out
        assert out["listed"] == ["pvfs://paimon/shop/docs/a.txt", "pvfs://paimon/shop/docs/sub"]
        assert out["sub"] == [["pvfs://paimon/shop/docs/sub/b.bin", 3, "file"]]
        assert out["cat"] == "hello"
        assert out["objects"] == {"type": "ObjectTable", "location": location.as_uri(), "rows": ROWS}
        # pvfs created shop.made through the service; its directory is the catalog's
        _, schema, made_at = catalog.table_metadata("shop.made")
        made = Path(made_at)
        assert schema.options["type"] == "object-table"
        assert (made / "inbox").is_dir()
        assert out["made"] == {"type": "ObjectTable", "location": made.as_uri(), "rows": []}
        response = httpx.get(
            f"{server.base}/v1/paimon/databases/shop/tables/docs",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        assert response.json()["path"] == location.as_uri()
    finally:
        catalog.close()


@pytest.mark.s3
def test_pypaimon_object_table_on_s3(vending: VendingRig, pypaimon_python: Path) -> None:
    """pypaimon's object-table reader on an S3 warehouse, with no storage keys of its own: the service's
    path stays ``s3://...`` and the reader lists the objects with the credentials the service vends."""
    run_pypaimon(CREATE_OBJECT_TABLE, vending.server.base, vending.writer, python=pypaimon_python)
    catalog = paimon_meta.connect(vending.db, vending.warehouse, **vending.moto.options())
    try:
        location = catalog.table_location("shop", "docs")
    finally:
        catalog.close()
    assert location.startswith(f"s3://{vending.bucket}/")
    prefix = location.removeprefix(f"s3://{vending.bucket}/").rstrip("/")
    client = vending.moto.client()
    client.put_object(Bucket=vending.bucket, Key=f"{prefix}/a.txt", Body=b"hello")
    client.put_object(Bucket=vending.bucket, Key=f"{prefix}/sub/b.bin", Body=b"\x00\x01\x02")
    for token in (vending.writer, vending.reader):
        out = run_pypaimon(READ_OBJECTS, vending.server.base, token, python=pypaimon_python)
        assert out == {"type": "ObjectTable", "location": location, "rows": ROWS}, out
