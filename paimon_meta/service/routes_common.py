"""What every router of the protocol declares besides its routes, so the served OpenAPI document says what
the service answers: the bearer token (a security scheme), the ``{prefix}`` path parameter (checked: 404
for a name that is no catalog of the service), and the error answers with the protocol's error body.

Every error is ``ErrorResponse`` (``service.errors`` maps the error hierarchy to it): 400 bad input (never
FastAPI's 422), 401 no valid token, 403 refused by Paimon's permission model (the reason and the needed
(resource, access) named), 404 no such resource, 413 body or one of its texts over the limit, other 4xx
refusals of the middleware, 502 storage refused (an operator must act), 503 unavailable (retry after
``Retry-After``). Routes that change something add 409; routes that publish a
snapshot add 500, which this service answers only when a commit's outcome is unknown; routes refusing a
feature they do not implement add 501. Any other 5xx is a bug, and so is a 500, 502 or 503 while the
metastore and storage answer (``tests/service/test_fuzz_openapi.py`` checks both).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from fastapi.security import HTTPBearer

from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.governance.permissions import ResourceType
from paimon_meta.rest import models, paths
from paimon_meta.service.auth import Require
from paimon_meta.service.convert import MAX_PATTERN
from paimon_meta.service.deps import resolve_served

Responses = dict[int | str, dict[str, Any]]


def _error(description: str) -> dict[str, Any]:
    return {"model": models.ErrorResponse, "description": description}


#: What every authenticated route may answer besides its success.
ERRORS: Responses = {
    400: _error("Bad input: the message names the field or parameter."),
    401: _error("No valid bearer token (missing, unknown, revoked or expired)."),
    403: _error(
        "Refused by Paimon's permission model: the message names why and the (resource, access) needed."
    ),
    404: _error(
        "No such catalog, database, table, tag or snapshot (`resourceType` says which; `SNAPSHOT`: the "
        "table has none yet)."
    ),
    413: _error(
        "The request body is over the server's limit, or one of its texts (a query, a comment, an "
        "option's value, ...) is over the catalog's limit for it: the message names the field."
    ),
    "4XX": _error(
        "Other refusals, each with the error body: 405 method not allowed, 408 body not received in "
        "time, 411 a body without Content-Length, 429 too many failed authentications from this address, "
        "or (the change feed's live stream) the principal holds its cap of streams on this replica "
        "(`Retry-After`)."
    ),
    502: _error(
        "Storage refused the server's request (credentials, a missing bucket, permissions), or STS "
        "refused to vend credentials (the role's trust policy, the duration): an operator must act; "
        "retrying does not help."
    ),
    503: {
        **_error(
            "The metastore, the table's lock, storage, STS or the identity provider is unavailable for "
            "now, or this replica is full: "
            "retry after `Retry-After` seconds. Nothing was committed unless the route says its outcome "
            "can be unknown."
        ),
        "headers": {
            "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}
        },
    },
}
#: Routes that change something.
CONFLICT: Responses = {
    409: _error(
        "Already exists, or changed concurrently (a commit conflict: nothing landed; rebuild on the "
        "latest snapshot and retry)."
    )
}
#: Routes that publish a snapshot: the one 500 this service answers on purpose.
OUTCOME_UNKNOWN: Responses = {
    500: _error(
        "The commit's outcome is unknown (storage failed while publishing): do not clean up; re-send the "
        "same commit (same identifier) or read the table's snapshots to resolve it."
    )
}
UNSUPPORTED: Responses = {
    501: _error("A feature of the request or of the table that this catalog does not implement.")
}
#: The answer of routes that answer 200 with no body.
NO_BODY: Responses = {200: {"description": "Done (no body)."}}

#: Documents ``Authorization: Bearer <token>`` (the security scheme); the middleware and ``Require``
#: check the token, this only reads the header.
BEARER = Depends(
    HTTPBearer(
        auto_error=False,
        description=(
            "`Authorization: Bearer <token>`: a static token of `paimon-meta principals create` "
            "(`pmt_...`) or, when the server runs with `--oidc-issuer`, a JWT of that issuer."
        ),
    )
)


async def catalog_prefix(
    request: Request,
    prefix: Annotated[
        str, Path(description="The catalog's name, as `GET /v1/config` answers it (`defaults.prefix`).")
    ],
) -> None:
    """404 when ``{prefix}`` names no catalog of this service (on the event loop; the metastore is read
    on a worker thread only for a catalog not cached)."""
    await resolve_served(request)


#: Declares and checks ``{prefix}`` on routes under ``/v1/{prefix}/``.
PREFIX = Depends(catalog_prefix)


# ---- the checks routes declare (tests/service/test_auth.py lists every route's) ------------------------
#: Any valid token: the handler filters or checks itself.
AUTHENTICATED = Depends(Require(None))
R, A = ResourceType, PermissionAccess
#: One (resource type, access) of Paimon's model each; the path locates the resource (``auth.locate``).
CATALOG_ALTER = Depends(Require(R.CATALOG, A.ALTER))
CATALOG_CREATEDATABASE = Depends(Require(R.CATALOG, A.CREATEDATABASE))
DATABASE_DESCRIBE = Depends(Require(R.DATABASE, A.DESCRIBE))
DATABASE_LIST = Depends(Require(R.DATABASE, A.LIST))
DATABASE_ALTER = Depends(Require(R.DATABASE, A.ALTER))
DATABASE_DROP = Depends(Require(R.DATABASE, A.DROP))
DATABASE_CREATETABLE = Depends(Require(R.DATABASE, A.CREATETABLE))
DATABASE_CREATEVIEW = Depends(Require(R.DATABASE, A.CREATEVIEW))
DATABASE_CREATEFUNCTION = Depends(Require(R.DATABASE, A.CREATEFUNCTION))
TABLE_SELECT = Depends(Require(R.TABLE, A.SELECT))
TABLE_UPDATE = Depends(Require(R.TABLE, A.UPDATE))
#: A commit: a refusal is also recorded in the data-access log.
TABLE_COMMIT = Depends(Require(R.TABLE, A.UPDATE, commit=True))
TABLE_ALTER = Depends(Require(R.TABLE, A.ALTER))
TABLE_DROP = Depends(Require(R.TABLE, A.DROP))
VIEW_SELECT = Depends(Require(R.VIEW, A.SELECT))
VIEW_ALTER = Depends(Require(R.VIEW, A.ALTER))
VIEW_DROP = Depends(Require(R.VIEW, A.DROP))
FUNCTION_SELECT = Depends(Require(R.FUNCTION, A.SELECT))
FUNCTION_ALTER = Depends(Require(R.FUNCTION, A.ALTER))
FUNCTION_DROP = Depends(Require(R.FUNCTION, A.DROP))

# ---- the query parameters of listings ------------------------------------------------------------------
MaxResults = Annotated[int | None, Query(alias=paths.MAX_RESULTS)]
PageToken = Annotated[str | None, Query(alias=paths.PAGE_TOKEN)]
DatabasePattern = Annotated[str | None, Query(alias=paths.DATABASE_NAME_PATTERN, max_length=MAX_PATTERN)]
TablePattern = Annotated[str | None, Query(alias=paths.TABLE_NAME_PATTERN, max_length=MAX_PATTERN)]
