"""The change feed over HTTP (``GET /v1/{prefix}/events``): every table's commit, lock and maintenance
events the caller may read, as CloudEvents 1.0, oldest first, resumable with nothing lost or repeated
(``metastore.feed`` says why).

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
from starlette.types import Message, Send

from paimon_meta.db.models import Privilege
from paimon_meta.errors import ValidationError
from paimon_meta.metastore.feed import START, FeedEvent, FeedFilter, Position, cloud_event, kept, read_feed
from paimon_meta.metastore.principals import Access
from paimon_meta.rest import models, paths
from paimon_meta.service.deps import catalog_of, state_of
from paimon_meta.service.errors import OverloadedError
from paimon_meta.service.feed_hub import FeedHub
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import AUTHENTICATED, BEARER, ERRORS, PREFIX, MaxResults, PageToken

log = logging.getLogger(__name__)

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
    """Events after ``pageToken`` (or ``Last-Event-ID``; from the start without either) of the tables
    the caller may read; the filters keep one table (``db.t``), a database, kinds
    (``snapshot_published,failed``; a maintenance run's are ``<operation>.<started|finished|failed>``),
    a principal, a time range. ``Accept: text/event-stream``: the live stream."""
    limit = DEFAULT_PAGE if max_results is None else max_results
    if not 0 < limit <= MAX_PAGE:
        raise ValidationError(f"maxResults must be between 1 and {MAX_PAGE}", field="maxResults")
    last_event_id = request.headers.get("last-event-id")
    if page_token:
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
    events, cursor = feed.read(after)
    return models.ListCatalogEventsResponse(
        events=[feed.cloud_event(e) for e in events], next_page_token=cursor.token()
    )


def event_stream_response(request: Request, access: Access, keep: FeedFilter, after: Position) -> Response:
    """The live stream of the events after ``after`` that ``keep`` keeps and ``access`` may read, as
    Server-Sent Events (the route above; the console's live view). Takes a stream slot of the replica
    (503 when all are taken) and gives it back however the stream ends."""
    state = state_of(request)
    if not state.open_feed_stream():
        raise OverloadedError(
            f"this replica has {state.settings.max_feed_streams} change-feed streams open; retry shortly"
            " or page the feed"
        )
    feed = _feed(request, access, keep, DEFAULT_PAGE)
    return FeedStreamResponse(
        _closing(feed.stream(after, state.feed_hub()), state.close_feed_stream),
        send_timeout=state.settings.feed_send_timeout_seconds,
        on_drop=state.metrics.feed_streams_dropped.inc,
    )


class FeedStreamResponse(StreamingResponse):
    """A live stream that ends when its client takes no write for ``send_timeout`` seconds (the write
    waits while the client's socket buffers are full). The client resumes with the last id it got."""

    def __init__(
        self, content: AsyncIterator[str], *, send_timeout: float, on_drop: Callable[[], None]
    ) -> None:
        super().__init__(
            content,
            media_type=EVENT_STREAM,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.send_timeout, self.on_drop = send_timeout, on_drop

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
            # End the generator now (its ``finally`` gives the stream's slot back), not when collected.
            closing = getattr(self.body_iterator, "aclose", None)
            if closing is not None:
                with anyio.CancelScope(shield=True):
                    await closing()


def _feed(request: Request, access: Access, keep: FeedFilter, limit: int) -> _Feed:
    def visible(event: FeedEvent) -> bool:
        return access.allows(Privilege.READ, event.database, event.table)

    catalog = catalog_of(request)
    return _Feed(
        catalog.engine,
        catalog.registry.catalog_key,
        keep,
        visible,
        state_of(request).settings.catalog_name,
        limit,
    )


class _Feed:
    """The feed as one caller may read it: pages, or a live stream of Server-Sent Events."""

    def __init__(
        self,
        engine: Engine,
        catalog_key: str,
        keep: FeedFilter,
        visible: Callable[[FeedEvent], bool],
        catalog: str,
        limit: int,
    ) -> None:
        self.engine, self.catalog_key, self.keep, self.visible = engine, catalog_key, keep, visible
        self.catalog, self.limit = catalog, limit

    def read(self, after: Position) -> tuple[list[FeedEvent], Position]:
        return read_feed(
            self.engine,
            catalog_key=self.catalog_key,
            after=after,
            limit=self.limit,
            keep=self.keep,
            visible=self.visible,
        )

    def cloud_event(self, event: FeedEvent) -> models.CloudEvent:
        return models.CloudEvent.model_validate(cloud_event(event, self.catalog))

    def frame(self, event: FeedEvent) -> str:
        """``event`` as one Server-Sent Event (the same for every stream of the replica: the hub keeps
        it for them)."""
        cloud = self.cloud_event(event)
        body = cloud.model_dump_json(by_alias=True)
        return f"id: {cloud.id}\nevent: {cloud.type}\ndata: {body}\n\n"

    async def stream(self, after: Position, hub: FeedHub) -> AsyncIterator[str]:
        yield f": paimon-meta change feed after {after.token()}\nretry: 1000\n\n"
        cursor, quiet_since = after, time.monotonic()
        while True:
            seen = hub.seq
            shared = hub.after(cursor)
            if shared is None:
                # Behind the ring (or the hub has not started): read the log itself, on a worker thread.
                events, cursor = await anyio.to_thread.run_sync(self.read, cursor)
            else:
                ring, cursor = shared
                events = [e for e in ring if kept(e, self.keep) and self.visible(e)]
            if events:
                # A write per chunk of events, not per event (the send costs more than the event).
                for i in range(0, len(events), _EVENTS_PER_WRITE):
                    yield "".join(hub.render(e, self.frame) for e in events[i : i + _EVENTS_PER_WRITE])
                quiet_since = time.monotonic()
                continue
            idle = time.monotonic() - quiet_since
            if idle >= HEARTBEAT_SECONDS:
                yield ": keep-alive\n\n"
                quiet_since, idle = time.monotonic(), 0.0
            wait = HEARTBEAT_SECONDS - idle
            await hub.changed(seen, wait if shared is not None else min(wait, POLL_SECONDS))


async def _closing(stream: AsyncIterator[str], release: Callable[[], None]) -> AsyncIterator[str]:
    """``stream``, releasing its slot when it ends, however it ends (the client went away: cancelled)."""
    try:
        async for chunk in stream:
            yield chunk
    finally:
        release()
