"""Data-evolution tables (``data-evolution.enabled``, with ``row-tracking.enabled``) through a real
``paimon-meta serve``: unmodified pypaimon 2.1.0 creates one, appends rows, updates a column by ``_ROW_ID``
(files holding that column only) and reads the rows stitched back, every commit through ``POST .../commit``
(the snapshot pypaimon builds, row ids included, published as it is). What paimon_meta itself does not do is
refused naming the option and why: its reader (column subsets stitched by row id) and its committer of
messages (``POST .../commit-messages``: the row ids a commit assigns), before anything is written."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import paimon_meta
from paimon_meta.errors import UnsupportedError
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.ops.helpers import SCHEMA, prepare
from tests.service.helpers import auth, messages_body

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

#: argv: uri token. ``shop.de`` created, 3 rows appended, column ``v`` of two rows updated by row id;
#: prints pypaimon's reads after each step.
PYPAIMON_DATA_EVOLUTION = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

cat = CatalogFactory.create({"metastore": "rest", "uri": sys.argv[1], "warehouse": "paimon",
                             "token.provider": "bear", "token": sys.argv[2]})
schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string()), ("w", pa.string())])
cat.create_database("shop", True)
options = {"bucket": "-1", "row-tracking.enabled": "true", "data-evolution.enabled": "true"}
cat.create_table("shop.de", Schema.from_pyarrow_schema(schema, options=options), False)

def rows():
    rb = cat.get_table("shop.de").new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist(), key=lambda r: r["k"])

wb = cat.get_table("shop.de").new_batch_write_builder()
w, c = wb.new_write(), wb.new_commit()
first = [{"k": i, "v": "v%d" % i, "w": "w%d" % i} for i in range(3)]
w.write_arrow(pa.Table.from_pylist(first, schema=schema))
c.commit(w.prepare_commit())
w.close(); c.close()
out = {"appended": rows()}
wb = cat.get_table("shop.de").new_batch_write_builder()
update = wb.new_update().with_update_type(["v"])
changes = pa.table({"_ROW_ID": pa.array([0, 2], pa.int64()), "v": ["new0", "new2"]})
c = wb.new_commit()
c.commit(update.update_by_arrow_with_row_id(changes))
c.close()
out["updated"] = rows()
print(json.dumps(out))
"""


def test_data_evolution_table_through_pypaimon_and_what_we_refuse(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path, pypaimon_python: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        token = make_principal(catalog, "etl", [("admin", None, None)])
        server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        out = run_pypaimon(PYPAIMON_DATA_EVOLUTION, server.base, token, python=pypaimon_python)
        assert out["appended"] == [{"k": i, "v": f"v{i}", "w": f"w{i}"} for i in range(3)]
        assert out["updated"] == [
            {"k": 0, "v": "new0", "w": "w0"},
            {"k": 1, "v": "v1", "w": "w1"},
            {"k": 2, "v": "new2", "w": "w2"},
        ]
        table = catalog.get_table("shop.de")
        latest = table.snapshot_manager.latest_snapshot()
        assert latest is not None and latest.id == 2 and latest.next_row_id == 3  # pypaimon's row ids
        # our reader refuses, naming the option and why
        with pytest.raises(UnsupportedError, match=r"data-evolution\.enabled.*stitch column subsets"):
            rb = table.new_read_builder()
            rb.new_read().to_arrow(rb.new_scan().plan().splits())

        # so does our writer (it checks what a read of the table would need first)
        with pytest.raises(UnsupportedError, match=r"data-evolution\.enabled.*stitch column subsets"):
            table.new_batch_write_builder().new_write()
        # messages for the table are refused before anything is written (a plain twin table's messages)
        twin = catalog.create_table("shop.twin", SCHEMA, options={"bucket": "-1"})
        body = messages_body(prepare(twin, [1, 2], user="rust"), "rust", 1, table_buckets=-1)
        refused = httpx.post(
            f"{server.base}/v1/paimon/databases/shop/tables/de/commit-messages",
            json=body,
            headers=auth(token),
            timeout=30,
        )
        assert refused.status_code == 501, refused.text
        message = refused.json()["message"]
        assert "row-tracking.enabled=true" in message and "firstRowId" in message, message
        assert catalog.get_table("shop.de").snapshot_manager.list_snapshot_ids() == [1, 2]
    finally:
        catalog.close()
