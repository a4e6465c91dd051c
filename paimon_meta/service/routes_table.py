"""Snapshots, commits, partitions and tags of one table."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from paimon_meta.commit.metastore.snapshot_commit import SnapshotCommitRequest
from paimon_meta.errors import (
    SnapshotNotFoundError,
    TableNotFoundError,
    TagAlreadyExistsError,
    ValidationError,
)
from paimon_meta.metastore.branches import MAIN
from paimon_meta.metastore.principals import Access
from paimon_meta.metastore.statistics import TableStatistics, table_statistics
from paimon_meta.model.options import parse_duration_ms
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.ops import branches as branch_ops
from paimon_meta.ops import rollback as rollback_ops
from paimon_meta.ops import tags as tag_ops
from paimon_meta.rest import models, paths
from paimon_meta.service import convert
from paimon_meta.service.deps import catalog_of, served_of, state_of, table_and_branch, table_identifier
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    BEARER,
    CONFLICT,
    ERRORS,
    NO_BODY,
    OUTCOME_UNKNOWN,
    PREFIX,
    TABLE_ALTER,
    TABLE_COMMIT,
    TABLE_SELECT,
    TABLE_UPDATE,
    UNSUPPORTED,
)
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.tags import java_duration_text

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)

READ = TABLE_SELECT
WRITE = TABLE_UPDATE
#: The snapshot commit's grant: a refusal is recorded in the data-access log too.
COMMIT = TABLE_COMMIT
MaxResults = Annotated[int | None, Query(alias=paths.MAX_RESULTS)]
PageToken = Annotated[str | None, Query(alias=paths.PAGE_TOKEN)]


@router.get(
    paths.SNAPSHOT,
    response_model=models.GetTableSnapshotResponse,
    tags=["snapshots"],
    dependencies=[READ],
    responses=UNSUPPORTED,
)
def get_snapshot(request: Request, database: str, table: str) -> models.GetTableSnapshotResponse:
    """The latest snapshot on storage with the table's totals; 404 ``SNAPSHOT`` when it has none."""
    catalog = catalog_of(request)
    identifier, branch = table_and_branch(database, table)
    if branch != MAIN:
        # t$branch_NAME: the branch's latest (404 BRANCH without one), its totals read from its manifests
        # (the kept statistics are main's). (Not in the docstring: that is the served document's text.)
        on_branch = branch_ops.branch_table(catalog, identifier, branch)[1]
        latest = on_branch.snapshot_manager.latest_snapshot()
        if latest is None:
            raise SnapshotNotFoundError(
                f"branch {branch!r} of {identifier} has no snapshot yet", resource_name=identifier
            )
        return _snapshot_response(latest, _scanned_statistics(on_branch, latest))
    row = catalog.table_row(identifier)
    snapshots = state_of(request).snapshot_manager(row, catalog)
    latest = snapshots.latest_snapshot()
    if latest is None:
        raise SnapshotNotFoundError(f"table {identifier} has no snapshot yet", resource_name=identifier)
    stats = table_statistics(catalog.engine, row.table_id)
    if not stats.complete:
        stats = _scanned_statistics(catalog.get_table(identifier), latest)
    return _snapshot_response(latest, stats)


def _snapshot_response(latest: Snapshot, stats: TableStatistics) -> models.GetTableSnapshotResponse:
    return models.GetTableSnapshotResponse(
        snapshot=models.TableSnapshot(
            snapshot=convert.snapshot_json(latest),
            record_count=stats.record_count,
            file_size_in_bytes=stats.file_size_in_bytes,
            file_count=stats.file_count,
            last_file_creation_time=stats.last_file_creation_time,
        )
    )


def _scanned_statistics(table: FileStoreTable, latest: Snapshot) -> TableStatistics:
    """Totals read from the manifests, for a table whose kept statistics miss a snapshot (one another
    engine published, or one from before the statistics were kept), or a branch's."""
    files = table.new_read_builder().with_snapshot(latest.id).new_scan().file_store_scan.plan_files()
    return TableStatistics(
        record_count=sum(e.file.row_count for e in files),
        file_size_in_bytes=sum(e.file.file_size for e in files),
        file_count=len(files),
        last_file_creation_time=max((e.file.creation_time or 0 for e in files), default=0),
        complete=True,
    )


