"""Unmodified pypaimon 2.1.0 against a real ``paimon-meta serve``: what it can call of the partition
lifecycle and snapshots (``create_partitions``, ``list_partitions_paged``, ``drop_partitions`` (its own
truncate commit through ``POST .../commit``), ``load_snapshot``), in one snippet; then the service's
own ``dropPartitions`` over HTTP on the same server, whose OVERWRITE snapshot our reader and Java
Paimon 0.9/1.0 read as pypaimon does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import paimon_meta
from paimon_meta.model.snapshot import CommitKind
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.interop.canonical import assert_java_reads_as_we_do
from tests.interop.java_env import JavaHarness

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

SNIPPET = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

uri, token = sys.argv[1], sys.argv[2]
cat = CatalogFactory.create({"metastore": "rest", "uri": uri, "warehouse": "paimon",
                             "token.provider": "bear", "token": token})

def rows():
    rb = cat.get_table("pdb.t").new_read_builder()
    return sorted(r["id"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist())

def listing():
    pages, token = [], None
    while True:
        page = cat.list_partitions_paged("pdb.t", max_results=2, page_token=token)
        pages.append([[p.spec, p.record_count, p.file_count, p.done, p.created_by] for p in page.elements])
        token = page.next_page_token
        if not token:
            return pages

cat.create_database("pdb", False)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string()), ("v", pa.string())])
cat.create_table("pdb.t", Schema.from_pyarrow_schema(
    schema, partition_keys=["day"], options={"bucket": "1", "bucket-key": "id"}), False)
wb = cat.get_table("pdb.t").new_batch_write_builder()
w, c = wb.new_write(), wb.new_commit()
data = {"id": [1, 2, 3, 4], "day": ["d1", "d1", "d2", "d3"], "v": list("abcd")}
w.write_arrow(pa.table(data, schema=schema))
c.commit(w.prepare_commit())
w.close(); c.close()

out = {}
cat.create_partitions("pdb.t", [{"day": "d4"}, {"day": "d1"}])
try:
    cat.create_partitions("pdb.t", [{"day": "d1"}], ignore_if_exists=False)
    out["strict"] = None
except Exception as e:
    out["strict"] = type(e).__name__
out["before"] = listing()
cat.drop_partitions("pdb.t", [{"day": "d1"}])
snap = cat.load_snapshot("pdb.t")
out["snapshot"] = [snap.snapshot.id, snap.snapshot.commit_kind, snap.record_count, snap.file_count]
out["after"] = listing()
out["rows"] = rows()
print(json.dumps(out))
"""


def test_pypaimon_partitions_and_the_service_drop(
    service_processes: list[ServiceProcess],
    clean_db: str,
    tmp_path: Path,
    pypaimon_python: Path,
    java_harnesses: dict[str, JavaHarness],
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        token = make_principal(catalog, "etl", [("admin", None, None)])
        server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        out: dict[str, Any] = run_pypaimon(SNIPPET, server.base, token, python=pypaimon_python)

        assert out["strict"] == "IllegalStateError"  # 409 PARTITION, as pypaimon maps it
        assert out["before"] == [
            [[{"day": "d1"}, 2, 1, False, None], [{"day": "d2"}, 1, 1, False, None]],
            [[{"day": "d3"}, 1, 1, False, None], [{"day": "d4"}, 0, 0, False, "etl"]],
        ]
        # pypaimon's drop is its own OVERWRITE commit; the listing follows its statistics.
        assert out["snapshot"] == [2, "OVERWRITE", 2, 2]
        assert out["after"] == [
            [[{"day": "d2"}, 1, 1, False, None], [{"day": "d3"}, 1, 1, False, None]],
            [[{"day": "d4"}, 0, 0, False, "etl"]],
        ]
        assert out["rows"] == [3, 4]

        # The service's own drop on the same server: one OVERWRITE snapshot, read back by us and Java.
        base = f"{server.base}/v1/paimon/databases/pdb/tables/t"
        headers = {"Authorization": f"Bearer {token}"}
        answer = httpx.post(
            f"{base}/partitions/drop",
            json={"partitionSpecs": [{"day": "d2"}, {"day": "d4"}]},
            headers=headers,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"dropped": [{"day": "d2"}, {"day": "d4"}], "missing": []}
        version = httpx.get(f"{base}/snapshots/LATEST", headers=headers).json()["snapshot"]
        assert (version["id"], version["commitKind"]) == (3, "OVERWRITE")

        table = catalog.get_table("pdb.t")
        latest = table.latest_snapshot()
        assert latest is not None and latest.id == 3 and latest.commit_kind is CommitKind.OVERWRITE
        rb = table.new_read_builder()
        assert rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("id").to_pylist() == [4]
        for java_version, harness in java_harnesses.items():
            [read] = harness.read_tables([table.path])
            assert_java_reads_as_we_do(read, table.path, java_version)
    finally:
        catalog.close()
