"""Functions (the protocol's 7 function operations), kept in the metastore (``paimon_functions``) with a
version and an event per change.

Grants as for views and tables: reading and listing a database's functions needs read on the database,
creating, altering and dropping one admin on it; a catalog-wide listing shows the functions of the
databases the caller may read. Functions have a namespace of their own (a function may share a table's
or a view's name, as in Java)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from paimon_meta.metastore.principals import Access
from paimon_meta.model.catalog_objects import FunctionSpec
from paimon_meta.model.identifier import validate_function_name, validate_identifier
from paimon_meta.rest import models, paths
from paimon_meta.service import convert
from paimon_meta.service import objects_common as common
from paimon_meta.service.deps import catalog_of
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    AUTHENTICATED,
    BEARER,
    CONFLICT,
    DATABASE_CREATEFUNCTION,
    DATABASE_LIST,
    ERRORS,
    FUNCTION_ALTER,
    FUNCTION_DROP,
    FUNCTION_SELECT,
    NO_BODY,
    PREFIX,
    DatabasePattern,
    MaxResults,
    PageToken,
)

router = APIRouter(
    route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS, tags=["functions"]
)

FunctionPattern = Annotated[
    str | None, Query(alias=paths.FUNCTION_NAME_PATTERN, max_length=convert.MAX_PATTERN)
]


@router.get(paths.FUNCTIONS, response_model=models.ListFunctionsResponse, dependencies=[DATABASE_LIST])
def list_functions(
    request: Request,
    database: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
    pattern: FunctionPattern = None,
) -> models.ListFunctionsResponse:
    """The names of ``database``'s functions, by name (``functionNamePattern``: SQL LIKE)."""
    rows, token = common.database_page(
        catalog_of(request).objects.page_functions, database, max_results, page_token, pattern
    )
    return models.ListFunctionsResponse(functions=[r.name for r in rows], next_page_token=token)


@router.get(
    paths.FUNCTION_DETAILS, response_model=models.ListFunctionDetailsResponse, dependencies=[DATABASE_LIST]
)
def list_function_details(
    request: Request,
    database: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
    pattern: FunctionPattern = None,
) -> models.ListFunctionDetailsResponse:
    """``database``'s functions as ``GET`` of each answers it, by name."""
    rows, token = common.database_page(
        catalog_of(request).objects.page_functions, database, max_results, page_token, pattern
    )
    return models.ListFunctionDetailsResponse(
        function_details=[common.function_response(r) for r in rows], next_page_token=token
    )


@router.get(paths.FUNCTIONS_GLOBALLY, response_model=models.ListFunctionsGloballyResponse)
def list_functions_globally(
    request: Request,
    access: Annotated[Access, AUTHENTICATED],
    max_results: MaxResults = None,
    page_token: PageToken = None,
    database_pattern: DatabasePattern = None,
    pattern: FunctionPattern = None,
) -> models.ListFunctionsGloballyResponse:
    """Every function of the databases the caller may read, by database then name; the page token is
    the last ``database.function`` of the previous page."""
    rows, token = common.global_page(
        catalog_of(request).objects.page_functions,
        access,
        max_results,
        page_token,
        database_pattern=database_pattern,
        pattern=pattern,
    )
    return models.ListFunctionsGloballyResponse(
        functions=[models.Identifier(database=r.database, object=r.name) for r in rows],
        next_page_token=token,
    )


@router.post(paths.FUNCTIONS, response_class=Response, responses={**NO_BODY, **CONFLICT})
def create_function(
    request: Request,
    database: str,
    body: models.CreateFunctionRequest,
    access: Annotated[Access, DATABASE_CREATEFUNCTION],
) -> Response:
    """409 when ``database`` has a function of that name; 404 when the database does not exist."""
    spec = FunctionSpec.from_request(body.model_dump(by_alias=True))
    catalog_of(request).objects.create_function(
        *_names(database, body.name), spec, principal=access.principal
    )
    return Response(status_code=200)


@router.get(paths.FUNCTION, response_model=models.GetFunctionResponse, dependencies=[FUNCTION_SELECT])
def get_function(request: Request, database: str, function: str) -> models.GetFunctionResponse:
    return common.function_response(catalog_of(request).objects.get_function(*_names(database, function)))


@router.post(paths.FUNCTION, response_class=Response, responses={**NO_BODY, **CONFLICT})
def alter_function(
    request: Request,
    database: str,
    function: str,
    body: models.AlterFunctionRequest,
    access: Annotated[Access, FUNCTION_ALTER],
) -> Response:
    """Apply the changes in order, all or none; the function's version grows by one. 404 / 409
    ``DEFINITION`` for a definition that is missing / already there, 400 naming an unknown action."""
    catalog_of(request).objects.alter_function(
        *_names(database, function), body.changes, principal=access.principal
    )
    return Response(status_code=200)


@router.delete(paths.FUNCTION, response_class=Response, responses=NO_BODY)
def drop_function(
    request: Request, database: str, function: str, access: Annotated[Access, FUNCTION_DROP]
) -> Response:
    catalog_of(request).objects.drop_function(*_names(database, function), principal=access.principal)
    return Response(status_code=200)


def _names(database: str, function: str) -> tuple[str, str]:
    return validate_identifier("database", database), validate_function_name(function)