@router.post(
    paths.COMMIT,
    response_model=models.CommitTableResponse,
    tags=["snapshots"],
    dependencies=[COMMIT],
    responses={**CONFLICT, **OUTCOME_UNKNOWN, **UNSUPPORTED},
)
def commit_table(
    request: Request,
    database: str,
    table: str,
    body: models.CommitTableRequest,
    access: Annotated[Access, COMMIT],
) -> models.CommitTableResponse:
    """Commit a snapshot the client built (see ``paimon_meta.commit.metastore.snapshot_commit``): ``success:
    false`` when its base is no longer the latest snapshot (the client rebuilds and retries)."""
    # t$branch_NAME (pypaimon's branch identifier) commits to branch NAME, under the table's lock.
    state = state_of(request)
    catalog = catalog_of(request)
    identifier, branch = table_and_branch(database, table)
    row = catalog.table_row(identifier)
    table_id = convert.table_response_id(row)
    if body.table_id is not None and body.table_id != table_id:
        raise TableNotFoundError(
            f"table {identifier} is {table_id}, not {body.table_id} (dropped and re-created?)",
            resource_name=identifier,
        )
    snapshot = convert.commit_snapshot(body)
    if branch == MAIN:
        state.snapshot_manager(row, catalog)  # observes the row's timeline for the shared manager
        commit_to = state.commit_table(row, catalog)
        if snapshot.schema_id > commit_to.schema.id:
            # A schema the registry has not recorded (an engine altered the table straight on storage):
            # checked against storage's latest schema, listed now (ServiceState.commit_table).
            commit_to = state.commit_table(row, catalog, newer_than=commit_to.schema.id)
    else:
        commit_to = branch_ops.branch_table(catalog, identifier, branch)[1]
    committer = catalog.snapshot_committer(row, commit_to, principal=access.principal)
    with (
        state.counted_commit("snapshot", served_of(request).name) as count,
        state.admit_commit(identifier, catalog),
    ):
        # admission first refuses with 503 at once when this replica's queues are full
        result = committer.commit(
            SnapshotCommitRequest(body.base_snapshot_uuid, snapshot, convert.deltas(body))
        )
        if not result.success:
            count.outcome = "conflict"
    return models.CommitTableResponse(success=result.success)


# ---- tags ----------------------------------------------------------------------------------------------


@router.post(
    paths.TAGS,
    tags=["tags"],
    dependencies=[WRITE],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT, **UNSUPPORTED},
)
def create_tag(
    request: Request,
    database: str,
    table: str,
    body: models.CreateTagRequest,
    access: Annotated[Access, WRITE],
) -> Response:
    """Tag a snapshot (default the latest); ``timeRetained`` (``1d``, ``12h``, ``30m``) makes it expire
    that long after now, when snapshot expiration runs (Java's ``TagTimeExpire``). ``ignoreIfExists``:
    a taken name answers 200 and changes nothing."""
    retained = None
    if body.time_retained is not None:
        try:
            retained = parse_duration_ms(body.time_retained, key="timeRetained")
        except ValidationError:
            raise ValidationError(
                f"timeRetained: {body.time_retained!r} is not a duration (e.g. 1d, 12h, 30m)",
                field="timeRetained",
            ) from None
        if retained <= 0:
            raise ValidationError("timeRetained: must be longer than zero", field="timeRetained")
    try:
        tag_ops.create_tag(
            catalog_of(request),
            table_identifier(database, table),
            body.tag_name,
            body.snapshot_id,
            principal=access.principal,
            time_retained_ms=retained,
        )
    except TagAlreadyExistsError:
        if not body.ignore_if_exists:
            raise
    return Response(status_code=200)


@router.get(paths.TAGS, response_model=models.ListTagsResponse, tags=["tags"], dependencies=[READ])
def list_tags(
    request: Request,
    database: str,
    table: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
    prefix_filter: Annotated[str | None, Query(alias=paths.TAG_NAME_PREFIX)] = None,
) -> models.ListTagsResponse:
    names = tag_ops.tags_of(catalog_of(request), table_identifier(database, table)).names()
    if prefix_filter:
        names = [n for n in names if n.startswith(prefix_filter)]
    items, token = convert.page(names, max_results=max_results, page_token=page_token)
    return models.ListTagsResponse(tags=items, next_page_token=token)


@router.get(paths.TAG, response_model=models.GetTagResponse, tags=["tags"], dependencies=[READ])
def get_tag(request: Request, database: str, table: str, tag: str) -> models.GetTagResponse:
    found = tag_ops.tags_of(catalog_of(request), table_identifier(database, table)).get(tag)
    retained = None if found.time_retained_ms is None else java_duration_text(found.time_retained_ms)
    return models.GetTagResponse(
        tag_name=found.name,
        snapshot=convert.snapshot_json(found.snapshot),
        tag_create_time=found.created_ms,
        tag_time_retained=retained,
    )


@router.delete(
    paths.TAG,
    tags=["tags"],
    dependencies=[WRITE],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def delete_tag(
    request: Request, database: str, table: str, tag: str, access: Annotated[Access, WRITE]
) -> Response:
    tag_ops.delete_tag(
        catalog_of(request), table_identifier(database, table), tag, principal=access.principal
    )
    return Response(status_code=200)


# ---- rollback ------------------------------------------------------------------------------------------


ADMIN = TABLE_ALTER


@router.post(
    paths.ROLLBACK,
    tags=["snapshots"],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT, **OUTCOME_UNKNOWN},
)
def rollback_table(
    request: Request,
    database: str,
    table: str,
    body: models.RollbackTableRequest,
    access: Annotated[Access, ADMIN],
) -> Response:
    """Roll the table back to a snapshot or a tag (see ``paimon_meta.ops.rollback``); 409 when
    ``fromSnapshot`` is no longer the latest snapshot."""
    instant = body.instant
    if instant.type == "snapshot" and instant.snapshot_id is not None:
        target: dict[str, Any] = {"snapshot_id": instant.snapshot_id}
    elif instant.type == "tag" and instant.tag_name is not None:
        target = {"tag": instant.tag_name}
    else:
        raise ValidationError(
            f"instant must be a snapshot with snapshotId or a tag with tagName, got {instant.type!r}",
            field="instant",
        )
    rollback_ops.rollback(
        catalog_of(request),
        table_identifier(database, table),
        from_snapshot=body.from_snapshot,
        principal=access.principal,
        **target,
    )
    return Response(status_code=200)
