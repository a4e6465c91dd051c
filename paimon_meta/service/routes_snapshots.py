"""Snapshots by version and the snapshot list, and the table's consumers (streaming readers' progress).

Reading needs ``read`` on the table. Resetting a consumer needs ``write``: it moves what a streaming
reader reads next and what expiration keeps, as a writer's own streaming job does; it deletes nothing.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request, Response

from paimon_meta.metastore.principals import Access
from paimon_meta.ops import consumers as consumer_ops
from paimon_meta.ops import snapshots as snapshot_ops
from paimon_meta.ops import tags as tag_ops
from paimon_meta.rest import models, paths
from paimon_meta.service import convert
from paimon_meta.service.deps import catalog_of, state_of, table_identifier
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    BEARER,
    ERRORS,
    NO_BODY,
    PREFIX,
    TABLE_SELECT,
    TABLE_UPDATE,
    UNSUPPORTED,
    MaxResults,
    PageToken,
)

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)


@router.get(
    paths.SNAPSHOT_VERSION,
    response_model=models.GetVersionSnapshotResponse,
    tags=["snapshots"],
    dependencies=[TABLE_SELECT],
    responses=UNSUPPORTED,
)
def get_version_snapshot(
    request: Request, database: str, table: str, version: str
) -> models.GetVersionSnapshotResponse:
    """The snapshot ``version`` names: an id, a tag name, ``LATEST`` or ``EARLIEST``; 404 ``SNAPSHOT``
    when it names none."""
    catalog = catalog_of(request)
    identifier = table_identifier(database, table)
    row = snapshot_ops.paimon_table_row(catalog, identifier)
    snapshots = state_of(request).snapshot_manager(row, catalog)
    found = snapshot_ops.snapshot_at(snapshots, tag_ops.tags_of(catalog, identifier), identifier, version)
    return models.GetVersionSnapshotResponse(snapshot=convert.snapshot_json(found))


@router.get(
    paths.SNAPSHOTS,
    response_model=models.ListSnapshotsResponse,
    tags=["snapshots"],
    dependencies=[TABLE_SELECT],
    responses=UNSUPPORTED,
)
def list_snapshots(
    request: Request,
    database: str,
    table: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
) -> models.ListSnapshotsResponse:
    """The table's snapshots, oldest first (as Java lists them), ``maxResults`` per page (default
    100); the token is the last id of the previous page."""
    catalog = catalog_of(request)
    row = snapshot_ops.paimon_table_row(catalog, table_identifier(database, table))
    page, token = snapshot_ops.snapshot_page(
        state_of(request).snapshot_manager(row, catalog),
        max_results=max_results,
        page_token=page_token,
        max_page=convert.MAX_PAGE,
    )
    return models.ListSnapshotsResponse(
        snapshots=[convert.snapshot_json(s) for s in page], next_page_token=token
    )


@router.get(
    paths.CONSUMERS,
    response_model=models.ListConsumersResponse,
    tags=["consumers"],
    dependencies=[TABLE_SELECT],
    responses=UNSUPPORTED,
)
def list_consumers(
    request: Request,
    database: str,
    table: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
) -> models.ListConsumersResponse:
    """The table's consumers (``consumer/consumer-<id>``) with their next snapshot, by id."""
    consumers = consumer_ops.consumers_of(catalog_of(request), table_identifier(database, table)).consumers()
    ids, token = convert.page(list(consumers), max_results=max_results, page_token=page_token)
    return models.ListConsumersResponse(
        consumers=[models.ConsumerInfo(consumer_id=i, next_snapshot=consumers[i]) for i in ids],
        next_page_token=token,
    )


@router.post(
    paths.RESET_CONSUMER,
    tags=["consumers"],
    response_class=Response,
    responses={**NO_BODY, **UNSUPPORTED},
)
def reset_consumer(
    request: Request,
    database: str,
    table: str,
    body: models.ResetConsumerRequest,
    access: Annotated[Access, TABLE_UPDATE],
) -> Response:
    """Set a consumer's next snapshot (a kept snapshot or the one after the latest; else 404
    ``SNAPSHOT``), or remove the consumer when ``nextSnapshotId`` is absent; under the table's lock."""
    consumer_ops.reset_consumer(
        catalog_of(request),
        table_identifier(database, table),
        body.consumer_id,
        body.next_snapshot_id,
        principal=access.principal,
    )
    return Response(status_code=200)
