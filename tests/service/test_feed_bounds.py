"""Bounded queries (issue 34, item 2): a reader of one quiet table over a log of 300,000 other tables'
events is answered without reading them, and the replica keeps serving others meanwhile; a read that
must look at many events stops at its scan cap with the position it reached (the client continues and
gets every event once); a request past its deadline is answered 503 + Retry-After; a client that
leaves has its query cancelled.

These run on a private Postgres (``private_pg``): the feed's horizon is the oldest transaction of the
whole cluster, which other sessions of a shared server would hold back at random.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.metastore.feed import FeedFilter, Position
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.service import FAST_LOCK, ServiceProcess, free_port, make_principal
from tests.service.helpers import P, auth, seed
from tests.torture.pg import PrivatePostgres

pytestmark = pytest.mark.postgres

OTHER_EVENTS = 300_000


def _conninfo(catalog: MetastoreCatalog) -> str:
    return libpq_conninfo(catalog.engine.url)


def _fill(catalog: MetastoreCatalog, count: int, *, database: str = "noise", every: int = 0) -> None:
    """``count`` lock events of 100 tables of ``database`` in one statement (each ``every``-th, when
    set, a ``released`` event; the others ``acquired``)."""
    key = catalog.registry.catalog_key
    with psycopg.connect(_conninfo(catalog), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO paimon_lock_events (lock_id, event_type, owner) "
            "SELECT %s || '.' || %s || '.t' || (g %% 100), "
            "CASE WHEN %s > 0 AND g %% %s = 0 THEN 'released' ELSE 'acquired' END, 'noise' "
            "FROM generate_series(1, %s) g",
            (key, database, every, max(every, 1), count),
        )


def _wait(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture
def catalog(private_pg: PrivatePostgres, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    cat = paimon_meta.connect(private_pg.url, str(tmp_path / "warehouse"), **FAST_LOCK)
    try:
        yield cat
    finally:
        cat.close()


@contextlib.contextmanager
def _client(catalog: MetastoreCatalog, **settings: Any) -> Iterator[TestClient]:
    config = ServiceSettings(auth_cache_seconds=0, max_body_bytes=1 << 20, **settings)
    app = create_app(config, state=ServiceState(config, catalog))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


_READER = """
import sys, httpx, concurrent.futures as cf
base, token, other, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
h = {"Authorization": "Bearer " + token}
def feed(params):
    r = httpx.get(base + "/v1/paimon/events", params=params, headers=h, timeout=None)
    return r.status_code
with cf.ThreadPoolExecutor(n + 1) as pool:
    slow = [pool.submit(feed, p) for p in [{"table": "none.none"}, {}, {"kind": "acquired"}] * n][:n]
    served = httpx.get(base + "/v1/paimon/databases", headers={"Authorization": "Bearer " + other},
                       timeout=None).status_code
    print("other", served)
    print("feed", sorted({f.result() for f in slow}))
