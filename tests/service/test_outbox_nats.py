"""The change feed published to NATS JetStream from the outbox (``serve --events-nats``), against a
private ``nats-server -js`` (tests/fixtures/nats.py): every event of the feed reaches the stream once, in
feed order, across a publisher SIGKILL, a broker restart and a takeover between replicas; replays are
dropped by ``Nats-Msg-Id``; commits never wait for the broker."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from sqlalchemy import Engine, text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.cli import serve as serve_cli
from paimon_meta.cli.main import build_parser
from paimon_meta.db.models import Privilege
from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.governance.permissions import Assignment, Resource
from paimon_meta.metastore.assignments import Assignments
from paimon_meta.metastore.catalogs import Catalogs
from paimon_meta.metastore.feed import FeedEvent, read_feed
from paimon_meta.metastore.outbox import lease_key
from paimon_meta.metastore.principals import Principals
from paimon_meta.service.outbox import (
    CATALOG_HEADER,
    NatsOutbox,
    NatsOutboxSettings,
    dumps_event,
    subject_covers,
)
from paimon_meta.service.state import ServiceMetrics
from tests.fixtures.nats import NatsServer, StreamMessage, read_stream, stream_count
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])
SUBJECT = "paimon.paimon.events"  # serve's default for --catalog-name paimon
STREAM = "PAIMON_PAIMON_EVENTS"  # serve's default for --catalog-name paimon


def _commit(catalog: MetastoreCatalog, identifier: str, k: int) -> None:
    wb = catalog.get_table(identifier).new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([k], pa.int64())}))
    commit.commit(write.prepare_commit())
    write.close()


_OF_KEY = (
    "table_id IN (SELECT table_id FROM paimon_tables WHERE catalog_key = :key"
    " UNION ALL SELECT table_id FROM paimon_dropped_tables WHERE catalog_key = :key)"
)
_LOGGED = text(
    f"SELECT (SELECT count(*) FROM paimon_commit_events WHERE {_OF_KEY})"  # noqa: S608
    f" + (SELECT count(*) FROM paimon_maintenance_events WHERE {_OF_KEY})"
    " + (SELECT count(*) FROM paimon_lock_events WHERE starts_with(lock_id, :key || '.'))"
    " + (SELECT count(*) FROM paimon_governance_events"
    "    WHERE catalog_key = :key OR (:default AND catalog_key IS NULL))"
)


def _feed(catalog: MetastoreCatalog, timeout: float = 20.0, *, default: bool = True) -> list[FeedEvent]:
    """The whole feed once it holds every event committed so far: an event is held back while any older
    transaction of the server runs (the feed's horizon), other databases' included. ``default``: the
    catalog is serve's default one (its feed has the governance events naming no catalog)."""
    key = catalog.registry.catalog_key
    deadline = time.monotonic() + timeout
    while True:
        with catalog.engine.connect() as conn:
            logged = int(conn.execute(_LOGGED, {"key": key, "default": default}).scalar_one())
        events, _ = read_feed(catalog.engine, catalog_key=key, default=default, limit=100_000)
        if len(events) >= logged:
            return events
        if time.monotonic() > deadline:
            raise AssertionError(f"the feed has {len(events)} of {logged} events after {timeout}s")
        time.sleep(0.05)


def _await_stream(
    nats: NatsServer,
    catalog: MetastoreCatalog,
    *,
    timeout: float = 20.0,
    stream: str = STREAM,
    default: bool = True,
) -> tuple[list[FeedEvent], list[StreamMessage]]:
    """The feed and the stream once the stream holds as many messages as the feed has events."""
    deadline = time.monotonic() + timeout
    while True:
        feed = _feed(catalog, default=default)
        if stream_count(nats.url, stream) >= len(feed) or time.monotonic() > deadline:
            return feed, read_stream(nats.url, stream)
        time.sleep(0.2)


def _assert_each_once_in_order(feed: list[FeedEvent], stream: list[StreamMessage]) -> None:
    ids = [m.msg_id for m in stream]
    assert len(set(ids)) == len(ids), "a duplicate in the stream"
    assert ids == [e.position.token() for e in feed]
    assert [m.event["id"] for m in stream] == ids


@contextmanager
def _committing(catalog: MetastoreCatalog, identifier: str, start: int) -> Iterator[Callable[[], int]]:
    """Commits by another client in a thread until the block ends; yields how many so far (each must
    succeed: a failure is raised at the end)."""
    done: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def run() -> None:
        k = start
        while not stop.is_set():
            try:
                _commit(catalog, identifier, k)
            except BaseException as exc:
                errors.append(exc)
                return
            done.append(k)
            k += 1

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield lambda: len(done)
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors


def _metric(server: ServiceProcess, token: str, name: str, catalog: str | None = None) -> float:
    """The sum of the samples of ``name`` (of those labelled ``catalog``, when given)."""
    body = httpx.get(f"{server.base}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10).text
    total = 0.0
    for match in re.finditer(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", body, re.MULTILINE):
        if catalog is None or f'catalog="{catalog}"' in (match.group(1) or ""):
            total += float(match.group(2))
    return total


def _until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    cat = paimon_meta.connect(clean_db, str(tmp_path / "warehouse"), **FAST_LOCK)
    try:
        cat.create_table("db.t", SCHEMA)
        yield cat
    finally:
        cat.close()


def _serve(
    started: list[ServiceProcess], url: str, catalog: MetastoreCatalog, tmp_path: Path, nats: NatsServer
) -> ServiceProcess:
    return spawn_service(started, url, catalog.warehouse, tmp_path, args=["--events-nats", nats.url])


def test_committed_events_reach_the_stream_in_feed_order_each_once(
    service_processes: list[ServiceProcess],
    clean_db: str,
    tmp_path: Path,
    catalog: MetastoreCatalog,
    nats_server: NatsServer,
) -> None:
    admin = make_principal(catalog, "ops", [("admin", None, None)])
    _commit(catalog, "db.t", 0)  # before serve: the backlog
    server = _serve(service_processes, clean_db, catalog, tmp_path, nats_server)
    for k in range(1, 4):
        _commit(catalog, "db.t", k)
    feed, stream = _await_stream(nats_server, catalog)
    _assert_each_once_in_order(feed, stream)
    # the body is the SSE stream's CloudEvent, and the headers say what it is
    first = stream[0]
    assert first.event["source"] == "/paimon-meta/catalogs/paimon"
    assert dumps_event(feed[0], "paimon") == stream_body(nats_server, first.seq)
    assert first.headers["Content-Type"] == "application/cloudevents+json"
    assert first.headers[CATALOG_HEADER] == catalog.registry.catalog_key
    assert {m.event["type"] for m in stream} >= {"org.paimon.commit.snapshot_published"}
    # the position is saved after the acks; the metrics count them
    with catalog.engine.connect() as conn:
        saved = conn.execute(
            text("SELECT txid, rank, event_id, published FROM paimon_outbox_positions")
        ).one()
    assert f"{saved.txid}.{saved.rank}.{saved.event_id}" == feed[-1].position.token()
    assert saved.published == len(feed)
    assert _metric(server, admin, "paimon_meta_outbox_published_total") == len(feed)
    assert _metric(server, admin, "paimon_meta_outbox_leader") == 1
    # SIGTERM: the publisher stops with the process, cleanly, and its lease is free at once
    stopping = time.monotonic()
    assert server.stop() in (0, -signal.SIGTERM)
    assert time.monotonic() - stopping < 10
    assert "Traceback" not in server.log_tail(400)
    key = lease_key(catalog.registry.catalog_key, f"nats:{SUBJECT}")
    with catalog.engine.connect() as conn:
        assert conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar() is True


def stream_body(nats: NatsServer, seq: int) -> bytes:
    import asyncio

    import nats as nats_py

    async def get() -> bytes:
        nc = await nats_py.connect(nats.url)
        try:
            return bytes((await nc.jetstream().get_msg(STREAM, seq)).data or b"")
        finally:
            await nc.close()

    return asyncio.run(get())


def test_publisher_sigkill_then_a_new_process_takes_over(
    service_processes: list[ServiceProcess],
    clean_db: str,
    tmp_path: Path,
    catalog: MetastoreCatalog,
    nats_server: NatsServer,
) -> None:
    first = _serve(service_processes, clean_db, catalog, tmp_path, nats_server)
    with _committing(catalog, "db.t", 0) as commits:
        _until(lambda: stream_count(nats_server.url, STREAM) >= 10, 20, "the first publishes")
        first.kill()  # mid-run: commits go on from the other client
        published_by_first = stream_count(nats_server.url, STREAM)
        _until(lambda: commits() >= 5, 30, "commits while no publisher runs")
        _serve(service_processes, clean_db, catalog, tmp_path, nats_server)
        time.sleep(1.0)
    feed, stream = _await_stream(nats_server, catalog)
    assert 10 <= published_by_first < len(feed)
    _assert_each_once_in_order(feed, stream)
    assert stream_count(nats_server.url, STREAM) == len(feed)


def test_broker_down_delays_publication_never_a_commit(
    service_processes: list[ServiceProcess],
    clean_db: str,
    tmp_path: Path,
    catalog: MetastoreCatalog,
    nats_server: NatsServer,
) -> None:
    admin = make_principal(catalog, "ops", [("admin", None, None)])
    server = _serve(service_processes, clean_db, catalog, tmp_path, nats_server)
    _commit(catalog, "db.t", 0)
    _, stream = _await_stream(nats_server, catalog)
    assert stream
    # the broker hangs: a batch read is published into a connection nobody reads; the publish times out
    assert nats_server.proc is not None
    nats_server.proc.send_signal(signal.SIGSTOP)
    started = time.monotonic()
    for k in range(1, 4):
        _commit(catalog, "db.t", k)  # succeeds while the broker hangs
    _until(lambda: _metric(server, admin, "paimon_meta_outbox_publish_failures_total") > 0, 10, "failures")
    # then it dies (what it had not read is lost with it); commits go on
    nats_server.kill()
    for k in range(4, 7):
        _commit(catalog, "db.t", k)
    assert time.monotonic() - started < 15
    _until(lambda: _metric(server, admin, "paimon_meta_outbox_lag_seconds") > 0, 10, "a lag")
    nats_server.start()  # same port and store: the outbox catches up
    feed, stream = _await_stream(nats_server, catalog)
    _assert_each_once_in_order(feed, stream)
    _until(lambda: _metric(server, admin, "paimon_meta_outbox_lag_seconds") == 0, 10, "no lag")


def test_one_publisher_across_replicas_and_takeover(
    service_processes: list[ServiceProcess],
    clean_db: str,
    tmp_path: Path,
    catalog: MetastoreCatalog,
    nats_server: NatsServer,
) -> None:
    admin = make_principal(catalog, "ops", [("admin", None, None)])
    replicas = [_serve(service_processes, clean_db, catalog, tmp_path, nats_server) for _ in range(2)]
    for k in range(3):
        _commit(catalog, "db.t", k)
    feed, stream = _await_stream(nats_server, catalog)
    _assert_each_once_in_order(feed, stream)
    leaders = [_metric(r, admin, "paimon_meta_outbox_leader") for r in replicas]
    published = [_metric(r, admin, "paimon_meta_outbox_published_total") for r in replicas]
    assert sorted(leaders) == [0, 1]
    leader, other = (replicas[0], replicas[1]) if leaders[0] == 1 else (replicas[1], replicas[0])
    assert published[replicas.index(other)] == 0 and published[replicas.index(leader)] == len(feed)

    leader.kill()
    for k in range(3, 6):
        _commit(catalog, "db.t", k)
    feed, stream = _await_stream(nats_server, catalog)  # the other replica took over
    _assert_each_once_in_order(feed, stream)
    assert _metric(other, admin, "paimon_meta_outbox_leader") == 1
    assert _metric(other, admin, "paimon_meta_outbox_published_total") > 0


def test_every_catalog_is_published_on_its_own_subject(
    service_processes: list[ServiceProcess],
    clean_db: str,
    tmp_path: Path,
    catalog: MetastoreCatalog,
    nats_server: NatsServer,
) -> None:
    """Catalog ``b``, created as ``paimon-meta catalogs create`` does and never named by a request to
    either replica, has its events published on ``paimon.b.events`` (its own stream), each once and in
    order, by one of the two replicas; the default catalog's subject and stream are as before, and hold
    only its own events."""
    admin = make_principal(catalog, "ops", [("admin", None, None)])
    Catalogs(catalog.engine).create("b", str(tmp_path / "wh-b"), created_by="cli")
    replicas = [
        spawn_service(
            service_processes,
            clean_db,
            catalog.warehouse,
            tmp_path,
            args=["--events-nats", nats_server.url, "--catalog-sweep-seconds", "0.5"],
        )
        for _ in range(2)
    ]
    with paimon_meta.connect(clean_db, catalog="b", **FAST_LOCK) as b:
        b.create_table("db.t", SCHEMA)
        for k in range(3):
            _commit(b, "db.t", k)
            _commit(catalog, "db.t", 100 + k)
        feed_b, stream_b = _await_stream(nats_server, b, stream="PAIMON_B_EVENTS", timeout=60, default=False)
        _assert_each_once_in_order(feed_b, stream_b)
        assert {m.headers[CATALOG_HEADER] for m in stream_b} == {"b"}
        assert {m.event["source"] for m in stream_b} == {"/paimon-meta/catalogs/b"}
        assert read_stream(nats_server.url, "PAIMON_B_EVENTS", "paimon.b.events") == stream_b
    feed, stream = _await_stream(nats_server, catalog)
    _assert_each_once_in_order(feed, stream)
    assert read_stream(nats_server.url, STREAM, SUBJECT) == stream
    assert not {m.msg_id for m in stream} & {m.msg_id for m in stream_b}
    # one publisher per catalog across the replicas, and its metrics say which catalog
    for name, events in (("paimon", len(feed)), ("b", len(feed_b))):
        leaders = [_metric(r, admin, "paimon_meta_outbox_leader", name) for r in replicas]
        assert sorted(leaders) == [0, 1], (name, leaders)
        published = sum(_metric(r, admin, "paimon_meta_outbox_published_total", name) for r in replicas)
        assert published == events


# ---- in-process: replays, the resume, settings ---------------------------------------------------------


def _outbox(catalog: MetastoreCatalog, nats: NatsServer) -> tuple[NatsOutbox, ServiceMetrics]:
    metrics = ServiceMetrics()
    settings = NatsOutboxSettings(
        url=nats.url, subject=SUBJECT, stream=STREAM, poll_seconds=0.2, lease_retry_seconds=0.5
    )
    outbox = NatsOutbox(
        catalog.engine,
        catalog_key=catalog.registry.catalog_key,
        catalog_name="paimon",
        settings=settings,
        metrics=metrics.outbox,
        holder="test",
        default=True,
    )
    return outbox, metrics


def _published(metrics: ServiceMetrics, result: str) -> float:
    labels = {"catalog": "paimon", "result": result}
    return metrics.registry.get_sample_value("paimon_meta_outbox_published_total", labels) or 0.0


def _run_until_caught_up(outbox: NatsOutbox, metrics: ServiceMetrics, events: int) -> None:
    outbox.start()
    try:
        _until(
            lambda: _published(metrics, "stored") + _published(metrics, "duplicate") >= events,
            20,
            "the outbox caught up",
        )
    finally:
        assert outbox.stop(10)


def _forget_position(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM paimon_outbox_positions"))


def test_replays_are_dropped_by_msg_id(catalog: MetastoreCatalog, nats_server: NatsServer) -> None:
    for k in range(3):
        _commit(catalog, "db.t", k)
    events = len(_feed(catalog))
    outbox, metrics = _outbox(catalog, nats_server)
    _run_until_caught_up(outbox, metrics, events)
    assert _published(metrics, "stored") == events
    # a publisher that died before saving, and a foreign last message: the resume cannot help, so the
    # whole feed is published again; JetStream drops every replay by its Nats-Msg-Id
    _forget_position(catalog.engine)
    _publish_foreign(nats_server)
    outbox, metrics = _outbox(catalog, nats_server)
    _run_until_caught_up(outbox, metrics, events)
    assert _published(metrics, "duplicate") == events and _published(metrics, "stored") == 0
    assert stream_count(nats_server.url, STREAM) == events + 1


def test_a_new_publisher_resumes_after_the_streams_last_message(
    catalog: MetastoreCatalog, nats_server: NatsServer
) -> None:
    for k in range(3):
        _commit(catalog, "db.t", k)
    outbox, metrics = _outbox(catalog, nats_server)
    _run_until_caught_up(outbox, metrics, len(_feed(catalog)))
    _forget_position(catalog.engine)  # died between its acks and its save
    _commit(catalog, "db.t", 3)
    feed = _feed(catalog)
    outbox, metrics = _outbox(catalog, nats_server)
    stored_before = stream_count(nats_server.url, STREAM)
    _run_until_caught_up(outbox, metrics, len(feed) - stored_before)
    assert _published(metrics, "duplicate") == 0  # nothing was sent twice
    _assert_each_once_in_order(feed, read_stream(nats_server.url, STREAM))


def test_governance_changes_are_published_once_in_feed_order(
    catalog: MetastoreCatalog, nats_server: NatsServer
) -> None:
    """Grants and revocations (of the catalog, and naming none: the default catalog's) are messages of
    the catalog's subject like commits, each once, in feed order, and once only after a replay."""
    key = catalog.registry.catalog_key
    make_principal(catalog, "alice")
    store = Assignments(catalog.engine, catalog_key=key, default=True)
    t = Resource.table("db", "t")
    _commit(catalog, "db.t", 0)
    store.grant(Assignment("alice", t, PermissionAccess.SELECT), granted_by="ops", reason="onboarding")
    _commit(catalog, "db.t", 1)
    store.revoke(t, PermissionAccess.SELECT, "alice", revoked_by="ops", reason="offboarding")
    Principals(catalog.engine).grant("alice", Privilege.READ, granted_by="ops")  # names no catalog
    feed = _feed(catalog)
    outbox, metrics = _outbox(catalog, nats_server)
    _run_until_caught_up(outbox, metrics, len(feed))
    stream = read_stream(nats_server.url, STREAM)
    _assert_each_once_in_order(feed, stream)
    governance = [m.event for m in stream if m.event["data"]["log"] == "governance"]
    about_t = [(e["type"], e["data"]["reason"]) for e in governance if e["subject"] == "TABLE db.t"]
    assert about_t == [
        ("org.paimon.governance.permission_granted", "onboarding"),
        ("org.paimon.governance.permission_revoked", "offboarding"),
    ]
    assert any(e["data"]["reason"].startswith("grant read") for e in governance)  # the NULL-catalog one
    # a publisher that lost its position publishes them again: JetStream drops every one
    _forget_position(catalog.engine)
    _publish_foreign(nats_server)
    outbox, metrics = _outbox(catalog, nats_server)
    _run_until_caught_up(outbox, metrics, len(feed))
    assert _published(metrics, "duplicate") == len(feed) and _published(metrics, "stored") == 0


def _publish_foreign(nats: NatsServer) -> None:
    import asyncio

    import nats as nats_py

    async def publish() -> None:
        nc = await nats_py.connect(nats.url)
        try:
            await nc.jetstream().publish(SUBJECT, b"{}", headers={"Nats-Msg-Id": "someone-else"})
        finally:
            await nc.close()

    asyncio.run(publish())


def test_settings_and_subjects() -> None:
    assert subject_covers("paimon.*.events", SUBJECT)
    assert subject_covers("paimon.>", SUBJECT) and subject_covers(SUBJECT, SUBJECT)
    assert not subject_covers("paimon.*", SUBJECT) and not subject_covers("paimon.x.events", SUBJECT)
    assert not subject_covers("paimon.paimon.events.x", SUBJECT)
    for bad in ("", "a..b", "a.*", "a b", "a.>"):
        with pytest.raises(ValidationError):
            NatsOutboxSettings(url="nats://x", subject=bad, stream="S")
    with pytest.raises(ValidationError):
        NatsOutboxSettings(url="nats://x", subject="a", stream="a.b")


def test_serve_flags() -> None:
    def settings(*args: str) -> NatsOutboxSettings | None:
        return serve_cli._events_nats(build_parser().parse_args(["serve", *args]))

    assert settings() is None
    on = settings("--catalog-name", "sales", "--events-nats", "nats://127.0.0.1:4222")
    assert on is not None and (on.subject, on.stream) == ("paimon.sales.events", "PAIMON_SALES_EVENTS")
    on = settings("--events-nats", "nats://h", "--events-nats-subject", "a.b", "--events-nats-stream", "S")
    assert on is not None and (on.url, on.subject, on.stream, on.sink) == ("nats://h", "a.b", "S", "nats:a.b")
    with pytest.raises(ValidationError, match="--events-nats-subject needs --events-nats"):
        settings("--events-nats-subject", "a.b")
    with pytest.raises(ValidationError, match="--events-nats-subject"):
        settings("--events-nats", "nats://h", "--events-nats-subject", "a.*")
    # the other catalogs: paimon.<name>.events, each its own stream, or the one stream given
    on = settings("--catalog-name", "sales", "--events-nats", "nats://h")
    assert on is not None
    b = on.for_catalog("b")
    assert (b.subject, b.stream, b.sink, b.url) == (
        "paimon.b.events",
        "PAIMON_B_EVENTS",
        "nats:paimon.b.events",
        "nats://h",
    )
    on = settings("--events-nats", "nats://h", "--events-nats-subject", "a.b", "--events-nats-stream", "S")
    assert on is not None and (on.for_catalog("b").subject, on.for_catalog("b").stream) == (
        "paimon.b.events",
        "S",
    )
    # a {catalog} pattern is every catalog's, the default one's too
    on = settings(
        "--catalog-name", "sales", "--events-nats", "nats://h", "--events-nats-subject", "lake.{catalog}.ev"
    )
    assert on is not None and (on.subject, on.for_catalog("b").subject) == ("lake.sales.ev", "lake.b.ev")
    # a catalog whose subject would be the default catalog's is refused (it is not published)
    on = settings("--events-nats", "nats://h", "--events-nats-subject", "paimon.b.events")
    assert on is not None
    with pytest.raises(ValidationError, match="default catalog's subject"):
        on.for_catalog("b")
    with pytest.raises(ValidationError, match="--events-nats-subject"):
        settings("--events-nats", "nats://h", "--events-nats-subject", "a.{catalog}.*")


def test_an_unexpected_error_restarts_the_publisher(
    catalog: MetastoreCatalog, nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from paimon_meta.service import outbox as outbox_module

    _commit(catalog, "db.t", 0)
    events = len(_feed(catalog))
    calls: list[FeedEvent] = []

    def first_call_fails(event: FeedEvent, catalog_name: str) -> bytes:
        calls.append(event)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return dumps_event(event, catalog_name)

    monkeypatch.setattr(outbox_module, "dumps_event", first_call_fails)
    outbox, metrics = _outbox(catalog, nats_server)
    _run_until_caught_up(outbox, metrics, events)
    assert (
        metrics.registry.get_sample_value(
            "paimon_meta_outbox_publish_failures_total", {"catalog": "paimon", "step": "unexpected"}
        )
        == 1
    )
    _assert_each_once_in_order(_feed(catalog), read_stream(nats_server.url, STREAM))
