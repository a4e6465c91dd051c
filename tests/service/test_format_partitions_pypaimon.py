"""Format tables with catalog-managed partitions (``metastore.partitioned-table``) through unmodified
pypaimon 2.1.0 against a real ``paimon-meta serve``: pypaimon creates the table, writes its files and
registers partitions; lists them with the statistics their directories hold (record count unknown, -1);
then, over HTTP (pypaimon refuses ``drop_partitions`` on a format table itself and has no mark-done),
the spec's drop and mark done. A format table without the option keeps its partitions in its
directories: the catalog refuses to list them (501 naming the option), as pypaimon expects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import paimon_meta
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

SNIPPET = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

uri, token = sys.argv[1], sys.argv[2]
cat = CatalogFactory.create({"metastore": "rest", "uri": uri, "warehouse": "paimon",
                             "token.provider": "bear", "token": token})
cat.create_database("fdb", True)
schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
options = {"type": "format-table", "file.format": "parquet", "metastore.partitioned-table": "true"}
cat.create_table("fdb.f", Schema.from_pyarrow_schema(schema, partition_keys=["day"], options=options), False)
wb = cat.get_table("fdb.f").new_batch_write_builder()
w, c = wb.new_write(), wb.new_commit()
w.write_arrow(pa.table({"id": [1, 2, 3], "day": ["d1", "d1", "d2"]}, schema=schema))
c.commit(w.prepare_commit())
w.close(); c.close()
out = {}
cat.create_partitions("fdb.f", [{"day": "d1"}, {"day": "d2"}, {"day": "d3"}])
try:
    cat.create_partitions("fdb.f", [{"day": "d1"}], ignore_if_exists=False)
    out["strict"] = None
except Exception as e:
    out["strict"] = type(e).__name__
pages, token = [], None
while True:
    page = cat.list_partitions_paged("fdb.f", max_results=2, page_token=token)
    pages.append([[p.spec, p.record_count, p.file_count, p.file_size_in_bytes > 0, p.created_by]
                  for p in page.elements])
    token = page.next_page_token
    if not token:
        break
out["pages"] = pages
rb = cat.get_table("fdb.f").new_read_builder()
out["rows"] = sorted(r["id"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist())
print(json.dumps(out))
"""


def test_format_table_partitions_through_pypaimon(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path, pypaimon_python: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        token = make_principal(catalog, "etl", [("admin", None, None)])
        server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        out: dict[str, Any] = run_pypaimon(SNIPPET, server.base, token, python=pypaimon_python)
        assert out["strict"] == "IllegalStateError"  # 409 PARTITION, as pypaimon maps it
        assert out["pages"] == [
            [[{"day": "d1"}, -1, 1, True, "etl"], [{"day": "d2"}, -1, 1, True, "etl"]],
            [[{"day": "d3"}, -1, 0, False, "etl"]],
        ]
        assert out["rows"] == [1, 2, 3]

        base = f"{server.base}/v1/paimon/databases/fdb/tables/f"
        headers = {"Authorization": f"Bearer {token}"}
        marked = httpx.post(f"{base}/partitions/mark", json={"specs": [{"day": "d1"}]}, headers=headers)
        assert marked.status_code == 200, marked.text
        dropped = httpx.post(
            f"{base}/partitions/drop",
            json={"partitionSpecs": [{"day": "d3"}, {"day": "d9"}]},
            headers=headers,
        )
        assert dropped.status_code == 200, dropped.text
        assert dropped.json() == {"dropped": [{"day": "d3"}], "missing": [{"day": "d9"}]}
        listed = httpx.get(f"{base}/partitions", headers=headers).json()["partitions"]
        assert [(p["spec"], p["done"]) for p in listed] == [({"day": "d1"}, True), ({"day": "d2"}, False)]
        by_names = httpx.post(
            f"{base}/partitions/list-by-names", json={"specs": [{"day": "d2"}]}, headers=headers
        ).json()["partitions"]
        assert [(p["spec"], p["fileCount"], p["recordCount"]) for p in by_names] == [({"day": "d2"}, 1, -1)]
        # the _SUCCESS mark is no data: the table still reads its three rows
        assert (Path(warehouse) / "fdb.db" / "f" / "day=d1" / "_SUCCESS").exists()

        # without the option: its partitions are its directories', not the catalog's
        plain = {
            "identifier": {"database": "fdb", "object": "g"},
            "schema": {
                "fields": [
                    {"id": 0, "name": "id", "type": "BIGINT"},
                    {"id": 1, "name": "day", "type": "STRING"},
                ],
                "partitionKeys": ["day"],
                "options": {"type": "format-table"},
            },
        }
        assert (
            httpx.post(
                f"{server.base}/v1/paimon/databases/fdb/tables", json=plain, headers=headers
            ).status_code
            == 200
        )
        refused = httpx.get(f"{server.base}/v1/paimon/databases/fdb/tables/g/partitions", headers=headers)
        assert refused.status_code == 501 and "metastore.partitioned-table" in refused.json()["message"]
    finally:
        catalog.close()
