"""Semantic views (the Java client's ``listSemanticViews``, ``getSemanticView``, ``upsertSemanticView``,
``deleteSemanticView``): a database's named semantic models, each a document ``{format, content}`` the
catalog keeps verbatim (content up to 1 MiB of UTF-8), with a version and an event per change.

Grants as for SQL views: reading and listing need read on the database, upserting and deleting admin on
it. A semantic view may not take the name of a SQL view of its database, nor a SQL view its name (409)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request, Response

from paimon_meta.metastore.catalog_objects import SemanticViewRow
from paimon_meta.metastore.principals import Access
from paimon_meta.model.catalog_objects import SemanticViewDefinition
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.rest import models, paths
from paimon_meta.service import objects_common as common
from paimon_meta.service.deps import catalog_of
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    BEARER,
    CONFLICT,
    DATABASE_CREATEVIEW,
    DATABASE_LIST,
    ERRORS,
    NO_BODY,
    PREFIX,
    VIEW_DROP,
    VIEW_SELECT,
    MaxResults,
    PageToken,
)

router = APIRouter(
    route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS, tags=["semantic views"]
)


def _response(row: SemanticViewRow) -> models.GetSemanticViewResponse:
    d = row.definition
    return models.GetSemanticViewResponse(
        name=row.name, definition=models.SemanticViewDefinition(format=d.format, content=d.content)
    )


def _names(database: str, name: str) -> tuple[str, str]:
    return validate_identifier("database", database), validate_identifier("semantic view", name)


@router.get(
    paths.SEMANTIC_VIEWS, response_model=models.ListSemanticViewsResponse, dependencies=[DATABASE_LIST]
)
def list_semantic_views(
    request: Request, database: str, max_results: MaxResults = None, page_token: PageToken = None
) -> models.ListSemanticViewsResponse:
    """The names of ``database``'s semantic views, by name; the token is the last name of the page."""
    rows, token = common.database_page(
        catalog_of(request).objects.page_semantic_views, database, max_results, page_token, None
    )
    return models.ListSemanticViewsResponse(semantic_views=[r.name for r in rows], next_page_token=token)


@router.get(paths.SEMANTIC_VIEW, response_model=models.GetSemanticViewResponse, dependencies=[VIEW_SELECT])
def get_semantic_view(request: Request, database: str, semantic_view: str) -> models.GetSemanticViewResponse:
    """The semantic view and its whole definition as last upserted; 404 ``SEMANTIC_VIEW`` when none."""
    return _response(catalog_of(request).objects.get_semantic_view(*_names(database, semantic_view)))


@router.post(
    paths.SEMANTIC_VIEW,
    response_model=models.GetSemanticViewResponse,
    responses=CONFLICT,
)
def upsert_semantic_view(
    request: Request,
    database: str,
    semantic_view: str,
    body: models.UpsertSemanticViewRequest,
    access: Annotated[Access, DATABASE_CREATEVIEW],
) -> models.GetSemanticViewResponse:
    """Create the semantic view or replace its whole definition; answers it as stored. 400 for a blank
    ``format`` or ``content``, 413 for content over 1 MiB of UTF-8, 409 when a SQL view of the database
    has the name, 404 when the database does not exist."""
    definition = SemanticViewDefinition(body.definition.format, body.definition.content)
    row = catalog_of(request).objects.upsert_semantic_view(
        *_names(database, semantic_view), definition, principal=access.principal
    )
    return _response(row)


@router.delete(paths.SEMANTIC_VIEW, response_class=Response, responses=NO_BODY)
def delete_semantic_view(
    request: Request, database: str, semantic_view: str, access: Annotated[Access, VIEW_DROP]
) -> Response:
    """404 ``SEMANTIC_VIEW`` when there is none."""
    catalog_of(request).objects.drop_semantic_view(
        *_names(database, semantic_view), principal=access.principal
    )
    return Response(status_code=200)
