"""Benchmark: a change-feed page filtered to a quiet table, with many events of other tables in the log
(issue 34, item 2, "Measure").

A dedicated database (``--database``, dropped and created by this script: never name one you did not
create for it) migrated by the tree this runs from (``PYTHONPATH``: run it once from main's tree, the
"before", and once from this one); the table ``quiet.t`` with one commit (a few events), then
``--events`` lock events of 100 other tables inserted in SQL (``generate_series``, in statements of a
million). Measured in-process through the app (``TestClient``): ``GET /v1/paimon/events`` as a reader
granted only ``quiet.t``, (a) ``table=quiet.t`` and (b) no filter, each ``--repeat`` times from the start
of the feed; each request gets ``--timeout`` seconds, after which the script cancels the server's
queries (``pg_cancel_backend``) and reports the page as ``> timeout``.

Usage::

    PYTHONPATH=<tree> python bench/bench_feed_scan.py --events 1000000 [--database paimon_meta_bench_feedscan]
        [--url postgresql+psycopg://postgres@127.0.0.1:5432/test] [--repeat 5] [--timeout 120] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql


def _admin(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def recreate(url: str, database: str) -> str:
    """Drop and create ``database`` on the server of ``url``; its URL."""
    with psycopg.connect(_admin(url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    return url.rsplit("/", 1)[0] + "/" + database


def fill(url: str, key: str, events: int) -> float:
    started = time.monotonic()
    with psycopg.connect(_admin(url), autocommit=True) as conn:
        done = 0
        while done < events:
            n = min(1_000_000, events - done)
            conn.execute(
                "INSERT INTO paimon_lock_events (lock_id, event_type, owner) "
                "SELECT %s || '.noise.t' || (g %% 100), 'acquired', 'bench' FROM generate_series(1, %s) g",
                (key, n),
            )
            done += n
        conn.execute("VACUUM ANALYZE paimon_lock_events")
    return time.monotonic() - started


def cancel_all(url: str) -> None:
    with psycopg.connect(_admin(url), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'"
        )


def timed_get(
    client: Any, url: str, path: str, params: dict[str, Any], headers: dict[str, str], *, timeout: float
) -> float | None:
    """Seconds the request took, or None past ``timeout`` (its queries cancelled)."""
    out: list[Any] = []

    def run() -> None:
        started = time.monotonic()
        answer = client.get(path, params=params, headers=headers)
        out.append((time.monotonic() - started, answer.status_code))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        while thread.is_alive():
            cancel_all(url)
            thread.join(1.0)
        return None
    seconds, status = out[0]
    if status != 200:
        raise SystemExit(f"{path} {params}: {status}")
    return float(seconds)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--database", default="paimon_meta_bench_feedscan")
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from fastapi.testclient import TestClient

    import paimon_meta
    from paimon_meta.db import migrate
    from paimon_meta.service.app import create_app
    from paimon_meta.service.state import ServiceSettings, ServiceState
    from tests.fixtures.service import FAST_LOCK, make_principal
    from tests.service.helpers import seed

    url = recreate(args.url, args.database)
    migrate.upgrade(url)
    result: dict[str, Any] = {"events": args.events, "tree": os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryDirectory() as wh:
        catalog = paimon_meta.connect(url, wh, **FAST_LOCK)
        try:
            seed(catalog, "quiet.t")
            reader = {
                "Authorization": "Bearer " + make_principal(catalog, "reader", [("read", "quiet", "t")])
            }
            result["fill_seconds"] = round(fill(url, catalog.registry.catalog_key, args.events), 1)
            settings = ServiceSettings(auth_cache_seconds=60)
            app = create_app(settings, state=ServiceState(settings, catalog))
            with TestClient(app, raise_server_exceptions=False) as client:
                for name, params in (("table=quiet.t", {"table": "quiet.t"}), ("no filter", {})):
                    times = [
                        timed_get(client, url, "/v1/paimon/events", params, reader, timeout=args.timeout)
                        for _ in range(args.repeat)
                    ]
                    done = [t for t in times if t is not None]
                    result[name] = (
                        {
                            "median_ms": round(statistics.median(done) * 1000, 2),
                            "max_ms": round(max(done) * 1000, 2),
                        }
                        if len(done) == len(times)
                        else {"timed_out": len(times) - len(done), "timeout_s": args.timeout}
                    )
                    if len(done) < len(times):
                        break  # the other shape would time out the same way
        finally:
            catalog.close()
    result["loadavg"] = os.getloadavg()
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
