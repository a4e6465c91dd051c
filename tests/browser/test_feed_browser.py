"""The change feed of the API (``GET /v1/{prefix}/events``, named events) in a real browser, Chromium's
own EventSource: a commit made by another client reaches the page within seconds; the stream resumes
with ``Last-Event-ID`` across replica kills and a restart, behind a failover proxy, with no event lost or
repeated. (The console's live view, its own stream, has the same tests in test_console_browser.)"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import Console, Shots
from tests.browser.feed_page import EVENTS_PATH, feed_ids, open_feed_page, seen, wait_for_snapshot
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import FailoverProxy

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def test_the_browser_gets_commits_within_seconds_and_resumes_across_replica_restarts_without_gaps(
    console: Console, browser_context: BrowserContext, shots: Shots
) -> None:
    first, second = console.server, console.spawn()
    proxy = FailoverProxy([first.port, second.port])  # a new connection goes to the first replica alive
    try:
        streams: list[str] = []
        browser_context.on("request", lambda r: streams.append(r.url) if EVENTS_PATH in r.url else None)
        page = open_feed_page(browser_context, proxy.base, console.reader_token)
        wait_for_snapshot(page, "db.users", 1)  # the backlog, from the start
        assert {e["subject"] for e in seen(page)} == {"db.orders", "db.users"}
        assert proxy.used[-1] == first.port

        # a commit by another client reaches the page within seconds
        snapshot = console.commit("db.orders", 1)
        committed = time.monotonic()
        wait_for_snapshot(page, "db.orders", snapshot, timeout_ms=60_000)
        assert time.monotonic() - committed < 5.0

        first.kill()  # the stream breaks; the browser reconnects, through the proxy, to the second
        snapshot = console.commit("db.orders", 2)
        wait_for_snapshot(page, "db.orders", snapshot)
        assert proxy.used[-1] == second.port
        shots.take(page, "after-first-killed")

        first.start()  # the first comes back; then the second dies: the browser goes back to the first
        second.kill()
        snapshot = console.commit("db.users", 3)
        wait_for_snapshot(page, "db.users", snapshot)
        assert proxy.used[-1] == first.port
        shots.take(page, "after-second-killed")

        # what the browser got is the feed itself: every event once, in the feed's order. A reconnection
        # without Last-Event-ID would have started again from the first event (repeats); one that skipped
        # ahead would have lost the events committed while the page was away (gaps).
        expected = feed_ids(first.base, console.reader_token)
        page.wait_for_function("n => window.seen.length >= n", arg=len(expected), polling=50)
        assert [e["id"] for e in seen(page)] == expected
        assert page.evaluate("window.opens") == 3 and len(streams) >= 3
    finally:
        proxy.close()