"""


def test_a_one_table_reader_over_300k_other_events_is_answered_and_others_are_served(
    catalog: MetastoreCatalog, private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    seed(catalog, "quiet.t")
    reader = make_principal(catalog, "quiet_reader", [("read", "quiet", "t")])
    other = make_principal(catalog, "other_admin", [("admin", None, None)])
    _fill(catalog, OTHER_EVENTS)
    server = ServiceProcess(
        private_pg.url,
        str(tmp_path / "warehouse"),
        free_port(),
        args=["--workers", "4"],
        log_path=tmp_path / "serve.log",
    ).start()
    try:
        # Four feed reads of the one-table reader at once (each would read the 300k events and hold a
        # worker), then another principal's request: all answered within the subprocess's deadline.
        done = subprocess.run(
            [sys.executable, "-c", _READER, server.base, reader, other, "4"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "other 200" in done.stdout and "feed [200]" in done.stdout, done.stdout
    finally:
        server.stop()


def test_the_scan_cap_returns_the_position_reached_and_the_client_continues_to_the_end(
    catalog: MetastoreCatalog,
) -> None:
    # 3000 events of one database, every 7th a release: a kind filter is not an index lane, so a read
    # looks at every event of the catalog after its position, at most 200 of them per request.
    _fill(catalog, 3000, database="capped", every=7)
    admin = auth(make_principal(catalog, "cap_admin", [("admin", None, None)]))
    with psycopg.connect(_conninfo(catalog)) as conn:
        expected = [
            row[0]
            for row in conn.execute(
                "SELECT event_id FROM paimon_lock_events WHERE lock_id LIKE %s AND event_type = 'released' "
                "ORDER BY txid, event_id",
                (f"{catalog.registry.catalog_key}.capped.%",),
            )
        ]
    assert len(expected) == 3000 // 7
    with _client(catalog, feed_scan_rows=200) as client:
        got: list[int] = []
        token: str | None = None
        capped_pages = 0
        for _ in range(10_000):
            params = {"database": "capped", "kind": "released", "maxResults": 1000}
            answer = client.get(
                f"{P}/events", params=params | ({"pageToken": token} if token else {}), headers=admin
            )
            assert answer.status_code == 200, answer.text
            body = answer.json()
            got += [e["data"]["eventId"] for e in body["events"]]
            if body["nextPageToken"] == token:
                break
            if len(body["events"]) < 1000:
                capped_pages += 1
            token = body["nextPageToken"]
        assert got == expected  # nothing lost, nothing repeated, in feed order
        # The pages ended at the cap (a page of the whole log would have held every release at once).
        assert capped_pages >= 3000 // 200 - 1


def test_scan_feed_stops_at_its_cap_and_says_so(catalog: MetastoreCatalog) -> None:
    from paimon_meta.metastore.feed import scan_feed

    _fill(catalog, 500, database="direct")
    key = catalog.registry.catalog_key
    keep = FeedFilter(database="direct", kinds=("released",))
    page = scan_feed(catalog.engine, catalog_key=key, keep=keep, scan_rows=100)
    assert page.capped and page.events == [] and page.scanned == 100 and page.position > Position(0, 0, 0)
    rest = scan_feed(catalog.engine, catalog_key=key, keep=keep, after=page.position, scan_rows=10**6)
    assert not rest.capped and rest.position > page.position


@contextlib.contextmanager
def _log_locked(catalog: MetastoreCatalog, table: str | None = None) -> Iterator[None]:
    """The lock log (or ``table``) locked against readers (an open transaction holding ACCESS
    EXCLUSIVE)."""
    with psycopg.connect(_conninfo(catalog)) as conn:
        conn.execute(f"LOCK TABLE {table or 'paimon_lock_events'} IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def test_a_feed_page_past_its_deadline_is_answered_503_with_retry_after(catalog: MetastoreCatalog) -> None:
    reader = auth(make_principal(catalog, "deadline_reader", [("admin", None, None)]))
    with _client(catalog, statement_timeouts={"feed": 1.0, "read": 30.0, "write": 60.0}) as client:
        answers: list[Any] = []
        with _log_locked(catalog):
            call = threading.Thread(target=lambda: answers.append(client.get(f"{P}/events", headers=reader)))
            call.start()
            # Without a deadline the page waits for the lock as long as it is held.
            _wait(lambda: answers, "the page's answer while the log is locked")
        call.join()
    answer = answers[0]
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"]
    body = answer.json()
    assert body["code"] == 503 and "deadline" in body["message"] and "feed" in body["message"]


@pytest.mark.parametrize(
    "path", ["/databases/db/tables/t/lock-events", "/databases/db/tables/t/commits", "/ui"]
)
def test_a_read_past_its_deadline_is_answered_503_with_retry_after(
    catalog: MetastoreCatalog, path: str
) -> None:
    """Issue 39 item 5: the audit routes, the commit history and the console's pages are of the ``read``
    class: past its statement timeout a request is 503 + Retry-After, never a 500."""
    name = {"/ui": "console", "/databases/db/tables/t/commits": "commits"}.get(path, "locks")
    seed(catalog, f"deadline.{name}")
    token = make_principal(catalog, f"deadline_{name}", [("admin", None, None)])
    headers = auth(token)
    url = (
        f"/ui/tables/deadline/{name}"
        if path == "/ui"
        else f"{P}{path}".replace("db/tables/t", f"deadline/tables/{name}")
    )
    # the table page lists its lock's events
    with _client(catalog, statement_timeouts={"feed": 30.0, "read": 1.0, "write": 60.0}) as client:
        client.cookies.set("paimon_meta_console", token)
        answers: list[Any] = []
        # the lock log for the lock routes, the commit log for the commit history
        with _log_locked(catalog, "paimon_commit_events" if path.endswith("commits") else None):
            call = threading.Thread(target=lambda: answers.append(client.get(url, headers=headers)))
            call.start()
            _wait(lambda: answers, "the answer while the log is locked")
        call.join()
    answer = answers[0]
    assert answer.status_code == 503, answer.text[:500]
    assert answer.headers["retry-after"] and "deadline" in answer.text, answer.text[:500]


def _feed_queries(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() "
            "AND query LIKE 'WITH h AS (SELECT pg_snapshot_xmin(%'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_client_that_leaves_has_its_query_cancelled(
    catalog: MetastoreCatalog, private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    token = make_principal(catalog, "leaver", [("admin", None, None)])
    conninfo = _conninfo(catalog)
    server = ServiceProcess(
        private_pg.url,
        str(tmp_path / "warehouse"),
        free_port(),
        args=["--statement-timeout", "feed=600"],
        log_path=tmp_path / "serve.log",
    ).start()
    try:
        with _log_locked(catalog):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(
                f"GET /v1/paimon/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
            )
            _wait(lambda: _feed_queries(conninfo) == 1, "the page's query waiting for the lock")
            sock.close()
            # The lock is still held: only a cancel ends the query now.
            _wait(lambda: _feed_queries(conninfo) == 0, "the query cancelled after the client left")
    finally:
        server.stop()
