"""The live change feed (``Accept: text/event-stream``) from real ``paimon-meta serve`` processes: a
commit made by another client reaches a subscriber within seconds; a subscriber resumes with
``Last-Event-ID`` after its replica was SIGKILLed, from another replica, with no event lost or repeated;
idle streams carry heartbeats."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])


def _commit(catalog: MetastoreCatalog, identifier: str, k: int) -> None:
    wb = catalog.get_table(identifier).new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([k], pa.int64())}))
    commit.commit(write.prepare_commit())
    write.close()


def _sse(lines: Iterator[str]) -> Iterator[tuple[str | None, dict[str, Any] | None]]:
    """(id, CloudEvent) per event of a Server-Sent Events stream, (None, None) per comment block."""
    fields: dict[str, str] = {}
    comment = False
    for line in lines:
        if line == "":
            if "data" in fields:
                yield fields.get("id"), json.loads(fields["data"])
            elif comment:
                yield None, None
            fields, comment = {}, False
        elif line.startswith(":"):
            comment = True
        else:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


def _stream(
    server: ServiceProcess, token: str, last_id: str | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events of a live stream from ``server`` (after ``last_id``), until the caller stops."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    if last_id:
        headers["Last-Event-ID"] = last_id
    with httpx.stream("GET", f"{server.base}/v1/paimon/events", headers=headers, timeout=30) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        for event_id, event in _sse(answer.iter_lines()):
            if event_id is not None and event is not None:
                yield event_id, event


def _until_published(events: Iterator[tuple[str, dict[str, Any]]], snapshot_id: int) -> list[tuple[str, Any]]:
    out = []
    for event_id, event in events:
        out.append((event_id, event))
        if (
            event["type"] == "org.paimon.commit.snapshot_published"
            and event["data"]["snapshotId"] == snapshot_id
        ):
            return out
    raise AssertionError(f"the stream ended before snapshot {snapshot_id}")


def test_live_events_and_resume_across_a_replica_kill(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        token = make_principal(catalog, "watcher", [("read", "db", None)])
        catalog.create_table("db.t", SCHEMA)
        first = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        second = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        _commit(catalog, "db.t", 1)
        # the backlog: snapshot 1's events, from the start
        backlog = _until_published(_stream(first, token), 1)
        assert {e["subject"] for _, e in backlog} == {"db.t"}

        # a commit by another client reaches a subscriber of the live stream within seconds
        published: list[float] = []

        def commit_soon() -> None:
            time.sleep(1.0)
            published.append(time.monotonic())
            _commit(catalog, "db.t", 2)

        writer = threading.Thread(target=commit_soon)
        writer.start()
        seen = _until_published(_stream(first, token), 2)
        arrived = time.monotonic()
        writer.join()
        assert arrived - published[0] < 5.0, arrived - published[0]
        ids = [i for i, _ in seen]
        assert len(set(ids)) == len(ids) and seen[: len(backlog)] == backlog

        # the replica dies; the subscriber resumes from the other one with the last id it got
        first.kill()
        middle = len(seen) // 2
        _commit(catalog, "db.t", 3)
        rest = _until_published(_stream(second, token, last_id=seen[middle][0]), 3)
        assert rest[: len(seen) - middle - 1] == seen[middle + 1 :]  # nothing lost, nothing repeated
        new_ids = [i for i, _ in rest[len(seen) - middle - 1 :]]
        assert new_ids and not set(new_ids) & set(ids)
    finally:
        catalog.close()


def _stalled_subscriber(server: ServiceProcess, token: str) -> socket.socket:
    """A live stream whose client reads the answer's head and then nothing (tiny receive buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(
        (
            "GET /v1/paimon/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
        ).encode()
    )
    assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    return sock


def _metric(server: ServiceProcess, token: str, name: str) -> float:
    answer = httpx.get(f"{server.base}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    text = answer.text
    # the default catalog's series (label catalog="paimon")
    values = [
        float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + '{catalog="paimon"}')
    ]
    assert values, f"{name} not in /metrics"
    return values[0]


def test_a_stalled_subscriber_slows_nothing_and_is_dropped(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path
) -> None:
    """A subscriber that stops reading: its replica keeps committing and serving another subscriber
    while the stalled stream's writes wait; after ``--feed-send-timeout`` the stream is ended (counted),
    its slot given back, and it can resume with the last id it received."""
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        token = make_principal(catalog, "root", [("admin", None, None)])
        catalog.create_table("db.t", SCHEMA)
        server = spawn_service(
            service_processes, clean_db, warehouse, tmp_path, args=["--feed-send-timeout", "2"]
        )
        stalled = _stalled_subscriber(server, token)
        # Megabytes of events: more than the socket buffers between the replica and the stalled client
        # (one lock each: 20,000 acquisitions of one lock make the event-log metrics' scrape crawl).
        with catalog.engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO paimon_lock_events (lock_id, event_type, owner, reason) "
                "SELECT 'jdbc.db.bulk' || i, 'acquired', 'bulk', repeat('x', 400) "
                "FROM generate_series(1, 20000) i"
            )
        assert _metric(server, token, "paimon_meta_service_feed_streams") == 1.0
        # meanwhile the replica answers requests, and another subscriber gets a new commit at once
        answer = httpx.get(f"{server.base}/v1/paimon/databases", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        _commit(catalog, "db.t", 1)
        tail = _until_published(_stream(server, token), 1)
        assert tail[-1][1]["subject"] == "db.t"
        deadline = time.monotonic() + 30
        while _metric(server, token, "paimon_meta_service_feed_streams_dropped_total") < 1.0:
            assert time.monotonic() < deadline, "the stalled stream was never ended"
            time.sleep(0.2)
        assert _metric(server, token, "paimon_meta_service_feed_streams") == 0.0
        stalled.close()
    finally:
        catalog.close()
