"""The operator console (``/ui``) in a real browser against real ``paimon-meta serve`` replicas: signing
in, the overview and a table page; a commit by another client in the live view within seconds; a
read-only principal sees no admin action and its forged POSTs are refused with nothing written; an
admin releases a stuck lock with a reason and the event shows in the live view; the live view resumes
across replica kills and a restart with no event lost or repeated. Every page is kept as a screenshot."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import Console, Shots
from tests.browser.console_pages import (
    csrf_of,
    hold_stuck_lock,
    live_ids,
    lock_rows,
    post_form,
    sign_in,
    wait_until,
    written_events,
)
from tests.browser.feed_page import feed_ids
from tests.fixtures.service import FailoverProxy

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

PUBLISHED = "[data-testid=live-event][data-type='org.paimon.commit.snapshot_published']"


def _open_live(page: Page, origin: str) -> None:
    page.goto(f"{origin}/ui/live")
    wait_until(page, "() => window.feedOpens >= 1")


def _count(page: Page, testid: str) -> int:
    return page.locator(f"[data-testid={testid}]").count()


def test_sign_in_see_the_tables_and_open_a_table_page(
    console: Console, browser_context: BrowserContext, shots: Shots
) -> None:
    for k in range(2, 7):  # a few snapshots for the chart
        console.commit("db.orders", k)
    origin = console.server.base
    page = sign_in(browser_context, origin, console.admin_token)
    assert page.text_content("[data-testid=signed-in-as]") == "ops-admin"
    rows = page.locator("[data-testid=overview-table-row]")
    assert sorted(rows.all_inner_texts())[0].startswith("db.orders") and rows.count() == 2
    shots.take(page, "overview")

    page.click("[data-testid=overview-table-row] a:text-is('db.orders')")
    page.wait_for_url(f"{origin}/ui/tables/db/orders")
    assert page.text_content("[data-testid=table-title]") == "db.orders"
    page.wait_for_selector("[data-testid=snapshot-chart] canvas")  # uPlot drew the snapshots
    assert _count(page, "commit-row") == 6 and _count(page, "admin-actions") == 1
    shots.take(page, "table")
    shots.take(page, "table-top", full_page=False)  # docs/img/console-table.png is a copy of this one

    # an admin action from its form: a tag with a reason, shown on the maintenance page
    form = page.locator("[data-testid=create-tag-form]")
    form.locator("input[name=tag]").fill("before-cleanup")
    form.locator("input[name=reason]").fill("keep the state before the cleanup")
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/ui/tables/db/orders?done=*")
    assert page.locator("[data-testid=tag-row]").inner_text().startswith("before-cleanup")

    for path, name in (("/ui/locks", "locks"), ("/ui/maintenance", "maintenance"), ("/ui/live", "live")):
        shots.visit(page, f"{origin}{path}", name)
        if name == "maintenance":
            assert "keep the state before the cleanup" in page.inner_text("[data-testid=maintenance-row]")


def test_a_commit_by_another_client_appears_in_the_live_view_within_seconds(
    console: Console, browser_context: BrowserContext, shots: Shots
) -> None:
    page = sign_in(browser_context, console.server.base, console.reader_token)
    _open_live(page, console.server.base)
    snapshot = console.commit("db.orders", 9)
    committed = time.monotonic()
    row = page.locator(PUBLISHED).filter(has_text="db.orders")
    row.wait_for(timeout=60_000)
    assert time.monotonic() - committed < 5.0
    assert str(snapshot) in row.inner_text()
    shots.take(page, "live")


def test_a_read_only_principal_sees_no_admin_action_and_forged_posts_are_refused(
    console: Console, new_context: Callable[[], BrowserContext], shots: Shots
) -> None:
    lock_id = hold_stuck_lock(console, "db.orders")
    origin = console.server.base
    admin = sign_in(new_context(), origin, console.admin_token)
    elsewhere = csrf_of(admin)  # a valid CSRF token, of another session
    page = sign_in(new_context(), origin, console.reader_token)
    own = csrf_of(page)

    shots.visit(page, f"{origin}/ui/tables/db/orders", "reader-table")
    assert _count(page, "table-title") == 1 and _count(page, "admin-actions") == 0
    shots.visit(page, f"{origin}/ui/locks", "reader-locks")
    assert _count(page, "lock-row") == 1 and _count(page, "release-lock") == 0

    before = written_events(console)
    latest = console.catalog.get_table("db.orders").latest_snapshot()
    reason = {"reason": "forged"}
    actions = {
        "/ui/locks/release": {"lock_id": lock_id, **reason},
        "/ui/tables/db/orders/rollback": {"snapshot_id": "1", **reason},
        "/ui/tables/db/orders/recover": reason,
        "/ui/tables/db/orders/tags": {"tag": "forged", **reason},
        "/ui/tables/db/orders/tags/forged/delete": reason,
    }
    for path, fields in actions.items():
        for csrf in (None, elsewhere, own):  # none, another session's, its own (then the grant refuses)
            form = fields if csrf is None else {**fields, "csrf_token": csrf}
            assert post_form(page, path, form) == 403, (path, csrf)
        # the same POST from the page's request context (its cookie, no Origin header)
        answer = page.request.post(f"{origin}{path}", form={**fields, "csrf_token": own}, max_redirects=0)
        assert answer.status == 403, path

    # the admin's own session, without its CSRF token or with the reader's: refused all the same
    for csrf in (None, own):
        form = {"lock_id": lock_id, **reason} | ({} if csrf is None else {"csrf_token": csrf})
        assert post_form(admin, "/ui/locks/release", form) == 403, csrf

    assert lock_rows(console) == [lock_id]
    assert written_events(console) == before
    assert console.catalog.get_table("db.orders").latest_snapshot() == latest
    page.reload()
    assert _count(page, "lock-row") == 1


def test_an_admin_releases_a_stuck_lock_with_a_reason_and_the_event_shows_up(
    console: Console, browser_context: BrowserContext, shots: Shots
) -> None:
    lock_id = hold_stuck_lock(console, "db.orders")
    origin = console.server.base
    live = sign_in(browser_context, origin, console.admin_token)
    _open_live(live, origin)
    page = browser_context.new_page()
    shots.visit(page, f"{origin}/ui/locks", "locks-held")
    row = page.locator("[data-testid=lock-row]").filter(has_text=lock_id)
    row.locator("input[name=reason]").fill("writer pod evicted mid-commit")
    row.locator("[data-testid=release-lock]").click()
    page.wait_for_url("**/ui/locks?done=*")
    assert _count(page, "lock-row") == 0 and lock_rows(console) == []
    shots.take(page, "locks-released")

    released = live.locator("[data-testid=live-event][data-type='org.paimon.lock.force_released']")
    released.wait_for(timeout=60_000)
    assert "writer pod evicted mid-commit" in released.inner_text()
    assert "db.orders" in released.inner_text()
    shots.take(live, "live-released")
    events = written_events(console)["paimon_lock_events"]
    [event] = [e for e in events if e["lock_id"] == lock_id and e["event_type"] == "force_released"]
    assert event["reason"] == "writer pod evicted mid-commit"
    assert event["operator"].startswith("ops-admin")


def test_the_live_view_resumes_across_replica_kills_and_a_restart_without_gaps(
    console: Console, browser_context: BrowserContext, shots: Shots
) -> None:
    first, second = console.server, console.spawn()
    proxy = FailoverProxy([first.port, second.port])  # a new connection goes to the first replica alive
    try:
        page = sign_in(browser_context, proxy.base, console.admin_token)  # the cookie holds the token:
        before = feed_ids(first.base, console.admin_token)  # any replica serves the session
        _open_live(page, proxy.base)
        console.commit("db.orders", 1)
        page.locator(PUBLISHED).first.wait_for()

        first.kill()  # the live view's stream breaks; it reconnects through the proxy to the second
        console.commit("db.users", 2)
        page.locator(PUBLISHED).nth(1).wait_for()
        assert proxy.used[-1] == second.port
        shots.take(page, "live-after-first-killed")

        first.start()  # the first comes back, the second dies: the view goes back to the first
        second.kill()
        console.commit("db.orders", 3)
        page.locator(PUBLISHED).nth(2).wait_for()
        assert proxy.used[-1] == first.port
        shots.take(page, "live-after-second-killed")

        # the view got exactly the feed's events after it opened: none lost, none twice, in order
        expected = feed_ids(first.base, console.admin_token)[len(before) :]
        wait_until(page, "n => window.feedIds.length >= n", len(expected))
        assert live_ids(page) == expected
        assert page.locator("[data-testid=live-event]").count() == len(expected)
        rows = page.locator("[data-testid=live-event]").evaluate_all("rs => rs.map(r => r.dataset.id)")
        assert rows[::-1] == expected  # the rows shown (newest first) are those events, each once
        assert page.evaluate("window.feedOpens") == 3
    finally:
        proxy.close()
