"""An Iceberg table (``type=iceberg-table``, kept as metadata) created and got by unmodified pypaimon 2.1.0
through a real ``paimon-meta serve``: everything pypaimon's ``IcebergTable`` exposes comes back as created
(its type, the uuid from the response's ``id``, the location, fields with ids, types and nullability,
partition keys, no primary keys, options, comment), the listing names it, and reading it is pypaimon's own
refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

import paimon_meta
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

#: argv: uri token. Creates ``shop.ice``, prints what pypaimon's IcebergTable holds after a get.
PYPAIMON_ICEBERG = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

cat = CatalogFactory.create({"metastore": "rest", "uri": sys.argv[1], "warehouse": "paimon",
                             "token.provider": "bear", "token": sys.argv[2]})
cat.create_database("shop", True)
schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("p", pa.string()), ("v", pa.string())])
cat.create_table("shop.ice", Schema.from_pyarrow_schema(
    schema, partition_keys=["p"], options={"type": "iceberg-table", "write.format.default": "parquet"},
    comment="events in Iceberg"), False)
t = cat.get_table("shop.ice")
try:
    t.new_read_builder()
    read = None
except NotImplementedError as e:
    read = str(e)
print(json.dumps({
    "type": type(t).__name__, "uuid": t.uuid(), "location": t.location(), "comment": t.comment,
    "fields": [[f.id, f.name, str(f.type)] for f in t.fields], "partition_keys": t.partition_keys,
    "primary_keys": t.primary_keys, "options": t.options(), "schema_id": t.table_schema.id,
    "tables": cat.list_tables("shop"), "read": read,
}))
"""


def test_pypaimon_gets_an_iceberg_table_as_created(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path, pypaimon_python: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        token = make_principal(catalog, "etl", [("admin", None, None)])
        server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        got = run_pypaimon(PYPAIMON_ICEBERG, server.base, token, python=pypaimon_python)
        row, schema, location = catalog.table_metadata("shop.ice")
        assert got["type"] == "IcebergTable"
        assert got["uuid"] == str(row.table_uuid)
        assert got["location"] == location.rstrip("/")
        assert got["comment"] == "events in Iceberg"
        assert got["fields"] == [[0, "k", "BIGINT NOT NULL"], [1, "p", "STRING"], [2, "v", "STRING"]]
        assert (got["partition_keys"], got["primary_keys"], got["schema_id"]) == (["p"], [], 0)
        assert got["options"]["type"] == "iceberg-table"
        assert got["options"]["write.format.default"] == "parquet"
        assert got["options"]["path"] == location  # pypaimon puts the response's path there
        assert got["tables"] == ["ice"]
        assert got["read"] is not None and "IcebergTable does not support read" in got["read"]
        assert schema.options["type"] == "iceberg-table"
    finally:
        catalog.close()
