"""The change feed over HTTP (``GET /v1/{prefix}/events``): every table's commit, lock and maintenance
events the caller may read, as CloudEvents 1.0, oldest first, resumable from the ``nextPageToken`` of
the previous answer with nothing lost or repeated (``metastore.feed`` says why). A client polls it; an
empty page means nothing new yet, and its token is where to ask again."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request

from paimon_meta.db.models import Privilege
from paimon_meta.errors import ValidationError
from paimon_meta.metastore.feed import START, FeedEvent, FeedFilter, Position, read_feed
from paimon_meta.metastore.principals import Access
from paimon_meta.rest import models, paths
from paimon_meta.service.deps import catalog_of, state_of
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import AUTHENTICATED, BEARER, ERRORS, PREFIX, MaxResults, PageToken

router = APIRouter(
    route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS, tags=["change feed"]
)

#: Events per page when the caller names no ``maxResults``.
DEFAULT_PAGE = 100
MAX_PAGE = 1000


@router.get(paths.CATALOG_EVENTS, response_model=models.ListCatalogEventsResponse)
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
) -> models.ListCatalogEventsResponse:
    """Events after ``pageToken`` (from the start without one) of the tables the caller may read; the
    filters keep one table (``db.t``), a database, kinds (``snapshot_published,failed``; a maintenance
    run's are ``<operation>.<started|finished|failed>``), a principal, a time range."""
    limit = DEFAULT_PAGE if max_results is None else max_results
    if not 0 < limit <= MAX_PAGE:
        raise ValidationError(f"maxResults must be between 1 and {MAX_PAGE}", field="maxResults")
    after = START if not page_token else Position.parse(page_token)
    keep = FeedFilter(
        subject=table,
        database=database,
        kinds=tuple(k.strip() for k in kind.split(",") if k.strip()) if kind else (),
        principal=principal,
        since=since,
        until=until,
    )
    catalog = catalog_of(request)

    def visible(event: FeedEvent) -> bool:
        return access.allows(Privilege.READ, event.database, event.table)

    events, cursor = read_feed(
        catalog.engine,
        catalog_key=catalog.registry.catalog_key,
        after=after,
        limit=limit,
        keep=keep,
        visible=visible,
    )
    source = f"/paimon-meta/catalogs/{state_of(request).settings.catalog_name}"
    return models.ListCatalogEventsResponse(
        events=[_cloud_event(e, source) for e in events], next_page_token=cursor.token()
    )


def _cloud_event(event: FeedEvent, source: str) -> models.CloudEvent:
    return models.CloudEvent(
        id=event.position.token(),
        source=source,
        type=f"org.paimon.{event.log}.{event.kind}",
        subject=event.subject,
        time=event.time,
        data={
            "log": event.log,
            "eventId": event.position.event_id,
            "principal": event.principal,
            **event.data,
        },
    )
