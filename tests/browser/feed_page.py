"""A minimal page that follows the change feed with the browser's own ``EventSource``, served by the
test at the origin it is opened on (Playwright answers the request; the service never sees it), so the
stream is same-origin and the browser resends ``Last-Event-ID`` itself when it reconnects. The bearer
token rides on every request of the context (``extra_http_headers``): EventSource cannot set headers.

``window.seen`` holds ``{id, type, subject, data}`` per event, ``window.opens`` counts the stream's
(re)connections."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx

from paimon_meta.db.models import CommitEventType, LockEventType, MaintenanceEventType, MaintenanceOperation
from paimon_meta.rest import paths

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page, Route

#: Where the page is served (by the test) on the origin it is opened at.
PAGE_PATH = "/_browser-test/feed"
EVENTS_PATH = "/v1/paimon/events"

#: Every CloudEvents type the feed can send: an EventSource only delivers the types it listens for.
EVENT_TYPES = sorted(
    [f"org.paimon.commit.{k}" for k in CommitEventType]
    + [f"org.paimon.lock.{k}" for k in LockEventType]
    + [f"org.paimon.maintenance.{op}.{k}" for op in MaintenanceOperation for k in MaintenanceEventType]
)

_HTML = """<!doctype html><meta charset="utf-8"><title>change feed (browser test)</title>
<style>body{font:14px sans-serif;margin:2em} li{font-family:monospace}</style>
<h1>change feed</h1><p id="state">connecting</p><ol id="events"></ol>
<script>
window.seen = []; window.opens = 0;
const source = new EventSource(%(url)s);
const state = document.getElementById("state");
source.onopen = () => { window.opens += 1; state.textContent = "open (" + window.opens + ")"; };
source.onerror = () => { state.textContent = "reconnecting"; };
for (const type of %(types)s) {
  source.addEventListener(type, (message) => {
    const event = JSON.parse(message.data);
    window.seen.push({id: message.lastEventId, type: event.type, subject: event.subject, data: event.data});
    const item = document.createElement("li");
    item.textContent = message.lastEventId + "  " + event.type + "  " + event.subject;
    document.getElementById("events").append(item);
  });
}
</script>"""


def open_feed_page(context: BrowserContext, origin: str, token: str) -> Page:
    """A page at ``origin`` following the feed with ``token``."""
    body = _HTML % {"url": json.dumps(EVENTS_PATH), "types": json.dumps(EVENT_TYPES)}

    def serve(route: Route) -> None:
        route.fulfill(status=200, content_type="text/html; charset=utf-8", body=body)

    context.set_extra_http_headers({"Authorization": f"Bearer {token}"})
    context.route(f"{origin}{PAGE_PATH}", serve)
    page = context.new_page()
    page.goto(f"{origin}{PAGE_PATH}")
    return page


def seen(page: Page) -> list[dict[str, Any]]:
    """The events the page has received so far, in order."""
    events: list[dict[str, Any]] = page.evaluate("window.seen")
    return events


def wait_for_snapshot(page: Page, subject: str, snapshot_id: int, timeout_ms: float = 60_000) -> None:
    """Until the page has received ``subject``'s ``snapshot_published`` of ``snapshot_id``."""
    page.wait_for_function(
        """([subject, id]) => window.seen.some(e => e.type === "org.paimon.commit.snapshot_published"
               && e.subject === subject && e.data.snapshotId === id)""",
        arg=[subject, snapshot_id],
        timeout=timeout_ms,
        polling=50,
    )


def feed_ids(base: str, token: str) -> list[str]:
    """Every event id the feed holds for ``token``, paged over the API (not through the browser)."""
    ids: list[str] = []
    params = {paths.MAX_RESULTS: "1000"}
    while True:
        answer = httpx.get(
            f"{base}{EVENTS_PATH}", params=params, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        answer.raise_for_status()
        body = answer.json()
        if not body["events"]:
            return ids
        ids.extend(e["id"] for e in body["events"])
        params[paths.PAGE_TOKEN] = body["nextPageToken"]
