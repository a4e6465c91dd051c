"""Benchmark: the change feed published to NATS JetStream from the outbox (issue 27, "Publishing to a
broker").

A private ``nats-server -js`` (``/usr/sbin/nats-server``, a free port, a scratch store) and a scratch
metastore. ``--clients`` threads each commit ``--commits`` one-row batches to a table of their own through
the library, while one ``paimon-meta serve`` runs:

* ``publisher off``: serve without ``--events-nats`` (commit throughput, p50/p99 commit latency);
* ``publisher on, no consumer``: serve with ``--events-nats``, nothing reading the stream;
* ``publisher on``: the same with a JetStream consumer (in a process of its own) reading the stream,
  plus the delivery latency of each ``snapshot_published`` event (its ``time``, the database's clock at
  insert, to its arrival at the consumer on this machine), and how long after the last commit the stream
  held every event;
* ``publisher off again``: the first run again (the tables grew; the machine's load drifts);
* ``catch-up``: the whole feed of the four runs published again from the start to a fresh subject and stream
  by an in-process publisher: events per second of the outbox alone (one event in flight at a time, each
  after the previous one's ack).

Usage::

    python bench/bench_outbox.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                 [--clients 8] [--commits 25] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import pyarrow as pa
from sqlalchemy import text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import load, scratch_database  # noqa: E402
from bench_feed import commit_all  # noqa: E402
from bench_rest_service import servers  # noqa: E402
from paged_walk import page_ms  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.catalog.metastore import MetastoreCatalog  # noqa: E402
from paimon_meta.metastore.feed import read_feed  # noqa: E402
from paimon_meta.service.outbox import NatsOutbox, NatsOutboxSettings  # noqa: E402
from paimon_meta.service.state import ServiceMetrics  # noqa: E402
from tests.fixtures.nats import NATS_SERVER, NatsServer, stream_count  # noqa: E402
from tests.fixtures.service import free_port  # noqa: E402

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])
SUBJECT = "paimon.paimon.events"
STREAM = "PAIMON_PAIMON_EVENTS"


@contextmanager
def nats_server(tmp: Path) -> Iterator[NatsServer]:
    store = tmp / "nats-store"
    store.mkdir()
    server = NatsServer(free_port(), store, tmp / "nats-server.log").start()
    try:
        yield server
    finally:
        server.kill()


class Arrivals:
    """A JetStream consumer (an ordered push consumer, in a process of its own so that it takes no CPU
    from the committing threads' interpreter) timing each snapshot_published event from its ``time`` to
    its arrival; ``count()`` is how many events it received."""

    def __init__(self, url: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._count = ctx.Value("q", 0)
        self._stop = ctx.Event()
        self._delays = ctx.Queue()
        self._process = ctx.Process(target=_consume, args=(url, self._count, self._stop, self._delays))
        self.delays: list[float] = []

    def count(self) -> int:
        return int(self._count.value)

    def __enter__(self) -> Arrivals:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.delays = list(self._delays.get(timeout=30))
        self._process.join(10)


def _consume(url: str, count: Any, stop: Any, out: Any) -> None:
    delays: list[float] = []

    async def run() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        while True:  # the publisher creates the stream: wait for it
            try:
                await js.stream_info(STREAM)
                break
            except nats.js.errors.NotFoundError:
                await asyncio.sleep(0.05)

        async def arrived(msg: Any) -> None:
            arrival = time.time()
            event = json.loads(msg.data)
            if event["type"] == "org.paimon.commit.snapshot_published":
                delays.append(arrival - datetime.fromisoformat(event["time"]).timestamp())
            count.value += 1

        sub = await js.subscribe(SUBJECT, cb=arrived, ordered_consumer=True)
        while not stop.is_set():
            await asyncio.sleep(0.05)
        await sub.unsubscribe()
        await nc.close()

    asyncio.run(run())
    out.put(delays)


_LOGGED = text(
    "SELECT (SELECT count(*) FROM paimon_commit_events) + (SELECT count(*) FROM paimon_maintenance_events)"
    " + (SELECT count(*) FROM paimon_lock_events WHERE starts_with(lock_id, :key || '.'))"
)


def feed_length(catalog: MetastoreCatalog) -> int:
    """The feed's length once it holds every event logged so far (the horizon holds events back while an
    older transaction of the server runs)."""
    key = catalog.registry.catalog_key
    while True:
        with catalog.engine.connect() as conn:
            logged = int(conn.execute(_LOGGED, {"key": key}).scalar_one())
        events, _ = read_feed(catalog.engine, catalog_key=key, limit=1_000_000)
        if len(events) >= logged:
            return len(events)
        time.sleep(0.05)


def commits(results: dict[str, Any], name: str, wall: float, latencies: list[float]) -> None:
    results[name] = {
        "commits_per_s": round(len(latencies) / wall, 1),
        "commit_ms_p50": page_ms(latencies, 0.5),
        "commit_ms_p99": page_ms(latencies, 0.99),
    }


def _stored(metrics: ServiceMetrics) -> float:
    """Events the outbox stored on the broker, summed over its labels (``catalog`` among them)."""
    return sum(
        sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == "paimon_meta_outbox_published_total" and sample.labels.get("result") == "stored"
    )


def catch_up(catalog: MetastoreCatalog, url: str, events: int) -> dict[str, Any]:
    """Publish the whole feed again to a fresh subject and stream, in-process; events per second."""
    metrics = ServiceMetrics()
    settings = NatsOutboxSettings(url=url, subject="paimon.bench.catchup", stream="BENCH_CATCHUP")
    outbox = NatsOutbox(
        catalog.engine,
        catalog_key=catalog.registry.catalog_key,
        catalog_name="paimon",
        settings=settings,
        metrics=metrics.outbox,
        holder="bench",
    )
    t0 = time.perf_counter()
    outbox.start()
    try:
        while _stored(metrics) < events:
            time.sleep(0.01)
        wall = time.perf_counter() - t0
    finally:
        outbox.stop()
    return {"events": events, "seconds": round(wall, 2), "events_per_s": round(events / wall, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--commits", type=int, default=25)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    version = subprocess.run([NATS_SERVER, "--version"], capture_output=True, text=True, check=True).stdout
    results: dict[str, Any] = {
        "clients": args.clients,
        "commits": args.commits,
        "nats_server": version.strip(),
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        scratch_database(args.url) as url,
        nats_server(Path(tmp)) as broker,
    ):
        warehouse = str(Path(tmp) / "warehouse")
        catalog = paimon_meta.connect(url, warehouse)
        try:
            for i in range(args.clients):
                catalog.create_table(f"db.t{i}", SCHEMA)
            with servers(url, warehouse, Path(tmp), 1):
                commits(results, "publisher_off", *commit_all(url, warehouse, args.clients, args.commits))
            print("publisher off", results["publisher_off"], flush=True)
            with servers(url, warehouse, Path(tmp), 1, extra=["--events-nats", broker.url]):
                # the backlog of the first run is published first; time only what comes after it
                backlog = feed_length(catalog)
                while stream_count(broker.url, STREAM) < backlog:
                    time.sleep(0.05)
                commits(
                    results,
                    "publisher_on_no_consumer",
                    *commit_all(url, warehouse, args.clients, args.commits),
                )
                print("publisher on, no consumer", results["publisher_on_no_consumer"], flush=True)
                backlog = feed_length(catalog)
                with Arrivals(broker.url) as arrivals:
                    while arrivals.count() < backlog:
                        time.sleep(0.05)
                    commits(results, "publisher_on", *commit_all(url, warehouse, args.clients, args.commits))
                    done = time.perf_counter()
                    total = feed_length(catalog)
                    while arrivals.count() < total:
                        time.sleep(0.01)
                    drained = time.perf_counter() - done
                # the backlog's own (old) events are not timed
                delays = arrivals.delays[-args.clients * args.commits :]
                results["publisher_on"] |= {
                    "delivered": len(delays),
                    "delivery_ms_p50": page_ms(delays, 0.5) if delays else None,
                    "delivery_ms_p99": page_ms(delays, 0.99) if delays else None,
                    "stream_complete_after_last_commit_ms": round(drained * 1000, 1),
                }
            print("publisher on", results["publisher_on"], flush=True)
            # off again: what the tables' growth and the machine's drift did meanwhile
            with servers(url, warehouse, Path(tmp), 1):
                commits(
                    results, "publisher_off_again", *commit_all(url, warehouse, args.clients, args.commits)
                )
            print("publisher off again", results["publisher_off_again"], flush=True)
            total = feed_length(catalog)
            results["catch_up"] = catch_up(catalog, broker.url, total)
            print("catch-up", results["catch_up"], flush=True)
        finally:
            catalog.close()
    results["load"] = load()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
