"""Benchmark: the operator console's pages (issue 27, part 2: "works at 1,000 tables and 100,000 events")
through a real ``serve`` over HTTP, signed in as a browser is (the session cookie).

Seeds ``--tables`` tables (registry rows and schema files, through the library), one of them (``hot``)
with ``--snapshots`` real snapshots, then ``--events`` commit events spread over the tables (inserted
with SQL for speed: prepared, conflict_checked, snapshot_published per commit, with a retried and a
failed attempt now and then), ``--events // 10`` lock events and ``--events // 100`` maintenance runs.
Times each page ``--requests`` times (after one warm-up) for an admin (everything visible) and for a
principal that may read one table (the overview's grant filter reads every registry row to fill its
page: the worst case). Reports p50 and p99 per page and principal, with the load average.

Usage::

    python bench/bench_console.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                  [--tables 1000] [--events 100000] [--snapshots 60] [--requests 20]
                                  [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
from sqlalchemy import text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import load, scratch_database  # noqa: E402
from bench_rest_service import servers  # noqa: E402
from paged_walk import page_ms  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.catalog.metastore import MetastoreCatalog  # noqa: E402
from tests.fixtures.service import make_principal  # noqa: E402

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
HOT = "big.hot"

# Per commit i: prepared, conflict_checked, snapshot_published (a retried attempt every 7th commit, a
# failed commit every 50th instead of the publish); snapshot ids far above the real ones of big.hot.
_COMMIT_EVENTS = text(
    "INSERT INTO paimon_commit_events (commit_id, table_id, table_identifier, event_type, attempt,"
    " commit_user, commit_identifier, commit_kind, snapshot_id, payload, duration_ms, principal, created_at)"
    " SELECT md5(c.i::text)::uuid, t.table_id, t.ident, e.type, e.attempt, 'bench-user-' || (c.i % 16),"
    "  c.i, 'APPEND', CASE WHEN e.type = 'snapshot_published' THEN 1000000 + c.i END,"
    "  CASE e.type WHEN 'prepared' THEN '{\"source\": \"rest\"}'::jsonb"
    '   WHEN \'retried\' THEN \'{"reason": "conflict: latest changed", "wait_ms": 12.5}\'::jsonb'
    "   WHEN 'failed' THEN '{\"reason\": \"lock timeout\"}'::jsonb ELSE '{}'::jsonb END,"
    "  3.5, 'writer', now() - make_interval(secs => (:commits - c.i) * 0.5)"
    " FROM generate_series(1, :commits) AS c(i)"
    " JOIN (SELECT row_number() OVER (ORDER BY table_id) - 1 AS n, table_id,"
    "  database_name || '.' || table_name AS ident FROM paimon_tables) t ON t.n = c.i % :tables"
    " CROSS JOIN LATERAL (VALUES ('prepared', 1), ('conflict_checked', 1),"
    "  (CASE WHEN c.i % 50 = 0 THEN 'failed' ELSE 'snapshot_published' END, 1),"
    "  (CASE WHEN c.i % 7 = 0 THEN 'retried' END, 1)) AS e(type, attempt)"
    " WHERE e.type IS NOT NULL ORDER BY c.i"
)
_LOCK_EVENTS = text(
    "INSERT INTO paimon_lock_events (lock_id, event_type, owner, fencing_token, hostname, pid, wait_ms)"
    " SELECT :prefix || 'big.t' || lpad((i % :tables)::text, 5, '0'),"
    "  CASE WHEN i % 2 = 0 THEN 'acquired' ELSE 'released' END, 'bench-owner-' || (i % 16), i, 'host', 1,"
    "  CASE WHEN i % 2 = 0 THEN (i % 40)::float8 END FROM generate_series(1, :n) AS s(i)"
)
_MAINTENANCE = text(
    "INSERT INTO paimon_maintenance_events (run_id, table_id, table_identifier, operation, event_type,"
    " operator, dry_run, payload, principal)"
    " SELECT md5('run' || r.i)::uuid, t.table_id, t.ident, 'expire_snapshots', e.type, 'bench@host', false,"
    "  '{}'::jsonb, 'ops' FROM generate_series(1, :n) AS r(i)"
    " JOIN (SELECT row_number() OVER (ORDER BY table_id) - 1 AS n, table_id,"
    "  database_name || '.' || table_name AS ident FROM paimon_tables) t ON t.n = r.i % :tables"
    " CROSS JOIN (VALUES ('started'), ('finished')) AS e(type)"
)


def seed(catalog: MetastoreCatalog, tables: int, events: int, snapshots: int) -> dict[str, float]:
    """The tables, the hot table's snapshots, then the logs; seconds each step took."""
    took: dict[str, float] = {}
    t0 = time.perf_counter()
    for i in range(tables - 1):
        catalog.create_table(f"big.t{i:05d}", SCHEMA)
    hot = catalog.create_table(HOT, SCHEMA)
    took["tables_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(snapshots):
        wb = hot.new_batch_write_builder()
        write, commit = wb.new_write(), wb.new_commit()
        write.write_arrow(pa.table({"k": pa.array([i, i + 1], pa.int64()), "v": ["a", "b"]}))
        commit.commit(write.prepare_commit())
        write.close()
    took["snapshots_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with catalog.engine.begin() as conn:
        # ~3.16 events per commit (3, a retried one every 7th)
        conn.execute(_COMMIT_EVENTS, {"commits": int(events / 3.143), "tables": tables})
        prefix = f"{catalog.registry.catalog_key}."
        conn.execute(_LOCK_EVENTS, {"n": events // 10, "tables": tables, "prefix": prefix})
        conn.execute(_MAINTENANCE, {"n": events // 200, "tables": tables})
    with catalog.engine.begin() as conn:
        conn.execute(text("ANALYZE"))
        took["commit_events"] = conn.execute(text("SELECT count(*) FROM paimon_commit_events")).scalar_one()
    took["events_s"] = time.perf_counter() - t0
    return {k: round(v, 1) for k, v in took.items()}


def sign_in(client: httpx.Client, token: str) -> None:
    answer = client.post("/ui/login", data={"token": token})
    assert answer.status_code == 303, answer.text
    client.cookies.set("paimon_meta_console", token)


def time_page(client: httpx.Client, path: str, requests: int) -> dict[str, Any]:
    first = client.get(path)
    first.raise_for_status()
    times = []
    for _ in range(requests):
        t0 = time.perf_counter()
        answer = client.get(path)
        times.append(time.perf_counter() - t0)
        answer.raise_for_status()
    return {"p50_ms": page_ms(times, 0.5), "p99_ms": page_ms(times, 0.99), "bytes": len(first.content)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--snapshots", type=int, default=60)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"tables": args.tables, "events": args.events, "requests": args.requests}
    mid = f"t{args.tables // 2:05d}"
    with tempfile.TemporaryDirectory() as tmp, scratch_database(args.url) as url:
        warehouse = str(Path(tmp) / "warehouse")
        catalog = paimon_meta.connect(url, warehouse)
        try:
            results["seed"] = seed(catalog, args.tables, args.events, args.snapshots)
            print("seeded", results["seed"], flush=True)
            tokens = {
                "admin": make_principal(catalog, "admin", [("admin", None, None)]),
                "one_table": make_principal(catalog, "one", [("read", "big", mid)]),
            }
        finally:
            catalog.close()
        pages = {
            "overview": "/ui/",
            "overview_page_10": f"/ui/?after=big.t{args.tables * 9 // 20:05d}",
            "table_hot": "/ui/tables/big/hot",
            "table_with_events": f"/ui/tables/big/{mid}",
            "table_older_commits": f"/ui/tables/big/{mid}?commits_before={args.events // 2}",
            "locks": "/ui/locks",
            "maintenance": "/ui/maintenance",
            "live": "/ui/live",
        }
        with servers(url, warehouse, Path(tmp), 1) as (server,):
            for who, token in tokens.items():
                with httpx.Client(base_url=server.uri, timeout=60) as client:
                    sign_in(client, token)
                    for name, path in pages.items():
                        if who == "one_table" and name in ("table_hot", "overview_page_10"):
                            continue
                        results[f"{name}/{who}"] = time_page(client, path, args.requests)
                        print(name, who, results[f"{name}/{who}"], flush=True)
    results["load"] = load()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
