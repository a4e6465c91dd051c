"""Benchmark: the change feed under committing clients (issue 27, "Measure").

One ``paimon-meta serve`` over a scratch metastore; ``--clients`` threads each commit ``--commits``
one-row batches to a table of their own through the library (the metastore guard: what any writer of the
catalog does). Side by side in one run:

* ``0 subscribers``: commit throughput with nobody reading the feed;
* ``N subscribers``: the same with ``--subscribers`` live streams (``Accept: text/event-stream``) open
  and read; one of them times each ``snapshot_published`` event from the event's own ``time`` (the
  database's clock at insert) to its arrival (this machine's clock: the same machine).

Reported: commits per second and p50/p99 commit latency for each, and the feed's delivery latency
p50/p99, from the event's time and from the return of the writer's commit call. Rounds with migration
0011's NOTIFY triggers switched off measure what the wake-up costs a commit (off, on, off, on: a later
round meets a longer log). The subscribers run in a process of their own (parsing 50 streams in the
writers' process would take their GIL).

Usage::

    python bench/bench_feed.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                               [--clients 16] [--commits 20] [--subscribers 50] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import load, scratch_database  # noqa: E402
from bench_rest_service import servers  # noqa: E402
from paged_walk import page_ms  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.metastore.feed import feed_head  # noqa: E402
from tests.fixtures.service import make_principal  # noqa: E402

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])


def commit_all(
    url: str, warehouse: str, clients: int, commits: int, returned: dict[tuple[str, int], float] | None = None
) -> tuple[float, list[float]]:
    """(wall seconds, per-commit seconds) of ``clients`` threads committing ``commits`` each; with
    ``returned``, when (this machine's clock) each commit call returned, by (table, snapshot id)."""
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client(i: int) -> None:
        catalog = paimon_meta.connect(url, warehouse)
        try:
            table = catalog.get_table(f"db.t{i}")
            base = table.snapshot_manager.latest_snapshot_id() or 0
            barrier.wait()
            for n in range(commits):
                wb = table.new_batch_write_builder()
                write, commit = wb.new_write(), wb.new_commit()
                write.write_arrow(pa.table({"k": pa.array([n], pa.int64())}))
                t0 = time.perf_counter()
                commit.commit(write.prepare_commit())
                done = time.time()
                with lock:
                    latencies.append(time.perf_counter() - t0)
                    if returned is not None:  # one writer per table: its n-th commit is base + n + 1
                        returned[(f"db.t{i}", base + n + 1)] = done
                write.close()
        finally:
            catalog.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, latencies


def subscribe(base: str, token: str, after: str, stop: Any, delays: list[Any] | None) -> None:
    """Read a live stream from ``after`` until ``stop``; with ``delays``, note each snapshot_published's
    (subject, snapshot id, event time, arrival time)."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream", "Last-Event-ID": after}
    with httpx.stream("GET", f"{base}/v1/paimon/events", headers=headers, timeout=None) as answer:
        for line in answer.iter_lines():
            if stop.is_set():
                return
            if delays is not None and line.startswith("data: "):
                event = json.loads(line[len("data: ") :])
                if event["type"] == "org.paimon.commit.snapshot_published":
                    sent = datetime.fromisoformat(event["time"]).timestamp()
                    delays.append((event["subject"], event["data"]["snapshotId"], sent, time.time()))


def subscribers(base: str, token: str, after: str, signals: tuple[int, Any, Any, Any], out: str) -> None:
    """A process of its own (so parsing 50 streams does not take the writers' GIL): ``n`` streams; the
    first's deliveries are timed from ``measure`` on, written to ``out`` when ``stop`` is set."""
    n, ready, measure, stop = signals
    delays: list[Any] = []
    readers = [
        threading.Thread(
            target=subscribe, args=(base, token, after, stop, delays if i == 0 else None), daemon=True
        )
        for i in range(n)
    ]
    for r in readers:
        r.start()
    ready.set()
    measure.wait()
    delays.clear()
    stop.wait()
    Path(out).write_text(json.dumps(list(delays)))


def set_notify(url: str, enabled: bool) -> None:
    """Switch migration 0011's NOTIFY triggers (to measure what they cost a commit)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for table in ("paimon_commit_events", "paimon_lock_events", "paimon_maintenance_events"):
                verb = "ENABLE" if enabled else "DISABLE"
                conn.execute(text(f"ALTER TABLE {table} {verb} TRIGGER {table}_feed_notify"))
    finally:
        engine.dispose()


def summary(wall: float, latencies: list[float]) -> dict[str, Any]:
    return {
        "commits_per_s": round(len(latencies) / wall, 1),
        "commit_ms_p50": page_ms(latencies, 0.5),
        "commit_ms_p99": page_ms(latencies, 0.99),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--subscribers", type=int, default=50)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {k: getattr(args, k) for k in ("clients", "commits", "subscribers")}
    with tempfile.TemporaryDirectory() as tmp, scratch_database(args.url) as url:
        warehouse = str(Path(tmp) / "warehouse")
        catalog = paimon_meta.connect(url, warehouse)
        try:
            for i in range(args.clients):
                catalog.create_table(f"db.t{i}", SCHEMA)
            token = make_principal(catalog, "watcher", [("read", None, None)])
        finally:
            catalog.close()
        with servers(url, warehouse, Path(tmp), 1) as (server,):
            commit_all(url, warehouse, args.clients, 2)  # warm-up (connections, caches)
            # NOTIFY triggers off and on, alternated (a later round meets a longer log: order matters)
            for label, notify in (("a", False), ("a", True), ("b", False), ("b", True)):
                set_notify(url, notify)
                wall, latencies = commit_all(url, warehouse, args.clients, args.commits)
                name = f"0_subscribers{'' if notify else '_no_notify'}_{label}"
                results[name] = summary(wall, latencies)
                print(name, results[name], flush=True)
            mp = multiprocessing.get_context("spawn")
            ready, measure, stop = mp.Event(), mp.Event(), mp.Event()
            out = str(Path(tmp) / "delays.json")
            # the subscribers start at the end of what is there (only the new commits are timed)
            with paimon_meta.connect(url, warehouse) as reader:
                tail = feed_head(reader.engine).token()
            child = mp.Process(
                target=subscribers,
                args=(server.uri, token, tail, (args.subscribers, ready, measure, stop), out),
            )
            child.start()
            assert ready.wait(60), "the subscribers did not start"
            time.sleep(2.0)  # every stream is open
            measure.set()
            time.sleep(0.5)
            returned: dict[tuple[str, int], float] = {}
            wall, latencies = commit_all(url, warehouse, args.clients, args.commits, returned)
            time.sleep(2.0)  # the last events arrive
            stop.set()
            child.join(30)
            arrivals = json.loads(Path(out).read_text())
            # From the event's time (its transaction's start, inside the commit) and from the moment the
            # writer's commit call returned (what a client sees; negative: the subscriber was first).
            since_event = [got - sent for _, _, sent, got in arrivals]
            since_return = [got - returned[(s, i)] for s, i, _, got in arrivals if (s, i) in returned]
            results[f"{args.subscribers}_subscribers"] = {
                **summary(wall, latencies),
                "delivered": len(arrivals),
                "feed_ms_p50": page_ms(since_event, 0.5) if since_event else None,
                "feed_ms_p99": page_ms(since_event, 0.99) if since_event else None,
                "after_return_ms_p50": page_ms(since_return, 0.5) if since_return else None,
                "after_return_ms_p99": page_ms(since_return, 0.99) if since_return else None,
            }
            print(f"{args.subscribers} subscribers", results[f"{args.subscribers}_subscribers"], flush=True)
    results["load"] = load()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
