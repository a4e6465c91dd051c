"""Tables across the catalog and a table's life beyond create: details of a database's tables, the
catalog-wide listing, a table by its id, registering an existing table, rolling a schema back, restoring
a dropped table from the recycle bin (``undrop``) and listing the bin (``dropped-tables``), our extensions.

Listings page by key (the registry's primary key index), filtered by the caller's grants: a page is
read in batches until it is full, so a caller sees only tables it may read and every page costs about
the same wherever it starts."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from paimon_meta.catalog import metadata_tables
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import TableNotFoundError, ValidationError
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Resource
from paimon_meta.metastore.feed import Reach
from paimon_meta.metastore.principals import Access, utc_now
from paimon_meta.metastore.registry import TableRow
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.ops import tables as table_ops
from paimon_meta.rest import models, paths
from paimon_meta.service import convert
from paimon_meta.service.deps import catalog_of, table_identifier
from paimon_meta.service.errors import ForbiddenError
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    AUTHENTICATED,
    BEARER,
    CATALOG_CREATEDATABASE,
    CONFLICT,
    DATABASE_CREATETABLE,
    ERRORS,
    NO_BODY,
    PREFIX,
    TABLE_ALTER,
    UNSUPPORTED,
    DatabasePattern,
    MaxResults,
    PageToken,
    TablePattern,
)
from paimon_meta.table.option_policy import TABLE_TYPE, TABLE_TYPE_DEFAULT

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)

#: A page's size when the caller names none.
DEFAULT_PAGE = 100
#: Rows read per batch while filling a page with tables the caller may read.
_BATCH = 200


def _limit(max_results: int | None) -> int:
    limit = DEFAULT_PAGE if max_results is None else max_results
    if not 0 < limit <= convert.MAX_PAGE:
        raise ValidationError(f"maxResults must be between 1 and {convert.MAX_PAGE}", field="maxResults")
    return limit


def _visible_page(
    catalog: MetastoreCatalog,
    access: Access,
    *,
    limit: int,
    after: tuple[str, str] | None,
    database: str | None = None,
    database_pattern: str | None = None,
    table_pattern: str | None = None,
    keep: Callable[[TableRow], bool] = lambda _row: True,
    full: Callable[[], bool] = lambda: False,
    summaries: bool = False,
) -> tuple[list[TableRow], bool]:
    """Up to ``limit`` rows the caller may read (and ``keep`` keeps), after ``after``, fewer once
    ``full()`` says the page is (its byte budget); and whether more follow. ``summaries``: the rows
    carry their stored schemas (``Registry.table_rows_page``)."""
    out: list[TableRow] = []
    cursor = after
    now = utc_now()
    within = Reach.of(access, now).within()  # the rows its grants reach, never the whole registry
    while True:
        batch = catalog.registry.table_rows_page(
            database=database,
            database_pattern=database_pattern,
            table_pattern=table_pattern,
            after=cursor,
            limit=_BATCH,
            summaries=summaries,
            within=within,
        )
        for row in batch:
            if access.may(A.SELECT, Resource.table(row.database, row.name), at=now):
                if out and full():  # before reading another table's schema
                    return out, True
                if keep(row):
                    if len(out) == limit:
                        return out, True
                    out.append(row)
        if len(batch) < _BATCH:
            return out, False
        cursor = (batch[-1].database, batch[-1].name)


@router.get(
    paths.TABLE_DETAILS,
    response_model=models.ListTableDetailsResponse,
    tags=["tables"],
)
def list_table_details(
    request: Request,
    database: str,
    access: Annotated[Access, AUTHENTICATED],
    max_results: MaxResults = None,
    page_token: PageToken = None,
    pattern: TablePattern = None,
    table_type: Annotated[str | None, Query(alias=paths.TABLE_TYPE, max_length=64)] = None,
) -> models.ListTableDetailsResponse:
    """The tables of ``database`` the caller may read, each as ``GET`` of the table answers it, by name,
    from the registry's stored schemas (a schema file read only for a table whose stored schema is
    missing or older than its row's schema id: ``MetastoreCatalog.listed_metadata``); ``tableType``
    keeps those of that type (the schema's ``type`` option). A
    page stops early, with its next page's token, once its tables' JSON reaches a byte budget."""
    catalog = catalog_of(request)
    validate_identifier("database", database)
    if not access.sees(database):  # as the table listing: a table's assignment shows its database
        raise ForbiddenError(
            f"principal {access.principal!r} holds no assignment in database {database!r}",
            resource_type="DATABASE",
            resource_name=database,
        )
    convert.check_pattern(pattern, paths.TABLE_NAME_PATTERN)
    after = None if not page_token else (database, _name_token(page_token))
    loaded: dict[int, models.GetTableResponse] = {}
    used = 0

    def keep(row: TableRow) -> bool:
        nonlocal used
        schema, location = catalog.listed_metadata(row)
        if table_type and schema.options.get(TABLE_TYPE, TABLE_TYPE_DEFAULT).lower() != table_type.lower():
            return False
        external = metadata_tables.is_external(catalog, row)
        response = convert.table_response(row, schema, location, external=external)
        used += len(response.model_dump_json(by_alias=True))
        loaded[row.table_id] = response
        return True

    rows, more = _visible_page(
        catalog,
        access,
        limit=_limit(max_results),
        after=after,
        database=database,
        table_pattern=pattern,
        keep=keep,
        full=lambda: used >= convert.PAGE_BYTES,
        summaries=True,
    )
    return models.ListTableDetailsResponse(
        table_details=[loaded[r.table_id] for r in rows],
        next_page_token=rows[-1].name if more else None,
    )


@router.get(paths.TABLES_GLOBALLY, response_model=models.ListTablesGloballyResponse, tags=["tables"])
def list_tables_globally(
    request: Request,
    access: Annotated[Access, AUTHENTICATED],
    max_results: MaxResults = None,
    page_token: PageToken = None,
    database_pattern: DatabasePattern = None,
    table_pattern: TablePattern = None,
) -> models.ListTablesGloballyResponse:
    """Every table of the catalog the caller may read, by database then name; the page token is the
    last ``database.table`` of the previous page."""
    catalog = catalog_of(request)
    convert.check_pattern(database_pattern, paths.DATABASE_NAME_PATTERN)
    convert.check_pattern(table_pattern, paths.TABLE_NAME_PATTERN)
    after = None
    if page_token:
        db, sep, name = page_token.partition(".")
        if not sep:
            raise ValidationError("pageToken is not one this server issued", field="pageToken")
        after = (_name_token(db), _name_token(name))
    rows, more = _visible_page(
        catalog,
        access,
        limit=_limit(max_results),
        after=after,
        database_pattern=database_pattern,
        table_pattern=table_pattern,
    )
    return models.ListTablesGloballyResponse(
        tables=[models.Identifier(database=r.database, object=r.name) for r in rows],
        next_page_token=rows[-1].identifier if more else None,
    )


def _name_token(value: str) -> str:
    try:
        return validate_identifier("table", value)
    except ValidationError:
        raise ValidationError("pageToken is not one this server issued", field="pageToken") from None


@router.get(paths.TABLE_BY_ID, response_model=models.GetTableResponse, tags=["tables"])
def get_table_by_id(
    request: Request,
    table_id: Annotated[str, Path(alias="tableId", max_length=64)],
    access: Annotated[Access, AUTHENTICATED],
) -> models.GetTableResponse:
    """The table whose ``id`` (as ``GET`` of a table answers it) is ``tableId``. A table the caller may
    not read answers 404 like a missing one: an id must not tell whether a table exists."""
    catalog = catalog_of(request)
    missing = TableNotFoundError(f"no table with id {table_id!r}", resource_name=table_id)
    try:
        if table_id.startswith(convert.TABLE_ID_PREFIX):  # a row Java inserted has no uuid
            row = catalog.registry.get_table_row_by_id(int(table_id[len(convert.TABLE_ID_PREFIX) :]))
            if row.catalog_key != catalog.registry.catalog_key or row.table_uuid is not None:
                raise missing
        else:
            row = catalog.registry.get_table_row_by_uuid(uuid.UUID(table_id))
    except (ValueError, TableNotFoundError):
        raise missing from None
    if not access.may(A.SELECT, Resource.table(row.database, row.name)):
        raise missing
    _, schema, location = catalog.table_metadata(row.identifier)
    return convert.table_response(row, schema, location, external=metadata_tables.is_external(catalog, row))


@router.post(
    paths.REGISTER_TABLE,
    tags=["tables"],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT, **UNSUPPORTED},
)
def register_table(
    request: Request,
    database: str,
    body: models.RegisterTableRequest,
    access: Annotated[Access, DATABASE_CREATETABLE],
) -> Response:
    """Adopt the Paimon table at ``path`` (a table directory of the warehouse, or under a root the
    catalog allows) as ``identifier``, reading its latest schema; 409 when the name is taken or another
    table holds those files, 400 when there is no table there."""
    if body.identifier.database != database:
        raise ValidationError(
            f"identifier.database: {body.identifier.database!r} is not the path's {database!r}",
            field="identifier.database",
        )
    identifier = table_identifier(database, body.identifier.object)
    table_ops.register_table(catalog_of(request), identifier, body.path, principal=access.principal)
    return Response(status_code=200)


@router.post(
    paths.ROLLBACK_SCHEMA,
    tags=["tables"],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def rollback_schema(
    request: Request,
    database: str,
    table: str,
    body: models.RollbackSchemaRequest,
    access: Annotated[Access, TABLE_ALTER],
) -> Response:
    """Delete every schema after ``schemaId`` (Java's ``rollbackSchema``); 409 while a snapshot, tag or
    changelog uses one of them, 404 ``SCHEMA`` when there is no such schema."""
    table_ops.rollback_schema(
        catalog_of(request), table_identifier(database, table), body.schema_id, principal=access.principal
    )
    return Response(status_code=200)


@router.post(
    paths.UNDROP_TABLE,
    tags=["tables"],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def undrop_table(
    request: Request,
    database: str,
    table: str,
    access: Annotated[Access, DATABASE_CREATETABLE],
    drop_id: Annotated[int | None, Query(alias="dropId")] = None,
) -> Response:
    """Restore a dropped table from the recycle bin (the latest drop of the name, or ``dropId``) with
    its files, its event log and its grants (our extension; Paimon clients see a dropped table as gone).
    404 when it is not in the bin (purged, never dropped), 409 when the name is taken again. Needs admin
    on the database, as creating a table there does (the table's own grants are in the bin)."""
    table_ops.undrop_table(
        catalog_of(request), table_identifier(database, table), drop_id=drop_id, principal=access.principal
    )
    return Response(status_code=200)


@router.post(
    paths.UNDROP_DATABASE,
    response_model=models.UndropDatabaseResponse,
    tags=["databases"],
    responses={**CONFLICT},
)
def undrop_database(
    request: Request,
    database: str,
    access: Annotated[Access, CATALOG_CREATEDATABASE],
    drop_id: Annotated[int | None, Query(alias="dropId")] = None,
) -> models.UndropDatabaseResponse:
    """Restore a dropped database from the recycle bin (its latest drop, or ``dropId``) in one
    transaction: its properties, grants, views and functions, and every table dropped with it that is
    still in the bin, with theirs (our extension). 404 when it is not in the bin, 409 when the name is
    taken (nothing restored). Needs admin on the catalog, as creating a database does."""
    done = table_ops.undrop_database(
        catalog_of(request),
        validate_identifier("database", database),
        drop_id=drop_id,
        principal=access.principal,
    )
    return models.UndropDatabaseResponse(
        name=done.database, drop_id=done.drop_id, tables=done.tables, grants=done.grants
    )


@router.get(
    paths.DROPPED_DATABASES,
    response_model=models.ListDroppedDatabasesResponse,
    tags=["databases"],
    dependencies=[CATALOG_CREATEDATABASE],
)
def list_dropped_databases(
    request: Request, max_results: MaxResults = None, page_token: PageToken = None
) -> models.ListDroppedDatabasesResponse:
    """The recycle bin's databases (our extension), oldest drop first, with the ``dropId`` an undrop
    takes, the tables kept with each and when each is purged. Needs admin on the catalog."""
    limit, offset = convert.offset_page(max_results, page_token)
    catalog = catalog_of(request)
    entries = catalog.recycle_bin.databases()
    page = entries[offset : offset + limit]
    return models.ListDroppedDatabasesResponse(
        databases=[
            models.DroppedDatabase(
                drop_id=d.drop_id,
                name=d.name,
                location=d.location,
                tables=sorted(t.name for t in catalog.recycle_bin.tables_of(d)),
                dropped_by=d.dropped_by,
                dropped_at=d.dropped_at,
                purge_after=d.purge_after,
                grants=len(d.grants),
            )
            for d in page
        ],
        next_page_token=str(offset + limit) if offset + limit < len(entries) else None,
    )


@router.get(
    paths.DROPPED_TABLES,
    response_model=models.ListDroppedTablesResponse,
    tags=["tables"],
    dependencies=[DATABASE_CREATETABLE],
)
def list_dropped_tables(
    request: Request,
    database: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
) -> models.ListDroppedTablesResponse:
    """The recycle bin of a database (our extension): its dropped tables, oldest drop first, with the
    ``dropId`` an undrop takes and when each is purged. Needs admin on the database, as an undrop does (a
    database dropped with its tables is listed too: its name need not exist any more)."""
    validate_identifier("database", database)
    limit, offset = convert.offset_page(max_results, page_token)
    entries = catalog_of(request).recycle_bin.entries(database=database)
    page = entries[offset : offset + limit]
    return models.ListDroppedTablesResponse(
        tables=[
            models.DroppedTable(
                drop_id=d.drop_id,
                table_id=d.table_id,
                database=d.database,
                name=d.name,
                location=d.location,
                dropped_by=d.dropped_by,
                dropped_at=d.dropped_at,
                purge_after=d.purge_after,
                grants=len(d.grants),
            )
            for d in page
        ],
        next_page_token=str(offset + limit) if offset + limit < len(entries) else None,
    )
