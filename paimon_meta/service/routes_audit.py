"""The audit trail of one table over HTTP (our extension; the read grant on the table): its registry row,
its commit events, its lock's events, its maintenance runs and the events that recorded its snapshots,
as ``paimon_meta.ops.audit`` reads them, so ``paimon-meta --metastore http://...`` shows what the
database would. Listings are newest first (recordings: oldest first) and paged by keyset: a page token
is the log position (``p<event id>``) the previous page ended at, so every page is one index range of
the log, whatever its length (ops.audit)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request

from paimon_meta.model.identifier import split_identifier
from paimon_meta.ops import audit
from paimon_meta.rest import models, paths
from paimon_meta.service import convert
from paimon_meta.service.deps import catalog_of, table_identifier
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import BEARER, ERRORS, PREFIX, TABLE_SELECT, MaxResults, PageToken

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)


def _next(returned: int, limit: int, last: int | None) -> str | None:
    """A full page may have a next one (at worst it is empty); a short page is the last. ``last``: the
    position of the page's last row in listing order."""
    return convert.position_token(last) if returned == limit and last is not None else None


@router.get(
    paths.REGISTRY,
    response_model=models.TableRegistryResponse,
    tags=["audit"],
    dependencies=[TABLE_SELECT],
)
def get_registry(request: Request, database: str, table: str) -> models.TableRegistryResponse:
    """The table's registry row: the pointer, schema id and location as the metastore has them."""
    row = catalog_of(request).table_row(table_identifier(database, table))
    return models.TableRegistryResponse(
        identifier=row.identifier,
        location=row.location,
        schema_id=row.schema_id,
        latest_snapshot_id=row.latest_snapshot_id,
        timeline=row.timeline,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


@router.get(
    paths.EVENTS,
    response_model=models.ListCommitEventsResponse,
    tags=["audit"],
    dependencies=[TABLE_SELECT],
)
def list_commit_events(
    request: Request,
    database: str,
    table: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
    commit_id: Annotated[str | None, Query(alias=paths.COMMIT_ID)] = None,
) -> models.ListCommitEventsResponse:
    """Commit events of tables of this name (``paimon_commit_events``), optionally of one commit."""
    limit, before = convert.position_page(max_results, page_token)
    catalog = catalog_of(request)
    rows = audit.commit_events(
        catalog.engine,
        table=table_identifier(database, table),
        commit_id=commit_id,
        limit=limit,
        before=before,
        catalog_key=catalog.registry.catalog_key,  # db.t of this catalog only
    )
    return models.ListCommitEventsResponse(
        events=[models.CommitEvent(**r) for r in reversed(rows)],
        next_page_token=_next(len(rows), limit, rows[0]["event_id"] if rows else None),
    )


@router.get(
    paths.LOCK_EVENTS,
    response_model=models.ListLockEventsResponse,
    tags=["audit"],
    dependencies=[TABLE_SELECT],
)
def list_lock_events(
    request: Request, database: str, table: str, max_results: MaxResults = None, page_token: PageToken = None
) -> models.ListLockEventsResponse:
    """Events of the table's lock (``paimon_lock_events``: Java's key, ours and Java's writers)."""
    catalog = catalog_of(request)
    lock_id = catalog.registry.lock_id(*split_identifier(table_identifier(database, table)))
    limit, before = convert.position_page(max_results, page_token)
    rows = audit.lock_events(catalog.engine, lock_id=lock_id, limit=limit, before=before)
    return models.ListLockEventsResponse(
        events=[models.LockEvent(**r) for r in reversed(rows)],
        next_page_token=_next(len(rows), limit, rows[0]["event_id"] if rows else None),
    )


@router.get(
    paths.MAINTENANCE_RUNS,
    response_model=models.ListMaintenanceRunsResponse,
    tags=["audit"],
    dependencies=[TABLE_SELECT],
)
def list_maintenance_runs(
    request: Request, database: str, table: str, max_results: MaxResults = None, page_token: PageToken = None
) -> models.ListMaintenanceRunsResponse:
    """Expiration and orphan-cleanup runs of tables of this name (``paimon_maintenance_history``)."""
    limit, before = convert.position_page(max_results, page_token)
    catalog = catalog_of(request)
    rows = audit.maintenance_history(
        catalog.engine,
        table=table_identifier(database, table),
        limit=limit,
        before=before,
        catalog_key=catalog.registry.catalog_key,  # db.t of this catalog only
    )
    return models.ListMaintenanceRunsResponse(
        runs=[models.MaintenanceRun(**r) for r in reversed(rows)],
        next_page_token=_next(len(rows), limit, rows[0]["position"] if rows else None),
    )


@router.get(
    paths.SNAPSHOT_RECORDINGS,
    response_model=models.ListSnapshotRecordingsResponse,
    tags=["audit"],
    dependencies=[TABLE_SELECT],
)
def list_snapshot_recordings(
    request: Request, database: str, table: str, max_results: MaxResults = None, page_token: PageToken = None
) -> models.ListSnapshotRecordingsResponse:
    """The events that recorded this table's snapshots, oldest first (the first one of a snapshot id
    is how ``paimon-meta snapshots`` says it was recorded)."""
    catalog = catalog_of(request)
    row = catalog.table_row(table_identifier(database, table))
    limit, after = convert.position_page(max_results, page_token, default=convert.MAX_PAGE)
    events = audit.recording_positions(catalog.engine, row.table_id, limit=limit, after=after or 0)
    return models.ListSnapshotRecordingsResponse(
        recordings=[
            models.SnapshotRecording(snapshot_id=s, event_type=e, commit_id=uuid.UUID(c))
            for _, s, e, c in events
        ],
        next_page_token=_next(len(events), limit, events[-1][0] if events else None),
    )
