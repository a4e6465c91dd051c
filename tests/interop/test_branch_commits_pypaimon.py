"""Commits on a branch through a real ``paimon-meta serve``: unmodified pypaimon 2.1.0 creates a branch from
a tag, writes and commits on it as ``shop.t$branch_b1`` (GET table, GET snapshot and POST commit of that
object name), reads it back with main unchanged, then fast-forwards main to it and reads main; the
metastore recorded the branch's snapshots under its own pointer and events, under the table's lock;
Java 0.9 and 1.0 read the branch we wrote. One server, one snippet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.metastore.branches import branch_pointers
from paimon_meta.table.paths import branch_path
from paimon_meta.table.snapshots import SnapshotManager
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.interop.canonical import assert_same_rows, canonical_java
from tests.interop.java_env import VERSIONS, JavaHarness

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

#: argv: uri token. Prints what each step read.
ON_BRANCH = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

cat = CatalogFactory.create({"metastore": "rest", "uri": sys.argv[1], "warehouse": "paimon",
                             "token.provider": "bear", "token": sys.argv[2]})
schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])
cat.create_database("shop", False)
options = {"bucket": "1", "bucket-key": "k"}
cat.create_table("shop.t", Schema.from_pyarrow_schema(schema, options=options), False)

def commit(name, batch):
    wb = cat.get_table(name).new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.Table.from_pylist([{"k": k, "v": "v%d" % k} for k in batch], schema=schema))
    c.commit(w.prepare_commit())
    w.close(); c.close()

def keys(name):
    rb = cat.get_table(name).new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist())

def refusal(call):
    try:
        call()
    except Exception as e:
        return type(e).__name__
    return None

out = {}
commit("shop.t", [1, 2])
commit("shop.t", [3])
cat.create_tag("shop.t", "first", snapshot_id=1)
cat.create_branch("shop.t", "b1", "first")
commit("shop.t$branch_b1", [10])
commit("shop.t$branch_b1", [11])
out["branch"] = keys("shop.t$branch_b1")
out["main"] = keys("shop.t")
out["branch_snapshot"] = cat.load_snapshot("shop.t$branch_b1").snapshot.id
out["no_branch"] = refusal(lambda: cat.get_table("shop.t$branch_nope"))
cat.fast_forward("shop.t", "b1")
out["main_forwarded"] = keys("shop.t")
commit("shop.t", [20])
out["main_after"] = keys("shop.t")
out["branch_after"] = keys("shop.t$branch_b1")
print(json.dumps(out))
"""


def _rows(*keys: int) -> list[dict[str, Any]]:
    return [{"k": k, "v": f"v{k}"} for k in keys]


def test_pypaimon_commits_on_a_branch_and_java_reads_it(
    service_processes: list[ServiceProcess],
    clean_db: str,
    tmp_path: Path,
    pypaimon_python: Path,
    java_harnesses: dict[str, JavaHarness],
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        token = make_principal(catalog, "etl", [("write", "shop", None), ("admin", None, None)])
        server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        out = run_pypaimon(ON_BRANCH, server.base, token, python=pypaimon_python)
        assert out["branch"] == [1, 2, 10, 11]
        assert out["main"] == [1, 2, 3]  # main unchanged by the branch's commits
        assert out["branch_snapshot"] == 3  # the tag's snapshot 1, then the branch's 2 and 3
        assert out["no_branch"] == "TableNotExistException"  # 404 BRANCH
        assert out["main_forwarded"] == [1, 2, 10, 11]
        assert out["main_after"] == [1, 2, 10, 11, 20]
        assert out["branch_after"] == [1, 2, 10, 11]

        row = catalog.table_row("shop.t")
        location = catalog.location_of(row)
        io = catalog.table_file_io(location)
        assert SnapshotManager(io, branch_path(location, "b1")).list_snapshot_ids() == [1, 2, 3]
        # main: 1, 2, 3 -> fast-forward keeps 1, takes the branch's 2, 3 (timeline 1), then 4
        assert (row.latest_snapshot_id, row.timeline) == (4, 1)
        with catalog.engine.connect() as conn:
            assert [
                (p.branch, p.latest_snapshot_id, p.timeline) for p in branch_pointers(conn, row.table_id)
            ] == [("b1", 3, 0)]
            published = conn.execute(
                text(
                    "SELECT branch, timeline, snapshot_id, event_type, principal FROM paimon_commit_events "
                    "WHERE table_id = :t AND event_type IN ('snapshot_published', 'external') "
                    "ORDER BY event_id"
                ),
                {"t": row.table_id},
            ).all()
            pending = conn.execute(
                text(
                    "SELECT count(*) FROM paimon_commit_events p WHERE p.table_id = :t "
                    "AND p.event_type = 'prepared' AND NOT EXISTS (SELECT 1 FROM paimon_commit_events e "
                    "WHERE e.commit_id = p.commit_id AND e.event_type = 'snapshot_published')"
                ),
                {"t": row.table_id},
            ).scalar_one()
        assert [tuple(r) for r in published] == [
            ("main", 0, 1, "snapshot_published", "etl"),
            ("main", 0, 2, "snapshot_published", "etl"),
            ("b1", 0, 2, "snapshot_published", "etl"),
            ("b1", 0, 3, "snapshot_published", "etl"),
            # the fast-forward's reconcile records main's new 2 and 3 (the branch's) as external
            ("main", 1, 2, "external", None),
            ("main", 1, 3, "external", None),
            ("main", 1, 4, "snapshot_published", "etl"),
        ]
        assert pending == 0  # every prepared commit published

        for version in VERSIONS:
            script = tmp_path / f"read-{version}.jsonl"
            script.write_text(
                json.dumps({"op": "read", "table": location, "options": {"branch": "b1"}}) + "\n"
            )
            answer = java_harnesses[version].run(["script", str(script)])
            rows = json.loads(answer.strip().split("\n")[-1])["rows"]
            assert_same_rows(_rows(1, 2, 10, 11), canonical_java(rows), f"Java {version} reads b1")
    finally:
        catalog.close()
