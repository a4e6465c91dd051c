"""The change feed over HTTP (``GET /v1/{prefix}/events``): every table's commit, lock and maintenance
events the caller may read and the catalog's governance events it may see (``feed.may_see_governance``),
as CloudEvents 1.0, oldest first, resumable with nothing lost or repeated (``metastore.feed`` says why).

Two ways to read it: pages (JSON; resume from the ``nextPageToken`` of the previous answer; an empty
page means nothing new yet), or, with ``Accept: text/event-stream``, a live stream of Server-Sent Events
(``id`` the event's position, ``event`` its type, ``data`` the CloudEvent), resumable with the standard
``Last-Event-ID`` header (or ``pageToken``), with a comment line every ``HEARTBEAT_SECONDS`` so idle
proxies keep it open.

Streams share one reader of the log per replica (service.feed_hub: woken by NOTIFY, a ring of the newest
events in memory); a stream takes its events from the ring, filtered by its own filter and grants, and
reads the log itself only while it is behind the ring (it resumed from an old id, or its client read
slowly). A stream writes no faster than its client reads, and one whose client takes no write for
``feed_send_timeout_seconds`` is ended (its client resumes with the last id it received): a slow
subscriber holds no lock, no transaction and no buffer, and commits never wait for it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Annotated

import anyio
import anyio.to_thread
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy import Engine
from starlette.types import Message, Receive, Scope, Send

from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Resource, java_blank
from paimon_meta.metastore.feed import (
    GOVERNANCE,
    START,
    FeedEvent,
    FeedFilter,
    FeedPage,
    Position,
    Reach,
    cloud_event,
    feed_head,
    kept,
    may_see_governance,
    scan_feed,
)
from paimon_meta.metastore.principals import Access
from paimon_meta.rest import models, paths
from paimon_meta.service.deps import catalog_of, served_of, state_of
from paimon_meta.service.errors import NotAuthenticatedError
from paimon_meta.service.feed_hub import FeedHub
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import AUTHENTICATED, BEARER, ERRORS, PREFIX, MaxResults, PageToken
from paimon_meta.service.streams.rights import DRAINING, UNCOVERED, WHY, Verdict

log = logging.getLogger(__name__)
#: The reconnection delay a stream ended by a drain tells its client (an SSE ``retry:`` field).
DRAIN_RETRY_MS = 1000

router = APIRouter(
    route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS, tags=["change feed"]
)

#: Seconds between reads of the log by a stream that is behind the ring and found nothing new (the hub
#: was not reading yet); and between heartbeat comments.
POLL_SECONDS = 0.5
HEARTBEAT_SECONDS = 15.0
#: The most events a stream sends in one write.
_EVENTS_PER_WRITE = 100
#: The media type of the live stream.
EVENT_STREAM = "text/event-stream"
#: Events per page when the caller names no ``maxResults``.
DEFAULT_PAGE = 100
MAX_PAGE = 1000


@router.get(
    paths.CATALOG_EVENTS,
    response_model=models.ListCatalogEventsResponse,
    responses={200: {"content": {EVENT_STREAM: {}}, "description": "A page, or the live stream (SSE)."}},
)
def list_catalog_events(
    request: Request,
    access: Annotated[Access, AUTHENTICATED],
    max_results: MaxResults = None,
    page_token: PageToken = None,
    table: Annotated[str | None, Query(alias=paths.FEED_TABLE, max_length=256)] = None,
    database: Annotated[str | None, Query(alias=paths.FEED_DATABASE, max_length=256)] = None,
    kind: Annotated[str | None, Query(alias=paths.FEED_KIND, max_length=1024)] = None,
    principal: Annotated[str | None, Query(alias=paths.FEED_PRINCIPAL, max_length=256)] = None,
    since: Annotated[datetime | None, Query(alias=paths.FEED_SINCE)] = None,
    until: Annotated[datetime | None, Query(alias=paths.FEED_UNTIL)] = None,
) -> models.ListCatalogEventsResponse | Response:
    """Events after ``pageToken`` (or ``Last-Event-ID``; from the start without either; ``pageToken=now``:
    from now on, with the position to follow from as the next page token) of the tables
    the caller may read, and the governance changes (grants, policies, memberships) of resources it may
    grant on; the filters keep one table (``db.t``), a database, kinds
    (``snapshot_published,failed``; a maintenance run's are ``<operation>.<started|finished|failed>``;
    ``governance``: every governance change), a principal, a time range. ``Accept: text/event-stream``:
    the live stream."""
    limit = DEFAULT_PAGE if max_results is None else max_results
    if not 0 < limit <= MAX_PAGE:
        raise ValidationError(f"maxResults must be between 1 and {MAX_PAGE}", field="maxResults")
    last_event_id = request.headers.get("last-event-id")
    if page_token == paths.FEED_NOW:  # from now on: after every event already visible
        after = feed_head(catalog_of(request).engine)
    elif page_token:
        after = Position.parse(page_token)
    elif last_event_id:
        after = Position.parse(last_event_id, field="Last-Event-ID")
    else:
        after = START
    keep = FeedFilter(
        subject=table,
        database=database,
        kinds=tuple(k.strip() for k in kind.split(",") if k.strip()) if kind else (),
        principal=principal,
        since=since,
        until=until,
    )

    if request.headers.get("accept", "").startswith(EVENT_STREAM):
        return event_stream_response(request, access, keep, after)
    feed = _feed(request, access, keep, limit)
    page = feed.read(after)
    return models.ListCatalogEventsResponse(
        events=[feed.cloud_event(e) for e in page.events], next_page_token=page.position.token()
    )


def event_stream_response(request: Request, access: Access, keep: FeedFilter, after: Position) -> Response:
    """The live stream of the events after ``after`` that ``keep`` keeps and ``access`` may read, as
    Server-Sent Events (the route above; the console's live view). Takes a stream slot of the replica
    and of the principal (503 when the replica's are taken, 429 when the principal holds its share) and
    gives it back however the stream ends. Its principal's rights are re-checked while it is open
    (service.streams.rights): it ends, saying why, once they no longer let it deliver what it does."""
    state = state_of(request)
    token: str | None = request.scope.get("state", {}).get("credential")
    if token is None:  # every stream's request was authenticated by the middleware, which keeps it
        raise NotAuthenticatedError("a live stream needs a token or a console session")
    served = served_of(request)
    # The credential is re-checked with all its grants (its streams may be of several catalogs); this
    # stream sends under those of its catalog only, now and at every re-check.
    full: Access = getattr(request.state, "access", None) or access
    access = full.in_catalog(served.key, default=served.default)
    state.open_feed_stream(access.principal, served.name)
    rights = state.stream_rights
    credential = rights.watch(token, full)
    covered = _covers(access, keep)

    def verdict() -> Verdict:
        if state.draining:  # SIGTERM: every stream ends at once, its client reconnects elsewhere
            return Verdict(None, DRAINING)
        return stream_verdict(
            rights.verdict(credential), served.key, default=served.default, keep=keep, covered=covered
        )

    def release() -> None:
        rights.release(credential)
        state.close_feed_stream(access.principal, served.name)

    def ended(reason: str) -> None:
        state.metrics.feed_streams_ended.labels(catalog=served.name, reason=reason).inc()
        log.info("change feed: a stream of %r ended: %s", access.principal, WHY[reason])

    feed = _feed(request, access, keep, DEFAULT_PAGE)
    return FeedStreamResponse(
        feed.stream(after, state.feed_hub(served), verdict, ended, recheck=rights.interval),
        send_timeout=state.settings.feed_send_timeout_seconds,
        on_drop=state.metrics.feed_streams_dropped.labels(catalog=served.name).inc,
        release=release,
    )


def stream_verdict(
    now: Verdict, catalog_key: str, *, default: bool, keep: FeedFilter, covered: bool
) -> Verdict:
    """A stream's verdict within its catalog: the rights as re-checked, narrowed to the catalog
    ``catalog_key``; the stream ends (``UNCOVERED``) when they no longer cover, at the verdict's time,
    what it was opened to deliver (``covered``: they did when it opened): a revoked grant after the
    next re-check, an assignment at its ``expireTime``."""
    if now.access is None:
        return now
    access = now.access.in_catalog(catalog_key, default=default)
    if covered and not _covers(access, keep, at=now.at):
        return Verdict(None, UNCOVERED)
    return Verdict(access, now.ended, now.at)


def _covers(access: Access, keep: FeedFilter, *, at: datetime | None = None) -> bool:
    """Whether ``access`` may read what a stream filtered by ``keep`` delivers at ``at`` (now): its
    table, something of its database, or (unfiltered) anything at all."""
    if keep.subject is not None:
        database, _, table = keep.subject.partition(".")
        return may_read(access, database, table, at)
    if keep.database is not None:
        return access.sees(keep.database, at=at)
    return access.holds_any(at=at)


def may_read(access: Access, database: str, table: str, at: datetime | None = None) -> bool:
    """Whether ``access`` may read the events of ``database.table`` (``SELECT`` on it); a subject naming
    no table (a lock of no table) is a catalog-wide reader's only."""
    if java_blank(database) or java_blank(table):
        return access.may(A.SELECT, Resource.catalog_all(), at=at)
    return access.may(A.SELECT, Resource.table(database, table), at=at)


class FeedStreamResponse(StreamingResponse):
    """A live stream that ends when its client takes no write for ``send_timeout`` seconds (the write
    waits while the client's socket buffers are full). The client resumes with the last id it got.
    ``release`` runs once when the response is over, however it ends (its slots given back)."""

    def __init__(
        self,
        content: AsyncIterator[str],
        *,
        send_timeout: float,
        on_drop: Callable[[], None],
        release: Callable[[], None],
    ) -> None:
        super().__init__(
            content,
            media_type=EVENT_STREAM,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.send_timeout, self.on_drop = send_timeout, on_drop
        self._release: Callable[[], None] | None = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()

    def release(self) -> None:
        """Give the stream's slots back (once; also when the response never ran)."""
        release, self._release = self._release, None
        if release is not None:
            release()

    async def stream_response(self, send: Send) -> None:
        async def timed(message: Message) -> None:
            with anyio.fail_after(self.send_timeout):
                await send(message)

        try:
            await super().stream_response(timed)
        except TimeoutError:
            self.on_drop()
            log.warning(
                "change feed: a stream's client took nothing for %.0fs: stream ended", self.send_timeout
            )
        finally:
            # End the generator now, not when collected.
            closing = getattr(self.body_iterator, "aclose", None)
            if closing is not None:
                with anyio.CancelScope(shield=True):
                    await closing()


def _feed(request: Request, access: Access, keep: FeedFilter, limit: int) -> _Feed:
    served = served_of(request)
    return _Feed(
        served.catalog.engine,
        served.key,
        served.default,
        keep,
        access,
        served.name,
        limit,
        state_of(request).settings.feed_scan_rows,
    )


class _Feed:
    """The feed as one caller may read it: pages, or a live stream of Server-Sent Events. ``access``:
    what the caller may read (a stream replaces it with its principal's rights as they are now)."""

    def __init__(
        self,
        engine: Engine,
        catalog_key: str,
        default: bool,
        keep: FeedFilter,
        access: Access,
        catalog: str,
        limit: int,
        scan_rows: int,
    ) -> None:
        self.engine, self.catalog_key, self.keep, self.access = engine, catalog_key, keep, access
        self.default = default
        self.catalog, self.limit, self.scan_rows = catalog, limit, scan_rows
        #: When ``access`` is decided (a stream's verdict's time; None: now, at each decision).
        self.at: datetime | None = None

    def visible(self, event: FeedEvent) -> bool:
        if event.position.rank == GOVERNANCE:
            return may_see_governance(self.access, event, self.at)
        return may_read(self.access, event.database, event.table, self.at)

    def read(self, after: Position) -> FeedPage:
        """The next page after ``after``: only the tables the caller may read are read (its grants as
        lanes of the log), at most ``scan_rows`` events of them (then the page says how far it got)."""
        return scan_feed(
            self.engine,
            catalog_key=self.catalog_key,
            default=self.default,
            after=after,
            limit=self.limit,
            keep=self.keep,
            visible=self.visible,
            reach=Reach.of(self.access, self.at),
            scan_rows=self.scan_rows,
        )

    def cloud_event(self, event: FeedEvent) -> models.CloudEvent:
        return models.CloudEvent.model_validate(cloud_event(event, self.catalog))

    def frame(self, event: FeedEvent) -> str:
        """``event`` as one Server-Sent Event (the same for every stream of the replica: the hub keeps
        it for them)."""
        cloud = self.cloud_event(event)
        body = cloud.model_dump_json(by_alias=True)
        return f"id: {cloud.id}\nevent: {cloud.type}\ndata: {body}\n\n"

    async def stream(
        self,
        after: Position,
        hub: FeedHub,
        verdict: Callable[[], Verdict],
        ended: Callable[[str], None],
        *,
        recheck: float,
    ) -> AsyncIterator[str]:
        """The events after ``after``. Before each write of events (and at least every ``recheck``
        seconds while idle) ``verdict()`` says under which rights to send: events are filtered by them,
        nothing is sent while they are not re-checked, and the stream ends with a comment saying why
        when they no longer allow it (``ended(reason)`` is told)."""
        yield f": paimon-meta change feed after {after.token()}\nretry: 1000\n\n"
        cursor, quiet_since = after, time.monotonic()
        while True:
            now = verdict()
            if now.ended is not None:
                ended(now.ended)
                hint = f"retry: {DRAIN_RETRY_MS}\n" if now.ended == DRAINING else ""
                yield f"{hint}: stream ended: {WHY[now.ended]}\n\n"
                return
            seen, sent, capped = hub.seq, False, False
            if now.access is not None:
                self.access, self.at = now.access, now.at
                shared = hub.after(cursor)
                if shared is None:
                    # Behind the ring (or the hub has not started): read the log itself, on a worker
                    # thread, at most a page's scan cap at a time (then at once again from where it got).
                    page = await anyio.to_thread.run_sync(self.read, cursor)
                    events, reached, capped = page.events, page.position, page.capped
                else:
                    ring, reached = shared
                    events = [e for e in ring if kept(e, self.keep)]
                # A write per chunk of events, not per event (the send costs more than the event); the
                # rights are looked at again before each (a slow client's chunks are minutes apart).
                for i in range(0, len(events), _EVENTS_PER_WRITE):
                    if i:
                        now = verdict()
                        if now.access is None:  # resume after the last event sent, once allowed
                            reached = events[i - 1].position
                            break
                        self.access, self.at = now.access, now.at
                    chunk = [e for e in events[i : i + _EVENTS_PER_WRITE] if self.visible(e)]
                    if chunk:
                        yield "".join(hub.render(e, self.frame) for e in chunk)
                        sent = True
                cursor = reached
                if sent:
                    quiet_since = time.monotonic()
                    continue
                if capped:
                    # Nothing for this stream in what the read reached, and more after it: read on now
                    # (the heartbeat still goes out while the reads find nothing).
                    if time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                        yield ": keep-alive\n\n"
                        quiet_since = time.monotonic()
                    continue
            else:
                shared = None
            idle = time.monotonic() - quiet_since
            if idle >= HEARTBEAT_SECONDS:
                yield ": keep-alive\n\n"
                quiet_since, idle = time.monotonic(), 0.0
            wait = min(HEARTBEAT_SECONDS - idle, recheck)
            await hub.changed(seen, wait if shared is not None else min(wait, POLL_SECONDS))
