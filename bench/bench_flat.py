"""Benchmark: the metastore paths of issue 39 item 5 on a metastore a year old, before and after, on the
same seeded database.

``seed`` (drops and creates ``--database``: never name one you did not create for it) migrates it with
the tree this runs from, creates ``--real`` Paimon tables in database ``big`` through the library (schema
files: what ``table-details`` reads), then seeds in SQL (tests/fixtures/seeded_log.py) ``--tables``
registry rows and ``--events`` commit events over 365 days (plus lock events and maintenance runs).
``measure`` times each path ``--requests`` times (after one warm-up) in-process through the app
(``TestClient``) as the admin principal the seed made, and prints p50/p99 with the load average.
``upgrade`` migrates the database with the tree this runs from (the "after" tree's migrations). ``fold``
times the metrics rollup's first fold of the whole log (``telemetry.rollup``, after the upgrade to 0027;
``measure``'s scrapes then fold only what came since). The
steps share their state (URL, warehouse, tokens) in ``$PAIMON_META_BENCH_FLAT_STATE``
(/tmp/paimon_meta_bench_flat).

Usage (before: main's tree; after: this branch's)::

    PYTHONPATH=<main> python bench/bench_flat.py seed --events 1000000 --tables 10000
    PYTHONPATH=<main> python bench/bench_flat.py measure --json before.json
    PYTHONPATH=<branch> python bench/bench_flat.py upgrade
    PYTHONPATH=<branch> python bench/bench_flat.py measure --json after.json
    python bench/bench_flat.py drop
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

STATE = Path(os.environ.get("PAIMON_META_BENCH_FLAT_STATE", "/tmp/paimon_meta_bench_flat"))
REPO = Path(__file__).resolve().parents[1]


def _admin(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _url(args: argparse.Namespace) -> str:
    return str(args.url.rsplit("/", 1)[0] + "/" + args.database)


def seed(args: argparse.Namespace) -> dict[str, Any]:
    import pyarrow as pa

    import paimon_meta
    from paimon_meta.db import migrate
    from tests.fixtures.service import make_principal

    # this tree's seeding, whichever tree PYTHONPATH names (the "before" tree has no such module)
    spec = importlib.util.spec_from_file_location("seeded_log", REPO / "tests/fixtures/seeded_log.py")
    assert spec is not None and spec.loader is not None
    seeded_log = importlib.util.module_from_spec(spec)
    sys.modules["seeded_log"] = seeded_log
    spec.loader.exec_module(seeded_log)
    seed_log = seeded_log.seed_log

    with psycopg.connect(_admin(args.url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(args.database)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.database)))
    url = _url(args)
    migrate.upgrade(url)
    STATE.mkdir(exist_ok=True)
    warehouse = STATE / "warehouse"
    catalog = paimon_meta.connect(url, str(warehouse))
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
    took: dict[str, Any] = {}
    try:
        t0 = time.perf_counter()
        for i in range(args.real):
            catalog.create_table(f"big.r{i:04d}", schema, options={"bucket": "2", "bucket-key": "k"})
        took["real_tables_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        seeded = seed_log(
            catalog.engine,
            catalog.registry.catalog_key,
            tables=args.tables,
            databases=args.databases,
            events=args.events,
            xids=args.xids,
        )
        took["seed_s"] = round(time.perf_counter() - t0, 1)
        admin = make_principal(catalog, "admin", [("admin", None, None)])
        five = make_principal(
            catalog, "five", [("read", "db0000", f"t{i * args.databases:06d}") for i in range(5)]
        )
    finally:
        catalog.close()
    state = {
        "url": url,
        "warehouse": str(warehouse),
        "admin": admin,
        "five": five,
        "first_xid": seeded.first_xid,
        "xids": seeded.xids,
        "commit_events": seeded.commit_events,
        "tables": args.tables,
        **took,
    }
    (STATE / "state.json").write_text(json.dumps(state))
    return state


def upgrade(args: argparse.Namespace) -> dict[str, Any]:
    from paimon_meta.db import migrate

    state = json.loads((STATE / "state.json").read_text())
    t0 = time.perf_counter()
    migrate.upgrade(state["url"])
    return {"upgrade_s": round(time.perf_counter() - t0, 1)}


def fold(args: argparse.Namespace) -> dict[str, Any]:
    """The metrics rollup's first fold of the whole seeded log (what follows the upgrade to 0027)."""
    from sqlalchemy import create_engine, text

    from paimon_meta.telemetry import rollup

    state = json.loads((STATE / "state.json").read_text())
    engine = create_engine(state["url"])
    t0 = time.perf_counter()
    report = rollup.fold(engine)
    took = time.perf_counter() - t0
    with engine.connect() as conn:
        sizes = {
            name: conn.execute(text(f"SELECT count(*) FROM {name}")).scalar_one()  # noqa: S608 - constants
            for name in (
                "paimon_metric_series",
                "paimon_metric_subjects",
                "paimon_metric_open_commits",
                "paimon_metric_open_locks",
            )
        }
    engine.dispose()
    return {
        "fold_s": round(took, 1),
        "events": report.events,
        "events_per_s": round(report.events / took),
        "caught_up": report.caught_up,
        "rows": sizes,
    }


