"""Views (the protocol's 8 view operations), kept in the metastore (``paimon_views``, Java
``JdbcCatalog``'s table) with a version and an event per change.

Grants as for tables: reading and listing a database's views needs read on the database, creating,
altering and dropping one admin on it (as creating a table does), renaming admin on both databases; a
catalog-wide listing shows the views of the databases the caller may read. A view may not take a table's
name in its database (409, as Java's ``JdbcCatalog`` refuses it)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Resource
from paimon_meta.metastore.principals import Access
from paimon_meta.model.catalog_objects import ViewSchema
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.rest import models, paths
from paimon_meta.service import convert
from paimon_meta.service import objects_common as common
from paimon_meta.service.auth import check
from paimon_meta.service.deps import catalog_of
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    AUTHENTICATED,
    BEARER,
    CONFLICT,
    DATABASE_CREATEVIEW,
    DATABASE_LIST,
    ERRORS,
    NO_BODY,
    PREFIX,
    VIEW_ALTER,
    VIEW_DROP,
    VIEW_SELECT,
    DatabasePattern,
    MaxResults,
    PageToken,
)

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS, tags=["views"])

ViewPattern = Annotated[str | None, Query(alias=paths.VIEW_NAME_PATTERN, max_length=convert.MAX_PATTERN)]


@router.get(paths.VIEWS, response_model=models.ListViewsResponse, dependencies=[DATABASE_LIST])
def list_views(
    request: Request,
    database: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
    pattern: ViewPattern = None,
) -> models.ListViewsResponse:
    """The names of ``database``'s views, by name (``viewNamePattern``: SQL LIKE)."""
    rows, token = common.database_page(
        catalog_of(request).objects.page_views, database, max_results, page_token, pattern
    )
    return models.ListViewsResponse(views=[r.name for r in rows], next_page_token=token)


@router.get(paths.VIEW_DETAILS, response_model=models.ListViewDetailsResponse, dependencies=[DATABASE_LIST])
def list_view_details(
    request: Request,
    database: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
    pattern: ViewPattern = None,
) -> models.ListViewDetailsResponse:
    """``database``'s views as ``GET`` of each answers it, by name."""
    rows, token = common.database_page(
        catalog_of(request).objects.page_views, database, max_results, page_token, pattern
    )
    return models.ListViewDetailsResponse(
        view_details=[common.view_response(r) for r in rows],
        next_page_token=token,
    )


@router.get(paths.VIEWS_GLOBALLY, response_model=models.ListViewsGloballyResponse)
def list_views_globally(
    request: Request,
    access: Annotated[Access, AUTHENTICATED],
    max_results: MaxResults = None,
    page_token: PageToken = None,
    database_pattern: DatabasePattern = None,
    pattern: ViewPattern = None,
) -> models.ListViewsGloballyResponse:
    """Every view of the databases the caller may read, by database then name; the page token is the
    last ``database.view`` of the previous page."""
    rows, token = common.global_page(
        catalog_of(request).objects.page_views,
        access,
        max_results,
        page_token,
        database_pattern=database_pattern,
        pattern=pattern,
    )
    return models.ListViewsGloballyResponse(
        views=[models.Identifier(database=r.database, object=r.name) for r in rows], next_page_token=token
    )


@router.post(
    paths.VIEWS,
    dependencies=[DATABASE_CREATEVIEW],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def create_view(
    request: Request,
    database: str,
    body: models.CreateViewRequest,
    access: Annotated[Access, DATABASE_CREATEVIEW],
) -> Response:
    """409 when a view or a table of ``database`` has the name; 404 when the database does not exist."""
    if body.identifier.database != database:
        raise ValidationError(
            f"identifier.database: {body.identifier.database!r} is not the path's {database!r}",
            field="identifier.database",
        )
    schema = ViewSchema.from_json(body.schema_.model_dump(by_alias=True))
    catalog_of(request).objects.create_view(
        validate_identifier("database", database),
        validate_identifier("view", body.identifier.object),
        schema,
        principal=access.principal,
    )
    return Response(status_code=200)


@router.get(paths.VIEW, response_model=models.GetViewResponse, dependencies=[VIEW_SELECT])
def get_view(request: Request, database: str, view: str) -> models.GetViewResponse:
    return common.view_response(catalog_of(request).objects.get_view(*_names(database, view)))


@router.post(paths.VIEW, response_class=Response, responses={**NO_BODY, **CONFLICT})
def alter_view(
    request: Request,
    database: str,
    view: str,
    body: models.AlterViewRequest,
    access: Annotated[Access, VIEW_ALTER],
) -> Response:
    """Apply the changes in order, all or none; the view's version grows by one. 404 ``DIALECT`` /
    409 ``DIALECT`` for a dialect that is missing / already there, 400 naming an unknown action."""
    catalog_of(request).objects.alter_view(*_names(database, view), body.changes, principal=access.principal)
    return Response(status_code=200)


@router.delete(paths.VIEW, response_class=Response, responses=NO_BODY)
def drop_view(request: Request, database: str, view: str, access: Annotated[Access, VIEW_DROP]) -> Response:
    catalog_of(request).objects.drop_view(*_names(database, view), principal=access.principal)
    return Response(status_code=200)


@router.post(paths.RENAME_VIEW, response_class=Response, responses={**NO_BODY, **CONFLICT})
def rename_view(
    request: Request, body: models.RenameTableRequest, access: Annotated[Access, AUTHENTICATED]
) -> Response:
    """Needs ``ALTER`` on the source view and ``CREATEVIEW`` on the destination's database; the view
    keeps its id, version and history."""
    src, dst = body.source, body.destination
    check(request, access, A.ALTER, Resource.view(src.database, src.object))
    check(request, access, A.CREATEVIEW, Resource.of_database(dst.database))
    catalog_of(request).objects.rename_view(
        *_names(src.database, src.object), *_names(dst.database, dst.object), principal=access.principal
    )
    return Response(status_code=200)


def _names(database: str, view: str) -> tuple[str, str]:
    return validate_identifier("database", database), validate_identifier("view", view)
