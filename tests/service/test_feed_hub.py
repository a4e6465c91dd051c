"""The replica's shared change-feed reader (service.feed_hub) and the streams built on it: woken by the
log's NOTIFY, a gap-free ring of the newest events, streams behind the ring catching up from the log, and
a stream whose client stops reading ended without holding anything up."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.metastore.feed import START, Position, feed_head, read_feed
from paimon_meta.service import feed_hub
from paimon_meta.service.app import create_app
from paimon_meta.service.feed_hub import FeedHub
from paimon_meta.service.routes_feed import FeedStreamResponse
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, seed

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

KEY = "jdbc"


def _lock_events(engine: Engine, n: int, table: str = "t") -> None:
    with psycopg.connect(libpq_conninfo(engine.url)) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO paimon_lock_events (lock_id, event_type, owner) VALUES (%s, 'acquired', 'test')",
            [(f"{KEY}.db.{table}",)] * n,
        )


def _until(predicate: Any, timeout: float = 10.0, context: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out: {context() if context else ''}"
        time.sleep(0.02)


@pytest.fixture
def hub(service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch) -> Iterator[FeedHub]:
    # A fallback poll far beyond the test: only a NOTIFY can wake the hub in time.
    monkeypatch.setattr(feed_hub, "FALLBACK_SECONDS", 60.0)
    seed(service_catalog, "db.t")
    made = FeedHub(service_catalog.engine, KEY, capacity=10)
    made.start()
    _until(lambda: made.ready)
    try:
        yield made
    finally:
        made.close()


def test_the_hub_starts_at_the_tail_and_is_woken_by_the_logs_notify(
    hub: FeedHub, service_catalog: MetastoreCatalog
) -> None:
    engine = service_catalog.engine
    start = hub.stats().start
    assert START < start <= feed_head(engine)
    # every event written before is before the start
    assert read_feed(engine, catalog_key=KEY)[1] < start
    assert hub.after(start) == ([], start)
    _lock_events(engine, 3)
    _until(lambda: hub.stats().size == 3)  # within seconds: the NOTIFY, not the 60 s poll, woke it
    assert hub.stats().wakeups >= 1
    events, tail = hub.after(start)  # type: ignore[misc]
    expected, end = read_feed(engine, catalog_key=KEY, after=start, limit=100)
    assert events == expected and tail == end
    assert hub.after(events[0].position) == (events[1:], tail)


def test_the_ring_keeps_the_newest_events_without_a_gap(
    hub: FeedHub, service_catalog: MetastoreCatalog
) -> None:
    engine = service_catalog.engine
    start = hub.stats().start
    for _ in range(4):  # several reads, each appending and trimming
        _lock_events(engine, 7)
        time.sleep(0.05)
    _until(lambda: hub.stats().events == 28, context=hub.stats)
    stats = hub.stats()
    assert stats.size <= 10 and stats.start > start
    assert hub.after(start) is None  # behind the ring: the stream reads the log itself
    everything, _ = read_feed(engine, catalog_key=KEY, after=start, limit=100)
    ring, tail = hub.after(stats.start)  # type: ignore[misc]
    # exactly the feed's events after the ring's start, none missing, none repeated
    assert ring == [e for e in everything if e.position > stats.start] and tail == everything[-1].position
    assert len(ring) == stats.size


def test_a_waiting_stream_is_woken_by_new_events(hub: FeedHub, service_catalog: MetastoreCatalog) -> None:
    async def wait() -> float:
        seen = hub.seq
        started = time.monotonic()
        await hub.changed(seen, timeout=30)
        return time.monotonic() - started

    async def main() -> float:
        async with anyio.create_task_group() as group:
            waited: list[float] = []

            async def run() -> None:
                waited.append(await wait())

            group.start_soon(run)
            await anyio.sleep(0.2)
            await anyio.to_thread.run_sync(_lock_events, service_catalog.engine, 1)
        return waited[0]

    assert anyio.run(main) < 25  # woken by the events, not by the timeout


def test_a_stream_behind_the_ring_catches_up_from_the_log_then_follows_the_ring(
    service_catalog: MetastoreCatalog,
) -> None:
    """Resumed from the start with a ring of 10 events: the first events come from the log, the rest
    from the ring, each once and in feed order, the same as the pages."""
    seed(service_catalog, "db.t")
    settings = ServiceSettings(auth_cache_seconds=0, feed_ring_events=10)
    state = ServiceState(settings, service_catalog)
    app = create_app(settings, state=state)
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    with TestClient(app, raise_server_exceptions=False) as client:
        hub = state.feed_hub()
        _until(lambda: hub.ready)
        _lock_events(service_catalog.engine, 25)
        _until(lambda: hub.stats().events == 25)
        assert hub.stats().start > START
        pages = client.get(f"{P}/events", params={"maxResults": 1000}, headers=admin).json()["events"]
        ids: list[str] = []
        with client.stream("GET", f"{P}/events", headers={**admin, "Accept": "text/event-stream"}) as answer:
            for line in answer.iter_lines():
                if line.startswith("id: "):
                    ids.append(line[4:])
                if len(ids) == len(pages):
                    break
        assert ids == [e["id"] for e in pages]
        assert [Position.parse(i) for i in ids] == sorted(Position.parse(i) for i in ids)


def test_a_stream_whose_client_stops_reading_is_ended_and_gives_its_slot_back() -> None:
    """The write to a client that takes nothing blocks; after the send timeout the stream ends, its
    generator is closed at once (its ``finally`` runs), its slots are given back (once) and the drop is
    counted.
    Other streams and commits never wait for it: the stream holds no lock, transaction or buffer."""
    closed: list[str] = []
    dropped: list[int] = []
    released: list[int] = []

    async def events() -> AsyncIterator[str]:
        try:
            n = 0
            while True:
                n += 1
                yield f"id: {n}\ndata: x\n\n"
        finally:
            closed.append("closed")

    async def main() -> float:
        response = FeedStreamResponse(
            events(),
            send_timeout=0.3,
            on_drop=lambda: dropped.append(1),
            release=lambda: released.append(1),
        )
        sent: list[dict[str, Any]] = []
        blocked = asyncio.Event()

        async def send(message: Any) -> None:
            sent.append(message)
            if len(sent) > 3:  # the client's buffers are full from here on
                blocked.set()
                await asyncio.sleep(3600)

        async def receive() -> Any:
            await asyncio.sleep(3600)

        started = time.monotonic()
        scope = {"type": "http", "asgi": {"spec_version": "2.4"}, "method": "GET", "headers": []}
        await response(scope, receive, send)
        assert blocked.is_set()
        return time.monotonic() - started

    took = anyio.run(main)
    assert took < 5 and dropped == [1] and closed == ["closed"] and released == [1]


def test_the_hub_tells_how_old_the_transaction_holding_the_feed_back_is(
    hub: FeedHub, service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction left open holds back every event committed after it began (the horizon); the hub
    shows its age (the metric operators watch), and the events arrive once it ends."""
    monkeypatch.setattr(feed_hub, "OLDEST_CHECK_SECONDS", 0.0)
    engine = service_catalog.engine
    with psycopg.connect(libpq_conninfo(engine.url)) as idle:
        idle.execute("SELECT pg_current_xact_id()")  # a transaction with an id, left open
        time.sleep(1.2)
        _lock_events(engine, 2)
        _until(lambda: hub.stats().oldest_transaction_seconds >= 1.0, context=hub.stats)
        time.sleep(0.3)
        assert hub.stats().events == 0  # held back
        idle.rollback()
    # (its end notifies nobody: the reader's every-second look finds them; here the fallback is off,
    # so the next commit's NOTIFY does)
    _lock_events(engine, 1)
    _until(lambda: hub.stats().events == 3, context=hub.stats)
    _until(lambda: hub.stats().oldest_transaction_seconds < 1.0, context=hub.stats)