def commit_ab(args: argparse.Namespace) -> dict[str, Any]:
    """The same one-row library commit to ``big.r0001`` on the seeded metastore and on an empty one
    (``<database>_empty``: made, migrated and given the same table if missing), alternated round by round
    (``--rounds`` of ``--requests`` commits after three warm-ups each): the p50 of each round and their
    ratios (issue 39: commit p50 within 1.1x of an empty metastore)."""
    import pyarrow as pa

    import paimon_meta
    from paimon_meta.db import migrate

    state = json.loads((STATE / "state.json").read_text())
    empty_db = state["url"].rsplit("/", 1)[-1] + "_empty"
    empty_url = state["url"].rsplit("/", 1)[0] + "/" + empty_db
    with psycopg.connect(_admin(args.url), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (empty_db,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(empty_db)))
    migrate.upgrade(empty_url)
    empty_warehouse = STATE / "warehouse-empty"
    catalogs = {
        "empty": paimon_meta.connect(empty_url, str(empty_warehouse)),
        "seeded": paimon_meta.connect(state["url"], state["warehouse"]),
    }
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
    rounds: dict[str, list[float]] = {"empty": [], "seeded": []}
    try:
        if "big.r0001" not in [f"big.{t}" for t in _tables(catalogs["empty"], "big")]:
            catalogs["empty"].create_table("big.r0001", schema, options={"bucket": "2", "bucket-key": "k"})
        for r in range(args.rounds):
            order = ("empty", "seeded") if r % 2 == 0 else ("seeded", "empty")
            for name in order:
                rounds[name].append(_commits(catalogs[name], args.requests)["p50_ms"])
                print(name, r, rounds[name][-1], flush=True)
    finally:
        for catalog in catalogs.values():
            catalog.close()
    ratios = sorted(s / e for s, e in zip(rounds["seeded"], rounds["empty"], strict=True))
    return {
        "empty_p50_ms": rounds["empty"],
        "seeded_p50_ms": rounds["seeded"],
        "ratios": [round(x, 3) for x in ratios],
        "median_ratio": round(ratios[len(ratios) // 2], 3),
        "load": round(os.getloadavg()[0], 2),
    }


def _tables(catalog: Any, database: str) -> list[str]:
    from paimon_meta.errors import NotFoundError

    try:
        return list(catalog.list_tables(database))
    except NotFoundError:  # the database does not exist yet
        return []


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    import paimon_meta
    from paimon_meta.service.app import create_app
    from paimon_meta.service.state import ServiceSettings, ServiceState

    state = json.loads((STATE / "state.json").read_text())
    catalog = paimon_meta.connect(state["url"], state["warehouse"])
    prefix = "/v1/" + catalog.name if hasattr(catalog, "name") else "/v1/paimon"
    first, xids = state["first_xid"], state["xids"]
    six_months = f"{first + xids // 2}.0.0"
    a_day = f"{first + xids - xids // 365}.0.0"
    # the hottest table: the seed gives half the commits to the first 1% of the tables by id, the real
    # ones created first (big.r0000 ...)
    hot = "big/tables/r0000"
    paths: dict[str, tuple[str, dict[str, str], str]] = {
        "feed 6 months back (admin)": ("/v1/paimon/events", {"pageToken": six_months}, "admin"),
        "feed 1 day back (admin)": ("/v1/paimon/events", {"pageToken": a_day}, "admin"),
        "feed 6 months back kind=failed": (
            "/v1/paimon/events",
            {"pageToken": six_months, "kind": "failed"},
            "admin",
        ),
        "feed 6 months back (5-table reader)": ("/v1/paimon/events", {"pageToken": six_months}, "five"),
        "feed 1 day back (5-table reader)": ("/v1/paimon/events", {"pageToken": a_day}, "five"),
        "audit events (hot table)": (f"/v1/paimon/databases/{hot}/events", {}, "admin"),
        "audit lock-events (hot table)": (f"/v1/paimon/databases/{hot}/lock-events", {}, "admin"),
        "audit maintenance-runs (hot table)": (f"/v1/paimon/databases/{hot}/maintenance-runs", {}, "admin"),
        "audit snapshot-recordings (hot table)": (
            f"/v1/paimon/databases/{hot}/snapshot-recordings",
            {"maxResults": "100"},
            "admin",
        ),
        "audit events, 30th page (hot table)": (
            f"/v1/paimon/databases/{hot}/events",
            {"deep": "30"},
            "admin",
        ),
        "audit lock-events, 30th page (hot table)": (
            f"/v1/paimon/databases/{hot}/lock-events",
            {"deep": "30"},
            "admin",
        ),
        "commits (hot table)": (f"/v1/paimon/databases/{hot}/commits", {}, "admin"),
        "commits, 30th page (hot table)": (f"/v1/paimon/databases/{hot}/commits", {"deep": "30"}, "admin"),
        "table-details (big, 100 tables)": ("/v1/paimon/databases/big/table-details", {}, "admin"),
        "console overview": ("/ui/", {}, "admin"),
        "console table page (hot)": ("/ui/tables/big/r0000", {}, "admin"),
        "console table page, older commits (hot)": ("/ui/tables/big/r0000", {"deep": "commits"}, "admin"),
        "console maintenance": ("/ui/maintenance", {}, "admin"),
        "console overview (5-table reader)": ("/ui/", {}, "five"),
        "console maintenance (5-table reader)": ("/ui/maintenance", {}, "five"),
        # the listings (issue 39: the grant filter read every row for a 5-table principal)
        "list databases (admin)": ("/v1/paimon/databases", {}, "admin"),
        "list tables of a database (admin)": ("/v1/paimon/databases/db0000/tables", {}, "admin"),
        "list tables globally (admin)": ("/v1/paimon/tables", {}, "admin"),
        "list tables globally (5-table reader)": ("/v1/paimon/tables", {}, "five"),
        "list tables globally, pattern (5-table reader)": (
            "/v1/paimon/tables",
            {"tableNamePattern": "t0000%"},
            "five",
        ),
        "/metrics scrape": ("/metrics", {}, "admin"),
    }
    del prefix
    results: dict[str, Any] = {"tree": os.environ.get("PYTHONPATH", ""), **state}
    results.pop("admin"), results.pop("five")
    # /metrics uncached: every scrape folds what came since the last one and reads the rollup
    settings = ServiceSettings(auth_cache_seconds=60, metrics_cache_seconds=0, gc_freeze_at_start=True)
    app = create_app(settings, state=ServiceState(settings, catalog))
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            for name, (path, params, who) in paths.items():
                if args.only and not any(o in name for o in args.only):
                    continue
                headers = {"Authorization": "Bearer " + state[who]}
                if path.startswith("/ui"):
                    client.cookies.set("paimon_meta_console", state[who])
                params = dict(params)
                deep = params.pop("deep", None)
                if deep == "commits":  # the console's page of commits before the middle of the log
                    params["commits_before"] = str(state["commit_events"] // 2)
                elif deep is not None:  # the page a client reaches by following nextPageToken
                    for _ in range(int(deep) - 1):
                        walked = client.get(path, params=params, headers=headers)
                        if walked.status_code != 200 or walked.json()["nextPageToken"] is None:
                            break  # a small log's last page, or a page past its deadline (below)
                        params["pageToken"] = walked.json()["nextPageToken"]
                times, status = [], 0
                for i in range(args.requests + 1):
                    t0 = time.perf_counter()
                    answer = client.get(path, params=params, headers=headers)
                    if i:
                        times.append(time.perf_counter() - t0)
                    status = answer.status_code
                    if status != 200:
                        break
                results[name] = (
                    {"p50_ms": _quantile(times, 0.5), "p99_ms": _quantile(times, 0.99)}
                    if status == 200
                    else {"status": status, "body": answer.text[:300]}
                )
                results[name]["load"] = round(os.getloadavg()[0], 2)
                print(name, results[name], flush=True)
            if not args.only or any(o in "/metrics after 20 commits" for o in args.only):
                name = "/metrics after 20 commits"
                results[name] = _scrapes_after_commits(client, catalog, state["admin"], args.requests)
                print(name, results[name], flush=True)
        if not args.only or any(o in "commit (library, one row)" for o in args.only):
            results["commit (library, one row)"] = _commits(catalog, args.requests)
            print("commit (library, one row)", results["commit (library, one row)"], flush=True)
    finally:
        catalog.close()
    return results


def _scrapes_after_commits(client: Any, catalog: Any, token: str, n: int) -> dict[str, Any]:
    """``n`` rounds of 20 one-row commits then one uncached scrape: what a scrape costs when it folds the
    events since the last one (each commit writes a few commit and lock events)."""
    import pyarrow as pa

    table = catalog.get_table("big.r0002")
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
    times, size, lines = [], 0, 0
    for r in range(n + 1):
        for i in range(20):
            builder = table.new_batch_write_builder()
            write = builder.new_write()
            write.write_arrow(pa.table({"k": [r * 100 + i], "v": ["x"]}, schema=schema))
            builder.new_commit().commit(write.prepare_commit())
            write.close()
        t0 = time.perf_counter()
        answer = client.get("/metrics", headers={"Authorization": "Bearer " + token})
        if r:
            times.append(time.perf_counter() - t0)
        assert answer.status_code == 200, answer.text[:300]
        size, lines = len(answer.content), answer.text.count("\n")
    return {
        "p50_ms": _quantile(times, 0.5),
        "p99_ms": _quantile(times, 0.99),
        "bytes": size,
        "lines": lines,
        "load": round(os.getloadavg()[0], 2),
    }


def _commits(catalog: Any, n: int) -> dict[str, Any]:
    """Sequential one-row commits to a real table (``big.r0001``) through the metastore-guarded commit
    path: what a commit costs in the metastore (lock, events, pointer, dedupe lookups) at this size of
    the log and the registry (issue 39: within 1.1x of an empty metastore's)."""
    import pyarrow as pa

    table = catalog.get_table("big.r0001")
    times = []
    for i in range(n + 3):  # three warm-up commits
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
        write.write_arrow(pa.table({"k": [i], "v": [str(i)]}, schema=schema))
        messages = write.prepare_commit()
        t0 = time.perf_counter()
        builder.new_commit().commit(messages)
        if i >= 3:
            times.append(time.perf_counter() - t0)
        write.close()
    return {
        "p50_ms": _quantile(times, 0.5),
        "p99_ms": _quantile(times, 0.99),
        "load": round(os.getloadavg()[0], 2),
    }


def drop(args: argparse.Namespace) -> dict[str, Any]:
    state = json.loads((STATE / "state.json").read_text())
    database = state["url"].rsplit("/", 1)[-1]
    with psycopg.connect(_admin(args.url), autocommit=True) as conn:
        for name in (database, database + "_empty"):
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    return {"dropped": database}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("step", choices=("seed", "upgrade", "fold", "measure", "commit-ab", "drop"))
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--database", default="paimon_meta_bench_flat")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--databases", type=int, default=100)
    parser.add_argument("--real", type=int, default=100)
    parser.add_argument("--xids", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6, help="commit-ab: rounds on each metastore")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = {
        "seed": seed,
        "upgrade": upgrade,
        "fold": fold,
        "measure": measure,
        "commit-ab": commit_ab,
        "drop": drop,
    }[args.step](args)
    result["loadavg"] = os.getloadavg()
    print(json.dumps(result, indent=2, default=str))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
