"""Data access: vended storage credentials (``getTableToken``) and query authorization
(``authTableQuery``). The grant that guards a table's metadata guards its files too: with vending
configured, clients hold no storage keys of their own, only what these routes hand them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request

from paimon_meta.db.models import AccessLevel
from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Resource
from paimon_meta.governance.policies import QueryRules
from paimon_meta.io.sts import vendable
from paimon_meta.metastore.principals import Access
from paimon_meta.rest import models, paths
from paimon_meta.service.auth import refuse
from paimon_meta.service.data_policies import TablePolicies, is_trusted_engine, table_policies
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
    policies: Annotated[TablePolicies, Depends(table_policies)],
    level: Annotated[Literal["read", "write"] | None, Query(alias="access")] = None,
) -> models.GetTableTokenResponse:
    """Storage credentials limited to the table's location: read-only for a principal with ``read``,
    read-write (and delete) with ``write`` or ``admin``. ``access`` (our extension; pypaimon sends none)
    asks for less than the grant allows (``read``), or insists on ``write`` (403 without the grant).
    The answer's ``token`` is the storage options to build a FileIO from (``s3.access-key``,
    ``s3.secret-key``, ``s3.session-token``, ``s3.endpoint``, ``s3.region``, ...), valid until
    ``expiresAtMillis``. 501 when the server vends no credentials (no ``--sts-role-arn``: clients use
    their own storage options, and ``/v1/config`` says ``data-token.enabled=false``) or the table is
    not on S3; 503 when STS is unreachable or throttling, 502 when it refuses the server.

    Raw file access bypasses row filters and column masks: a principal whose reads of the table a
    policy restricts (a row filter, a column mask, a column range: its own or a group's or role's) gets
    no credentials (403 naming the policies), unless the operator marked it a trusted engine
    (``serve --trusted-engines``), one that applies them itself (docs/CREDENTIALS.md)."""
    catalog = catalog_of(request)
    identifier = table_identifier(database, table)
    row = catalog.table_row(identifier)
    restrictions = policies.restrictions(access, identifier)
    if restrictions and not is_trusted_engine(request, access):
        raise ForbiddenError(
            f"principal {access.principal!r} reads {identifier} under "
            f"{', '.join(r.describe() for r in restrictions)}: raw file access would bypass "
            f"{'them' if len(restrictions) > 1 else 'it'}, so no data token is vended (read through "
            "the catalog, which applies them; an operator may mark an engine that applies them itself "
            "a trusted engine: serve --trusted-engines)",
            resource_type="TABLE",
            resource_name=identifier,
        )
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
    policies: Annotated[TablePolicies, Depends(table_policies)],
    body: models.AuthTableQueryRequest | None = None,
) -> models.AuthTableQueryResponse:
    """The row filters (to be ANDed) and column masks the caller must apply when reading ``select`` (all
    columns when absent, as paimon-rust sends it): the policies of the caller, its groups and its roles,
    combined (``governance.policies.QueryRules``) against the latest schema. A selected column outside
    the caller's column range (its ``COLUMN`` assignments) is 403 naming the columns; a selected column
    the table does not have 400 naming it; 404 ``TABLE`` for no such table. A stored rule that no longer
    applies, or two that conflict, fail closed: 400 naming the rule, never an answer without it."""
    identifier = table_identifier(database, table)
    select = body.select if body is not None else None
    # the table must exist (404 TABLE otherwise), whatever the selection
    _, schema, _ = catalog_of(request).table_metadata(identifier)
    columns = [f.name for f in schema.fields]
    if select:
        unknown = [c for c in select if c not in set(columns)]
        if unknown:
            raise ValidationError(
                f"table {identifier} has no column {', '.join(repr(c) for c in unknown)}",
                resource_name=identifier,
            )
    # the one lookup of a principal's policies and column range (the data token and the console's
    # preview ask the same): its own, its groups' and its roles'
    mine = policies.read_rules(access, identifier)
    refused = mine.columns.refused(select or columns)
    if refused:
        raise ForbiddenError(
            f"principal {access.principal!r} may not select column(s) {', '.join(repr(c) for c in refused)} "
            f"of {identifier}: outside its column range",
            resource_type="TABLE",
            resource_name=identifier,
        )
    rules = QueryRules.combine(mine.filters, mine.masks, schema.fields)
    filters, masks = rules.auth_response()
    return models.AuthTableQueryResponse(filter=filters, column_masking=masks)
