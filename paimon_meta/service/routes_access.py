"""Data access: vended storage credentials (``getTableToken``) and query authorization
(``authTableQuery``). The grant that guards a table's metadata guards its files too: with vending
configured, clients hold no storage keys of their own, only what these routes hand them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request

from paimon_meta.db.models import AccessLevel
from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Resource
from paimon_meta.io.sts import vendable
from paimon_meta.metastore.principals import Access
from paimon_meta.rest import models, paths
from paimon_meta.service.auth import refuse
from paimon_meta.service.deps import catalog_of, served_of, table_identifier, table_of_object
from paimon_meta.service.errors import ForbiddenError
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import BEARER, ERRORS, PREFIX, TABLE_SELECT, UNSUPPORTED

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)


@router.get(
    paths.TABLE_TOKEN,
    response_model=models.GetTableTokenResponse,
    tags=["data access"],
    responses=UNSUPPORTED,
)
def get_table_token(
    request: Request,
    database: str,
    table: str,
    access: Annotated[Access, TABLE_SELECT],
    level: Annotated[Literal["read", "write"] | None, Query(alias="access")] = None,
) -> models.GetTableTokenResponse:
    """Storage credentials limited to the table's location: read-only for a principal with ``read``,
    read-write (and delete) with ``write`` or ``admin``. ``access`` (our extension; pypaimon sends none)
    asks for less than the grant allows (``read``), or insists on ``write`` (403 without the grant).
    The answer's ``token`` is the storage options to build a FileIO from (``s3.access-key``,
    ``s3.secret-key``, ``s3.session-token``, ``s3.endpoint``, ``s3.region``, ...), valid until
    ``expiresAtMillis``. 501 when the server vends no credentials (no ``--sts-role-arn``: clients use
    their own storage options, and ``/v1/config`` says ``data-token.enabled=false``) or the table is
    not on S3; 503 when STS is unreachable or throttling, 502 when it refuses the server."""
    catalog = catalog_of(request)
    identifier = table_identifier(database, table)
    row = catalog.table_row(identifier)
    vending = served_of(request).vending  # the catalog's own STS role and bucket
    if vending is None:
        raise UnsupportedError(
            "this catalog vends no storage credentials (no STS role: serve --sts-role-arn, or catalogs "
            "create --sts-role-arn): use your own storage options; /v1/config says "
            "data-token.enabled=false"
        )
    location = catalog.location_of(row)
    if not vendable(location):
        raise UnsupportedError(
            f"table {identifier} is not on S3 ({location.partition('://')[0] or 'local'} storage): "
            "there are no storage credentials to vend for it"
        )
    resource = Resource.table(database, table_of_object(table))
    decision = access.decide(resource, A.UPDATE)
    may_write = decision.allowed
    if level == "write" and not may_write:
        error = refuse(request, access, resource, A.UPDATE, decision)
        raise ForbiddenError(
            f"{error}: only read credentials can be vended",
            resource_type=error.resource_type,
            resource_name=error.resource_name,
        )
    chosen = AccessLevel.WRITE if may_write and level != "read" else AccessLevel.READ
    creds = vending.credentials(access.principal, row, location, chosen)
    return models.GetTableTokenResponse(
        token=creds.options(),
        expires_at_millis=creds.expires_at_millis,
        expires_at=creds.expires_at_millis,
    )


@router.post(paths.TABLE_AUTH, response_model=models.AuthTableQueryResponse, tags=["data access"])
def auth_table_query(
    request: Request,
    database: str,
    table: str,
    access: Annotated[Access, TABLE_SELECT],
    body: models.AuthTableQueryRequest | None = None,
) -> models.AuthTableQueryResponse:
    """The row filters and column masks the caller must apply when reading ``select`` (all columns
    when absent). This catalog keeps neither yet, so both are empty for any principal with ``read`` on
    a table that exists (404 ``TABLE`` otherwise); a selected column the table does not have is refused
    (400 naming it)."""
    identifier = table_identifier(database, table)
    select = body.select if body is not None else None
    # the table must exist (404 TABLE otherwise), whatever the selection
    _, schema, _ = catalog_of(request).table_metadata(identifier)
    if select:
        columns = {f.name for f in schema.fields}
        unknown = [c for c in select if c not in columns]
        if unknown:
            raise ValidationError(
                f"table {identifier} has no column {', '.join(repr(c) for c in unknown)}",
                resource_name=identifier,
            )
    return models.AuthTableQueryResponse(filter=[], column_masking={})
