"""Config, databases and tables (the REST catalog's first ring). Handlers are thin: check, call the
catalog, convert. They are plain ``def``s, so FastAPI runs them in the bounded worker pool."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote_plus

from fastapi import APIRouter, Query, Request, Response

from paimon_meta.catalog import metadata_tables
from paimon_meta.errors import (
    CatalogNotFoundError,
    DatabaseAlreadyExistsError,
    TableAlreadyExistsError,
    ValidationError,
)
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Resource
from paimon_meta.metastore.branches import MAIN
from paimon_meta.metastore.principals import Access, utc_now
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.ops import branches as branch_ops
from paimon_meta.ops import tables as table_ops
from paimon_meta.rest import models, paths
from paimon_meta.service import convert
from paimon_meta.service.auth import check, not_in_catalog, refuse, service_access
from paimon_meta.service.deps import catalog_of, state_of, table_and_branch, table_identifier
from paimon_meta.service.errors import ForbiddenError
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    AUTHENTICATED,
    BEARER,
    CONFLICT,
    DATABASE_ALTER,
    DATABASE_DESCRIBE,
    DATABASE_DROP,
    ERRORS,
    NO_BODY,
    OUTCOME_UNKNOWN,
    PREFIX,
    TABLE_ALTER,
    TABLE_DROP,
    TABLE_SELECT,
    UNSUPPORTED,
)
from paimon_meta.service.state import ServiceState
from paimon_meta.service.tenancy.served import ServedCatalog

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER], responses=ERRORS)

#: Says in ``/v1/config`` where clients' storage credentials come from (an option no client reads).
VENDING_OPTION = "paimon-meta.storage-credentials"
MaxResults = Annotated[int | None, Query(alias=paths.MAX_RESULTS)]
PageToken = Annotated[str | None, Query(alias=paths.PAGE_TOKEN)]


@router.get(paths.CONFIG, response_model=models.ConfigResponse, tags=["config"])
def get_config(
    request: Request, access: Annotated[Access, AUTHENTICATED], warehouse: str | None = None
) -> models.ConfigResponse:
    """The catalog ``warehouse`` names (the service's default catalog without it): its prefix (its
    name, for ``/v1/{prefix}/...``) and the client options the server fixes for it. pypaimon 2.1.0 sends
    ``warehouse`` URL-encoded twice: either spelling names the catalog. 404 ``CATALOG`` when no catalog
    has that name; 403 when the caller holds no assignment in it (but in the default catalog)."""
    state = state_of(request)
    served = state.catalogs.default
    if warehouse is not None and warehouse != served.name and _decoded(warehouse) != served.name:
        served = _named(state, warehouse)
    if not served.default and not service_access(request).in_catalog(served.key, default=False).holds_any():
        # Another catalog's configuration is for its principals only (the default catalog's answers any
        # token, as before catalogs existed).
        raise not_in_catalog(request, access, served.name)
    name = served.name
    if served.vending is None:
        # Nothing to vend: clients bring their own storage options (a local warehouse needs none).
        return models.ConfigResponse(
            defaults={"prefix": name, VENDING_OPTION: "off: clients use their own storage options"},
            overrides={"data-token.enabled": "false"},
        )
    lifetime = served.vending.settings.duration_seconds
    return models.ConfigResponse(
        defaults={
            "prefix": name,
            VENDING_OPTION: f"sts: table-scoped S3 credentials from GET .../token, valid {lifetime} s",
        },
        # Wins over the client's own option (pypaimon and Java merge overrides last): clients fetch
        # table-scoped credentials and need no storage keys.
        overrides={"data-token.enabled": "true"},
    )


def _named(state: ServiceState, warehouse: str) -> ServedCatalog:
    """The catalog ``warehouse`` names, as sent or decoded once (pypaimon's double encoding).

    Raises:
        CatalogNotFoundError: neither spelling names a catalog (404 ``CATALOG``).
    """
    decoded = _decoded(warehouse)
    for name in dict.fromkeys((warehouse, decoded)):
        try:
            return state.catalogs.get(name)
        except CatalogNotFoundError:
            continue
    raise CatalogNotFoundError(f"no catalog {warehouse!r} in this service", catalog=decoded)


def _decoded(value: str) -> str:
    return unquote_plus(value)


# ---- databases -----------------------------------------------------------------------------------------


@router.get(
    paths.DATABASES, response_model=models.ListDatabasesResponse, tags=["databases"], dependencies=[PREFIX]
)
def list_databases(
    request: Request,
    access: Annotated[Access, AUTHENTICATED],
    max_results: MaxResults = None,
    page_token: PageToken = None,
    pattern: Annotated[
        str | None, Query(alias=paths.DATABASE_NAME_PATTERN, max_length=convert.MAX_PATTERN)
    ] = None,
) -> models.ListDatabasesResponse:
    """Databases the caller's assignments reach into (``Access.sees``)."""
    names = [n for n in catalog_of(request).list_databases() if access.sees(n)]
    items, token = convert.page(names, max_results=max_results, page_token=page_token, pattern=pattern)
    return models.ListDatabasesResponse(databases=items, next_page_token=token)


@router.post(
    paths.DATABASES,
    tags=["databases"],
    dependencies=[PREFIX],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def create_database(
    request: Request, body: models.CreateDatabaseRequest, access: Annotated[Access, AUTHENTICATED]
) -> Response:
    """Needs ``CREATEDATABASE`` on the catalog. Without it, a database the caller can see that exists
    already is answered 409 (pypaimon's ``create_database(name, True)``, as any client's "ignore if
    exists", then goes on), anything else 403."""
    catalog = catalog_of(request)
    name = validate_identifier("database", body.name)
    decision = access.decide(Resource.catalog(), A.CREATEDATABASE)
    if not decision.allowed:
        if access.sees(name) and catalog.registry.database_exists(name):
            raise DatabaseAlreadyExistsError(f"database {name!r} already exists", database=name)
        raise refuse(request, access, Resource.catalog(), A.CREATEDATABASE, decision)
    catalog.create_database(name, False)
    if body.options:
        catalog.alter_database(name, updates=body.options, removals=[])
    return Response(status_code=200)


@router.get(
    paths.DATABASE,
    response_model=models.GetDatabaseResponse,
    tags=["databases"],
    dependencies=[PREFIX, DATABASE_DESCRIBE],
)
def get_database(request: Request, database: str) -> models.GetDatabaseResponse:
    row = catalog_of(request).get_database(database)
    return models.GetDatabaseResponse(
        id=None if row.database_id is None else str(row.database_id),
        name=row.name,
        location=row.location,
        options=dict(row.properties),
        owner=convert.SERVICE_OWNER,
        created_at=convert.millis(row.created_at),
        created_by=convert.SERVICE_OWNER,
    )


@router.post(
    paths.DATABASE,
    tags=["databases"],
    dependencies=[PREFIX, DATABASE_ALTER],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def alter_database(request: Request, database: str, body: models.AlterDatabaseRequest) -> Response:
    catalog_of(request).alter_database(database, updates=body.updates, removals=body.removals)
    return Response(status_code=200)


@router.delete(
    paths.DATABASE,
    tags=["databases"],
    dependencies=[PREFIX],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def drop_database(request: Request, database: str, access: Annotated[Access, DATABASE_DROP]) -> Response:
    """Drop the database with everything in it, as Java's ``RESTCatalog`` expects: a client asked not to
    cascade checks for tables itself first (pypaimon and Java do). Each table is dropped as ``DELETE`` of
    the table drops it (under its lock, files deleted, recorded)."""
    table_ops.drop_database(catalog_of(request), database, principal=access.principal)
    return Response(status_code=200)


# ---- tables --------------------------------------------------------------------------------------------


@router.get(paths.TABLES, response_model=models.ListTablesResponse, tags=["tables"], dependencies=[PREFIX])
def list_tables(
    request: Request,
    database: str,
    access: Annotated[Access, AUTHENTICATED],
    max_results: MaxResults = None,
    page_token: PageToken = None,
    pattern: Annotated[
        str | None, Query(alias=paths.TABLE_NAME_PATTERN, max_length=convert.MAX_PATTERN)
    ] = None,
) -> models.ListTablesResponse:
    """Tables of ``database`` the caller may ``SELECT``; 403 when no assignment reaches into it."""
    if not access.sees(database):
        raise ForbiddenError(
            f"principal {access.principal!r} holds no assignment in database {database!r}",
            resource_type="DATABASE",
            resource_name=database,
        )
    now = utc_now()
    names = [
        n
        for n in catalog_of(request).list_tables(database)
        if access.may(A.SELECT, Resource.table(database, n), at=now)
    ]
    items, token = convert.page(names, max_results=max_results, page_token=page_token, pattern=pattern)
    return models.ListTablesResponse(tables=items, next_page_token=token)


@router.post(
    paths.TABLES,
    tags=["tables"],
    dependencies=[PREFIX],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT, **UNSUPPORTED},
)
def create_table(
    request: Request, database: str, body: models.CreateTableRequest, access: Annotated[Access, AUTHENTICATED]
) -> Response:
    """Needs ``CREATETABLE`` on the database. Without it, a table the caller may ``SELECT`` that exists
    already is answered 409 (the clients' "ignore if exists" then goes on), anything else 403."""
    if body.identifier.database != database:
        raise_field("identifier.database", f"{body.identifier.database!r} is not the path's {database!r}")
    identifier = table_identifier(database, body.identifier.object)
    decision = access.decide(Resource.of_database(database), A.CREATETABLE)
    if not decision.allowed:
        name = identifier.split(".", 1)[1]
        if access.may(A.SELECT, Resource.table(database, name)) and name in catalog_of(request).list_tables(
            database
        ):
            raise TableAlreadyExistsError(f"table {identifier} already exists", table=identifier)
        raise refuse(request, access, Resource.of_database(database), A.CREATETABLE, decision)
    # The clients write and read the data: options only our own reader or writer lacks are refused by
    # those operations, not at create (the table is pypaimon's or Java's to use).
    schema = convert.table_schema(body.schema_)
    if metadata_tables.is_metadata_only(schema):  # format, object, Iceberg: their files are the clients'
        catalog_of(request).create_metadata_table(identifier, schema)
    else:
        catalog_of(request).create_table_from_schema(identifier, schema, written_by_clients=True)
    return Response(status_code=200)


@router.get(
    paths.TABLE,
    response_model=models.GetTableResponse,
    tags=["tables"],
    dependencies=[PREFIX, TABLE_SELECT],
)
def get_table(request: Request, database: str, table: str) -> models.GetTableResponse:
    # For t$branch_NAME (pypaimon's branch identifier): branch NAME, its latest schema at the table's path
    # (404 BRANCH without one). A comment, not a docstring: that would change the served document.
    catalog = catalog_of(request)
    identifier, branch = table_and_branch(database, table)
    if branch != MAIN:
        row, on_branch = branch_ops.branch_table(catalog, identifier, branch)
        external = metadata_tables.is_external(catalog, row)
        return convert.table_response(row, on_branch.schema, on_branch.path, external=external)
    row, schema, location = catalog.table_metadata(identifier)
    return convert.table_response(row, schema, location, external=metadata_tables.is_external(catalog, row))


@router.post(
    paths.TABLE,
    tags=["tables"],
    dependencies=[PREFIX, TABLE_ALTER],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT, **UNSUPPORTED},
)
def alter_table(request: Request, database: str, table: str, body: models.AlterTableRequest) -> Response:
    catalog_of(request).alter_table_changes(
        table_identifier(database, table), convert.schema_changes(body.changes)
    )
    return Response(status_code=200)


@router.post(
    paths.REPLACE_TABLE,
    tags=["tables"],
    dependencies=[PREFIX],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT, **OUTCOME_UNKNOWN, **UNSUPPORTED},
)
def replace_table(
    request: Request,
    database: str,
    table: str,
    body: models.ReplaceTableRequest,
    access: Annotated[Access, TABLE_ALTER],
) -> Response:
    """``CREATE OR REPLACE`` of an existing table, as Java's catalog does it: a format, object or Iceberg
    table, or a new schema of another type, is dropped and created anew; a Paimon table is truncated (one
    OVERWRITE snapshot) and takes the schema as its next one, keeping its history. 404 when there is no
    such table; 501 when the new schema changes a Paimon table's partition keys (as Java refuses). Not
    atomic: a failure after the truncation leaves the table empty with its old schema (replace again)."""
    table_ops.replace_table(
        catalog_of(request),
        table_identifier(database, table),
        convert.table_schema(body.schema_),
        principal=access.principal,
    )
    return Response(status_code=200)


@router.delete(
    paths.TABLE,
    tags=["tables"],
    dependencies=[PREFIX],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def drop_table(
    request: Request, database: str, table: str, access: Annotated[Access, TABLE_DROP]
) -> Response:
    """Unregister the table under its lock (no commit of ours publishes into a table being dropped),
    recorded as a ``drop_table`` run: into the recycle bin with its files and grants for the catalog's
    retention (``undrop`` restores it), or purged at once when the retention is 0. 409 when the table
    has ``deletion-protection`` on."""
    table_ops.drop_table(catalog_of(request), table_identifier(database, table), principal=access.principal)
    return Response(status_code=200)


@router.post(
    paths.RENAME_TABLE,
    tags=["tables"],
    dependencies=[PREFIX],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def rename_table(
    request: Request, body: models.RenameTableRequest, access: Annotated[Access, AUTHENTICATED]
) -> Response:
    """Needs ``ALTER`` on the source table and ``CREATETABLE`` on the destination database."""
    src, dst = body.source, body.destination
    check(request, access, A.ALTER, Resource.table(src.database, src.object))
    check(request, access, A.CREATETABLE, Resource.of_database(dst.database))
    catalog_of(request).rename_table(
        table_identifier(src.database, src.object), table_identifier(dst.database, dst.object)
    )
    return Response(status_code=200)


def raise_field(field: str, message: str) -> None:
    raise ValidationError(f"{field}: {message}", field=field)
