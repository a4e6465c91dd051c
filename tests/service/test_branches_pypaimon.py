"""Unmodified pypaimon 2.1.0 manages branches through a real ``paimon-meta serve``: create from a tag and
empty, list, rename, drop, fast-forward, each refusal as the exception pypaimon maps it to (404 ``BRANCH``
-> BranchNotExistException, 409 -> BranchAlreadyExistException, 404 ``TAG`` -> TagNotExistException,
403 -> TableNoPermissionException). One server, one snippet."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.table.paths import branch_path
from paimon_meta.table.snapshots import SnapshotManager
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

#: argv: uri admin-token reader-token. Prints what each step answered.
BRANCHES = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

def rest_catalog(token):
    return CatalogFactory.create({"metastore": "rest", "uri": sys.argv[1], "warehouse": "paimon",
                                  "token.provider": "bear", "token": token})

def refusal(call):
    try:
        call()
    except Exception as e:
        return type(e).__name__
    return None

def keys(table):
    rb = table.new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist())

cat, reader = rest_catalog(sys.argv[2]), rest_catalog(sys.argv[3])
cat.create_database("shop", False)
schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])
options = {"bucket": "1", "bucket-key": "k"}
cat.create_table("shop.t", Schema.from_pyarrow_schema(schema, options=options), False)
def commit(batch):
    wb = cat.get_table("shop.t").new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.Table.from_pylist([{"k": k, "v": str(k)} for k in batch], schema=schema))
    c.commit(w.prepare_commit())
    w.close(); c.close()

commit([1, 2])
commit([3])
cat.create_tag("shop.t", "first", snapshot_id=1)
out = {}
cat.create_branch("shop.t", "b1", "first")
cat.create_branch("shop.t", "empty")
out["listed"] = cat.list_branches("shop.t")
out["reader_listed"] = reader.list_branches("shop.t")
out["reader_create"] = refusal(lambda: reader.create_branch("shop.t", "mine"))
out["reader_forward"] = refusal(lambda: reader.fast_forward("shop.t", "b1"))
out["taken"] = refusal(lambda: cat.create_branch("shop.t", "b1"))
out["no_tag"] = refusal(lambda: cat.create_branch("shop.t", "b2", "nope"))
out["main"] = refusal(lambda: cat.create_branch("shop.t", "main"))
out["no_table"] = refusal(lambda: cat.list_branches("shop.nope"))
cat.rename_branch("shop.t", "b1", "b2")
out["renamed"] = cat.list_branches("shop.t")
out["rename_missing"] = refusal(lambda: cat.rename_branch("shop.t", "b1", "b3"))
out["rename_taken"] = refusal(lambda: cat.rename_branch("shop.t", "b2", "empty"))
out["drop_missing"] = refusal(lambda: cat.drop_branch("shop.t", "b1"))
out["forward_missing"] = refusal(lambda: cat.fast_forward("shop.t", "nope"))
out["before_forward"] = keys(cat.get_table("shop.t"))
cat.fast_forward("shop.t", "b2")
out["after_forward"] = keys(cat.get_table("shop.t"))
commit([9])  # main goes on from the branch's snapshot: snapshot 2 again, in the new timeline
out["after_commit"] = keys(cat.get_table("shop.t"))
cat.drop_branch("shop.t", "empty")
out["dropped"] = cat.list_branches("shop.t")
print(json.dumps(out))
"""


def test_pypaimon_manages_branches(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path, pypaimon_python: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        admin = make_principal(catalog, "etl", [("admin", None, None)])
        reader = make_principal(catalog, "analyst", [("read", "shop", None)])
        server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        out = run_pypaimon(BRANCHES, server.base, admin, reader, python=pypaimon_python)
        assert out["listed"] == out["reader_listed"] == ["b1", "empty"]
        assert out["reader_create"] == out["reader_forward"] == "TableNoPermissionException"
        assert out["taken"] == "BranchAlreadyExistException"
        assert out["no_tag"] == "TagNotExistException"
        assert out["main"] == "IllegalArgumentError"  # 400: 'main' is reserved
        assert out["no_table"] == "TableNotExistException"
        assert out["renamed"] == ["b2", "empty"]
        assert out["rename_missing"] == out["drop_missing"] == out["forward_missing"]
        assert out["rename_missing"] == "BranchNotExistException"
        assert out["rename_taken"] == "BranchAlreadyExistException"
        # the branch was made from snapshot 1: main is that snapshot again (Java's fast-forward)
        assert (out["before_forward"], out["after_forward"]) == ([1, 2, 3], [1, 2])
        assert out["after_commit"] == [1, 2, 9]
        assert out["dropped"] == ["b2"]
        location = catalog.location_of(catalog.table_row("shop.t"))
        io = catalog.table_file_io(location)
        assert SnapshotManager(io, branch_path(location, "b2")).list_snapshot_ids() == [1]
        assert SnapshotManager(io, location).list_snapshot_ids() == [1, 2]
        assert (catalog.table_row("shop.t").latest_snapshot_id, catalog.table_row("shop.t").timeline) == (
            2,
            1,
        )
        with catalog.engine.connect() as conn:
            runs = conn.execute(
                text(
                    "SELECT operation, principal FROM paimon_maintenance_events"
                    " WHERE event_type = 'finished' AND operation LIKE '%branch' ORDER BY event_id"
                )
            ).all()
        assert [tuple(r) for r in runs] == [
            ("create_branch", "etl"),
            ("create_branch", "etl"),
            ("rename_branch", "etl"),
            ("fast_forward_branch", "etl"),
            ("drop_branch", "etl"),
        ]
    finally:
        catalog.close()
