"""Driving the operator console (``/ui``) in the browser: signing in through its form, the ids of the
events its live view receives, forged actions sent from a page's own context."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from tests.browser.conftest import Console

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page

#: Run in every page before its own scripts: the live view's EventSource also records each event's id
#: (its row in the page shows the event, not its position in the feed) in ``window.feedIds``, and each
#: (re)connection in ``window.feedOpens``.
RECORD_EVENT_IDS = """(() => {
  const Original = window.EventSource;
  window.feedIds = []; window.feedOpens = 0;
  window.EventSource = class extends Original {
    constructor(url, init) {
      super(url, init);
      this.addEventListener("open", () => { window.feedOpens += 1; });
      this.addEventListener("message", (m) => { window.feedIds.push(m.lastEventId); });
    }
  };
})();"""


def sign_in(context: BrowserContext, origin: str, token: str) -> Page:
    """A page of ``context`` signed in to the console at ``origin`` with ``token``, on the overview."""
    context.add_init_script(RECORD_EVENT_IDS)
    page = context.new_page()
    page.goto(f"{origin}/ui/login")
    page.fill("input[name=token]", token)
    page.click("form[action$='/login'] button[type=submit]")
    page.wait_for_url(f"{origin}/ui/")
    return page


def csrf_of(page: Page) -> str:
    """The session's CSRF token as the page carries it (the sign-out form has one on every page)."""
    value = page.get_attribute("input[name=csrf_token]", "value")
    assert value, "no csrf_token on the page"
    return value


def post_form(page: Page, path: str, fields: dict[str, str]) -> int:
    """POST ``fields`` urlencoded to ``path`` with the page's own ``fetch`` (its cookie, its Origin), as a
    script on a signed-in page could; the status (redirects not followed)."""
    status: int = page.evaluate(
        """async ([path, fields]) => {
             const answer = await fetch(path, {method: "POST", body: new URLSearchParams(fields),
                                               redirect: "manual"});
             return answer.type === "opaqueredirect" ? 303 : answer.status;
           }""",
        [path, fields],
    )
    return status


def wait_until(page: Page, expression: str, arg: Any = None, timeout: float = 60.0) -> None:
    """Until ``expression`` (a function of ``arg``) is true in ``page``. Polled from here: the console's
    Content-Security-Policy forbids the ``eval`` that ``Page.wait_for_function`` needs."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression, arg):
        assert time.monotonic() < deadline, f"not true within {timeout} s: {expression}"
        time.sleep(0.05)


def live_ids(page: Page) -> list[str]:
    ids: list[str] = page.evaluate("window.feedIds")
    return ids


def hold_stuck_lock(console: Console, table: str) -> str:
    """A lock row on ``table`` as Java's JdbcCatalogLock leaves it when its holder dies (no owner, no
    heartbeat, within its expiry: only a forced release frees it); its lock id."""
    lock_id = f"{console.catalog.registry.catalog_key}.{table}"
    with console.catalog.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO paimon_distributed_locks (lock_id, expire_time_seconds) VALUES (:l, 3600)"),
            {"l": lock_id},
        )
    return lock_id


def lock_rows(console: Console) -> list[str]:
    with console.catalog.engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT lock_id FROM paimon_distributed_locks"))]


def written_events(console: Console) -> dict[str, list[dict[str, Any]]]:
    """Every lock and maintenance event in the log (what an action would have written)."""
    out: dict[str, list[dict[str, Any]]] = {}
    with console.catalog.engine.connect() as conn:
        for log in ("paimon_lock_events", "paimon_maintenance_events"):
            rows = conn.execute(text(f"SELECT * FROM {log} ORDER BY event_id"))  # noqa: S608 - constants
            out[log] = [dict(r._mapping) for r in rows]
    return out
