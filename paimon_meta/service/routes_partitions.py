"""The partition lifecycle of one table: list, create, drop, mark done, list by names and by filter.

Reading needs ``read`` on the table. Creating, dropping and marking partitions done need ``write``: a
drop is an OVERWRITE commit (what a writer may commit anyway), and a registration or a done mark is
what a writer's job records when it starts or finishes a partition (Java's ``PartitionMarkDone`` runs
in the writer).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.metastore.principals import Access
from paimon_meta.ops import partitions as partition_ops
from paimon_meta.rest import models, paths
from paimon_meta.service import convert
from paimon_meta.service.deps import catalog_of, table_identifier
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    BEARER,
    CONFLICT,
    ERRORS,
    NO_BODY,
    OUTCOME_UNKNOWN,
    PREFIX,
    TABLE_SELECT,
    TABLE_UPDATE,
    UNSUPPORTED,
    MaxResults,
    PageToken,
)

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)


def _body(p: partition_ops.PartitionInfo) -> models.Partition:
    return models.Partition(
        spec=p.spec,
        record_count=p.record_count,
        file_size_in_bytes=p.file_size_in_bytes,
        file_count=p.file_count,
        last_file_creation_time=p.last_file_creation_time,
        total_buckets=p.total_buckets,
        done=p.done,
        created_at=p.created_at,
        created_by=p.created_by,
        updated_at=p.updated_at,
        updated_by=p.updated_by,
    )


@router.get(
    paths.PARTITIONS,
    response_model=models.ListPartitionsResponse,
    tags=["partitions"],
    dependencies=[TABLE_SELECT],
    responses=UNSUPPORTED,
)
def list_table_partitions(
    request: Request,
    database: str,
    table: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
    pattern: Annotated[
        str | None, Query(alias=paths.PARTITION_NAME_PATTERN, max_length=convert.MAX_PATTERN)
    ] = None,
) -> models.ListPartitionsResponse:
    """Partitions holding data (totals from the statistics the commit path keeps: no manifest scan)
    and registered ones (zero totals until data arrives), with their done marks. 501 when the totals
    miss a snapshot (another engine's): the client then scans the manifests itself. A format table with
    ``metastore.partitioned-table``: its registered partitions, with the files and bytes its directories
    hold (``recordCount`` -1: unknown)."""
    catalog, identifier = catalog_of(request), table_identifier(database, table)
    listed = partition_ops.list_partitions(catalog, identifier)
    by_name = {p.name: p for p in listed}
    names, token = convert.page(
        list(by_name), max_results=max_results, page_token=page_token, pattern=pattern
    )
    page = partition_ops.with_statistics(catalog, identifier, [by_name[n] for n in names])
    return models.ListPartitionsResponse(partitions=[_body(p) for p in page], next_page_token=token)


@router.post(
    paths.PARTITIONS,
    response_model=models.CreatePartitionsResponse,
    tags=["partitions"],
    responses={**CONFLICT, **UNSUPPORTED},
)
def create_partitions(
    request: Request,
    database: str,
    table: str,
    body: models.CreatePartitionsRequest,
    access: Annotated[Access, TABLE_UPDATE],
) -> models.CreatePartitionsResponse:
    """Register empty partitions; those already registered or holding data are ``existed`` (409
    ``PARTITION`` with ``ignoreIfExists: false``, nothing registered then)."""
    if body.partition_statistics is not None or body.replace_statistics is not None:
        raise UnsupportedError(
            "createPartitions with partitionStatistics/replaceStatistics is not supported: this catalog "
            "keeps partition totals from the commits themselves"
        )
    if body.partition_options is not None:
        # Refused rather than stored: a partition's own path or file format this catalog would record
        # but no reader of it would honour.
        raise UnsupportedError(
            "createPartitions with partitionOptions (a partition's own path or file.format) is not "
            "supported by this catalog: partitions live at their default location in the table's format",
            option="partitionOptions",
        )
    created, existed = partition_ops.create_partitions(
        catalog_of(request),
        table_identifier(database, table),
        body.partition_specs,
        ignore_if_exists=body.ignore_if_exists,
        principal=access.principal,
    )
    return models.CreatePartitionsResponse(created=created, existed=existed)


@router.post(
    paths.DROP_PARTITIONS,
    response_model=models.DropPartitionsResponse,
    tags=["partitions"],
    responses={**CONFLICT, **OUTCOME_UNKNOWN, **UNSUPPORTED},
)
def drop_partitions(
    request: Request,
    database: str,
    table: str,
    body: models.DropPartitionsRequest,
    access: Annotated[Access, TABLE_UPDATE],
) -> models.DropPartitionsResponse:
    """One OVERWRITE snapshot removing the named partitions' files (a spec may name a prefix of the
    partition keys), then their registrations; specs naming nothing are ``missing`` (404 ``PARTITION``
    with ``ignoreIfNotExists: false``, nothing dropped then)."""
    result = partition_ops.drop_partitions(
        catalog_of(request),
        table_identifier(database, table),
        body.partition_specs,
        ignore_if_not_exists=body.ignore_if_not_exists,
        principal=access.principal,
    )
    return models.DropPartitionsResponse(dropped=result.dropped, missing=result.missing)


@router.post(
    paths.MARK_DONE_PARTITIONS,
    tags=["partitions"],
    response_class=Response,
    responses={**NO_BODY, **UNSUPPORTED},
)
def mark_done_partitions(
    request: Request,
    database: str,
    table: str,
    body: models.MarkDonePartitionsRequest,
    access: Annotated[Access, TABLE_UPDATE],
) -> Response:
    """Mark partitions done (listed as ``done``) and perform the table's ``partition.mark-done-action``
    (``success-file``, ``done-partition``, ``mark-event``; 501 naming ``http-report`` or ``custom``)."""
    partition_ops.mark_done_partitions(
        catalog_of(request), table_identifier(database, table), body.specs, principal=access.principal
    )
    return Response(status_code=200)


@router.post(
    paths.PARTITIONS_BY_NAMES,
    response_model=models.ListPartitionsResponse,
    tags=["partitions"],
    dependencies=[TABLE_SELECT],
    responses=UNSUPPORTED,
)
def list_partitions_by_names(
    request: Request, database: str, table: str, body: models.ListPartitionsByNamesRequest
) -> models.ListPartitionsResponse:
    """The named partitions (full specs) that exist, in the order asked; unknown ones left out."""
    catalog, identifier = catalog_of(request), table_identifier(database, table)
    found = partition_ops.partitions_by_names(catalog, identifier, body.specs)
    found = partition_ops.with_statistics(catalog, identifier, found)
    return models.ListPartitionsResponse(partitions=[_body(p) for p in found], next_page_token=None)


@router.post(
    paths.PARTITIONS_BY_FILTER,
    response_model=models.ListPartitionsResponse,
    tags=["partitions"],
    dependencies=[TABLE_SELECT],
    responses=UNSUPPORTED,
)
def list_partitions_by_filter(
    request: Request, database: str, table: str, body: models.ListPartitionsByFilterRequest
) -> models.ListPartitionsResponse:
    """A page of the partitions a serialized Paimon predicate may match (a superset where it cannot
    decide, as the protocol allows), paged by name as the listing; ``maxResults`` missing or 0: up to
    the server's page limit."""
    if body.partition_name_pattern is not None and len(body.partition_name_pattern) > convert.MAX_PATTERN:
        raise ValidationError(
            f"partitionNamePattern is longer than {convert.MAX_PATTERN} characters",
            field="partitionNamePattern",
        )
    catalog, identifier = catalog_of(request), table_identifier(database, table)
    found = partition_ops.partitions_by_filter(catalog, identifier, body.filter)
    by_name = {p.name: p for p in found}
    names, token = convert.page(
        list(by_name),
        max_results=body.max_results or convert.MAX_PAGE,
        page_token=body.page_token,
        pattern=body.partition_name_pattern,
    )
    page = partition_ops.with_statistics(catalog, identifier, [by_name[n] for n in names])
    return models.ListPartitionsResponse(partitions=[_body(p) for p in page], next_page_token=token)
