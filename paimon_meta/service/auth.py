"""Bearer tokens and grants: the one check every route goes through.

Each route declares ``Depends(Require(privilege, scope))``: the access it returns (and checks) holds
only the grants of the request's catalog (``Access.in_catalog``: a grant never reaches into another
catalog); ``scope`` names which path parameters the
grant must cover (``catalog``: none; ``database``; ``table``). ``privilege=None`` only authenticates
(listings then show what the principal's grants reach). A missing or unknown token is 401, a missing
grant 403; either way the route body never runs, so nothing is written, and the refusal is logged
(``paimon_meta.service.auth``) and counted (``paimon_meta_service_auth_refusals_total``); a refused
commit is also recorded in the data-access log (``commit_refused``), as docs/AUDIT.md counts it.

The token itself is checked earlier, by the app's middleware, before a request's body is read (see
``service.app``): a route then finds the request's ``access`` already there and only checks the grant.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Literal

import anyio.to_thread
from fastapi import Request

from paimon_meta.db.models import Privilege
from paimon_meta.metastore.principals import Access
from paimon_meta.service.deps import resolve_served, table_of_object
from paimon_meta.service.errors import ForbiddenError, NotAuthenticatedError
from paimon_meta.service.state import ServiceState

log = logging.getLogger("paimon_meta.service.auth")

Scope = Literal["catalog", "database", "table"]


def log_text(value: object) -> str:
    """``value`` as a JSON string (quoted; quotes, backslashes, control and non-ASCII characters
    escaped): what a client sent can never start a new log line or pass for another field."""
    return json.dumps(str(value))


def bearer_token(request: Request) -> str | None:
    return token_of(request.headers.get("authorization"))


def token_of(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, else None."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


@dataclass(frozen=True, slots=True)
class Require:
    """A FastAPI dependency: the caller holds ``privilege`` over ``scope`` of the request's path."""

    privilege: Privilege | None
    scope: Scope = "catalog"
    #: A commit route: a refusal (403) is also recorded in the data-access log (``commit_refused``).
    commit: bool = False

    async def __call__(self, request: Request) -> Access:
        # On the event loop when the answer is cached (no worker-thread hop per request); a miss asks
        # the metastore on a worker thread.
        state: ServiceState = request.app.state.service
        # Set by the middleware, which authenticated the token before reading the body.
        access: Access | None = request.scope.get("state", {}).get("access")
        token = bearer_token(request)
        if access is None and token is not None:
            known, access = state.cached_access(token)
            if not known:
                access = await anyio.to_thread.run_sync(state.authenticate, token)
        if access is None:
            self._refuse(request, state, "unauthenticated", None)
            raise NotAuthenticatedError(
                "a valid bearer token is required (Authorization: Bearer <token>)"
                if token is None
                else "the bearer token is unknown, revoked or expired"
            )
        request.state.principal = access.principal
        request.state.access = access  # every catalog's grants: only service_access reads them
        # Grants are per catalog: from here on the request sees only those of its catalog (the one its
        # prefix names; the default catalog for a path without one). 404 for a prefix naming none.
        served = await resolve_served(request)
        access = access.in_catalog(served.key, default=served.default)
        if not served.default and not access.grants:
            # Nothing of another catalog is shown to a principal holding no grant in it (not even an
            # empty listing): every route of it is 403 (the default catalog's listings stay as they were).
            _log_refusal(
                request, state, "forbidden", access.principal, privilege=self.privilege, scope=self.scope
            )
            raise ForbiddenError(f"principal {access.principal!r} holds no grant in catalog {served.name!r}")
        if self.privilege is None:
            return access
        database = request.path_params.get("database") if self.scope != "catalog" else None
        table = request.path_params.get("table") if self.scope == "table" else None
        if table is not None:
            table = table_of_object(table)  # a branch (t$branch_b1) is guarded by its table's grants
        if not access.allows(self.privilege, database, table):
            target = (
                "the catalog" if database is None else database if table is None else f"{database}.{table}"
            )
            _log_refusal(
                request, state, "forbidden", access.principal, privilege=self.privilege, scope=self.scope
            )
            message = f"principal {access.principal!r} has no {self.privilege.value} grant on {target}"
            if self.commit and database is not None and table is not None:
                route = getattr(request.scope.get("route"), "path", request.url.path)
                await anyio.to_thread.run_sync(
                    functools.partial(
                        state.record_refused_commit,
                        access.principal,
                        database,
                        table,
                        message,
                        route,
                        catalog=served.catalog,
                    )
                )
            raise ForbiddenError(
                message,
                resource_type="TABLE" if table else "DATABASE" if database else None,
                resource_name=None if database is None else target,
            )
        return access

    def _refuse(self, request: Request, state: ServiceState, reason: str, principal: str | None) -> None:
        _log_refusal(request, state, reason, principal, privilege=self.privilege, scope=self.scope)


def service_access(request: Request) -> Access:
    """The access of the request's principal in every catalog (not narrowed to one), for the routes
    that span catalogs (``/v1/config?warehouse=``, the catalogs' admin API), which check each catalog's
    grants themselves. Only after ``Require`` authenticated the request."""
    access: Access = request.state.access
    return access


def forbidden(
    request: Request,
    access: Access,
    privilege: Privilege,
    scope: Scope,
    database: str | None = None,
    *,
    catalog: str | None = None,
) -> ForbiddenError:
    """The 403 of a grant a handler checks itself (``Require(None)`` routes), logged and counted as
    :class:`Require` refuses; the caller raises it. ``catalog``: the catalog's name, when it is not the
    request's path's."""
    state: ServiceState = request.app.state.service
    _log_refusal(request, state, "forbidden", access.principal, privilege=privilege, scope=scope)
    target = ("the catalog" if catalog is None else f"catalog {catalog!r}") if database is None else database
    return ForbiddenError(
        f"principal {access.principal!r} has no {privilege.value} grant on {target}",
        resource_type=None if database is None else "DATABASE",
        resource_name=database,
    )


def _log_refusal(
    request: Request,
    state: ServiceState,
    reason: str,
    principal: str | None,
    *,
    privilege: Privilege | None,
    scope: Scope,
) -> None:
    log.warning(
        "refused %s %s: %s (principal %s, needs %s on %s)",
        request.method,
        log_text(request.url.path),
        reason,
        log_text(principal or "-"),
        privilege.value if privilege else "a token",
        scope,
    )
    state.metrics.auth_refusals.labels(reason=reason).inc()
