"""A table's schemas (the Java client's ``listSchemas`` and ``getSchema``). Reading needs ``read`` on the
table, as its snapshots do."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request

from paimon_meta.model.schema import TableSchema
from paimon_meta.ops.schemas import TableSchemas
from paimon_meta.rest import models, paths
from paimon_meta.serde.json import schema_to_json
from paimon_meta.service import convert
from paimon_meta.service.deps import catalog_of, table_identifier
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    BEARER,
    ERRORS,
    PREFIX,
    TABLE_SELECT,
    MaxResults,
    PageToken,
)

router = APIRouter(
    route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS, tags=["schemas"]
)


def _json(schema: TableSchema) -> dict[str, object]:
    """The schema as its schema file holds it (Java's ``TableSchema`` JSON)."""
    parsed: dict[str, object] = json.loads(schema_to_json(schema))
    return parsed


@router.get(paths.SCHEMAS, response_model=models.ListSchemasResponse, dependencies=[TABLE_SELECT])
def list_schemas(
    request: Request,
    database: str,
    table: str,
    max_results: MaxResults = None,
    page_token: PageToken = None,
) -> models.ListSchemasResponse:
    """The table's schemas, oldest first, ``maxResults`` per page (default 100); the token is the last
    schema id of the previous page. A format, object or Iceberg table has one schema."""
    schemas = TableSchemas(catalog_of(request), table_identifier(database, table))
    page, token = schemas.page(max_results=max_results, page_token=page_token, max_page=convert.MAX_PAGE)
    return models.ListSchemasResponse(schemas=[_json(s) for s in page], next_page_token=token)


@router.get(paths.SCHEMA_VERSION, response_model=models.GetSchemaResponse, dependencies=[TABLE_SELECT])
def get_schema(request: Request, database: str, table: str, version: str) -> models.GetSchemaResponse:
    """The schema ``version`` names: a schema id, ``LATEST`` or ``EARLIEST``; 404 ``SCHEMA`` when it
    names none."""
    schemas = TableSchemas(catalog_of(request), table_identifier(database, table))
    return models.GetSchemaResponse(schema=_json(schemas.at(version)))
