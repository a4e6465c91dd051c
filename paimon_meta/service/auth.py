"""Bearer tokens and Paimon's permission model: the one check every route goes through.

Each route declares ``Depends(Require(resource_type, access))``: the check is one (resource, access) of
Paimon's model, decided by ``governance.evaluate.decide`` on the caller's assignments in the request's
catalog (``Access.in_catalog``: an assignment never reaches into another catalog). The resource's
locator comes from the path (:func:`locate`): ``{database}``, ``{table}`` (a branch ``t$branch_b`` is
its table), ``{view}`` or ``{semantic_view}``, ``{function}``; ``CATALOG`` is the request's catalog.
``Require(None)`` only authenticates (the handler then checks with :func:`check` or filters listings
with ``Access.sees``/``Access.may``). A missing or unknown token is 401, a refused decision 403 whose
body names the decision's reason and the (resource, access) needed; either way the route body never
runs, so nothing is written, and the refusal is logged (``paimon_meta.service.auth``) and counted
(``paimon_meta_service_auth_refusals_total``); a refused commit is also recorded in the data-access log
(``commit_refused``), as docs/AUDIT.md counts it. An allowed decision is kept on the request
(``request.state.decision``: for ``SELECT`` on a table, its ``columns`` is the caller's column range).

The token itself is checked earlier, by the app's middleware, before a request's body is read (see
``service.app``): a route then finds the request's ``access`` already there and only decides.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from fastapi import Request

from paimon_meta.errors import ValidationError
from paimon_meta.governance.bundles import Bundle, bundle_assignments
from paimon_meta.governance.evaluate import Decision, Subject, decide
from paimon_meta.governance.permissions import APPLICABLE, Resource, ResourceType
from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.metastore.principals import Access, utc_now
from paimon_meta.service.deps import resolve_served, table_of_object
from paimon_meta.service.errors import ForbiddenError, NotAuthenticatedError
from paimon_meta.service.state import ServiceState

log = logging.getLogger("paimon_meta.service.auth")


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
    """A FastAPI dependency: the caller may perform ``access`` on the ``resource_type`` object the
    request's path names (``resource_type`` None: only a valid token)."""

    resource_type: ResourceType | None
    access: PermissionAccess | None = None
    #: A commit route: a refusal (403) is also recorded in the data-access log (``commit_refused``).
    commit: bool = False

    def __post_init__(self) -> None:
        if (self.resource_type is None) != (self.access is None):
            raise ValueError("a route requires a resource type and an access, or neither")
        if self.resource_type is not None and self.resource_type not in LOCATABLE:
            raise ValueError(f"a route's path cannot name a {self.resource_type.value}")
        if self.resource_type is not None and self.access not in APPLICABLE[self.resource_type]:
            raise ValueError(f"{self.access} does not apply to a {self.resource_type.value}")

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
            _log_refusal(request, state, "unauthenticated", None, self._needs(request))
            raise NotAuthenticatedError(
                "a valid bearer token is required (Authorization: Bearer <token>)"
                if token is None
                else "the bearer token is unknown, revoked or expired"
            )
        request.state.principal = access.principal
        request.state.access = access  # every catalog's assignments: only service_access reads them
        # Assignments are per catalog: from here on the request sees only those of its catalog (the one
        # its prefix names; the default catalog for a path without one). 404 for a prefix naming none.
        served = await resolve_served(request)
        access = access.in_catalog(served.key, default=served.default)
        now = utc_now()
        if not served.default and not access.holds_any(at=now):
            # Nothing of another catalog is shown to a principal holding no assignment in it (not even
            # an empty listing): every route of it is 403 (the default catalog's listings stay as they
            # were).
            raise not_in_catalog(request, access, served.name, self._needs(request))
        if self.resource_type is None or self.access is None:
            return access
        resource = locate(self.resource_type, request.path_params)
        decision = access.decide(resource, self.access, at=now)
        if not decision.allowed:
            error = refuse(request, access, resource, self.access, decision)
            if self.commit and resource.type is ResourceType.TABLE:
                assert resource.database is not None and resource.object is not None
                route = getattr(request.scope.get("route"), "path", request.url.path)
                await anyio.to_thread.run_sync(
                    functools.partial(
                        state.record_refused_commit,
                        access.principal,
                        resource.database,
                        resource.object,
                        str(error),
                        route,
                        catalog=served.catalog,
                    )
                )
            raise error
        request.state.decision = decision
        return access

    def _needs(self, request: Request) -> str:
        if self.resource_type is None or self.access is None:
            return "a token"
        try:
            return f"{self.access.value} on {locate(self.resource_type, request.path_params)}"
        except (KeyError, ValidationError):
            return f"{self.access.value} on a {self.resource_type.value}"


#: The resource types a route's path names (the scopes ``CATALOG_ALL``/``DATABASE_ALL`` and ``COLUMN``
#: are checked by handlers, never by a path).
LOCATABLE = frozenset(
    {
        ResourceType.CATALOG,
        ResourceType.DATABASE,
        ResourceType.TABLE,
        ResourceType.VIEW,
        ResourceType.FUNCTION,
    }
)


def locate(resource_type: ResourceType, params: Mapping[str, Any]) -> Resource:
    """The ``resource_type`` object a path's parameters name: the request's catalog, ``{database}``, its
    ``{table}`` (a branch ``t$branch_b`` is table ``t``), ``{view}`` (or ``{semantic_view}``), its
    ``{function}``."""
    if resource_type is ResourceType.CATALOG:
        return Resource.catalog()
    database = str(params["database"])
    if resource_type is ResourceType.DATABASE:
        return Resource.of_database(database)
    if resource_type is ResourceType.TABLE:
        return Resource.table(database, table_of_object(str(params["table"])))
    if resource_type is ResourceType.VIEW:
        return Resource.view(database, str(params.get("view") or params["semantic_view"]))
    if resource_type is ResourceType.FUNCTION:
        return Resource.function(database, str(params["function"]))
    raise ValueError(f"a route's path cannot name a {resource_type.value}")


def check(
    request: Request,
    access: Access,
    needs: PermissionAccess,
    resource: Resource,
    *,
    catalog: str | None = None,
) -> Decision:
    """A handler's own check (``Require(None)`` routes): the decision, or its 403 raised (logged and
    counted as :class:`Require` refuses). ``catalog``: the catalog's name, when it is not the
    request's path's."""
    decision = access.decide(resource, needs)
    if not decision.allowed:
        raise refuse(request, access, resource, needs, decision, catalog=catalog)
    return decision


def decision_of(request: Request) -> Decision | None:
    """The decision the route's ``Require`` allowed the request with (None: a ``Require(None)`` route).
    For ``SELECT`` on a table its ``columns`` is the caller's column range (``/auth`` enforces it)."""
    decision: Decision | None = getattr(request.state, "decision", None)
    return decision


def service_access(request: Request) -> Access:
    """The access of the request's principal in every catalog (not narrowed to one), for the routes
    that span catalogs (``/v1/config?warehouse=``, the catalogs' admin API), which check each catalog's
    assignments themselves. Only after ``Require`` authenticated the request."""
    access: Access = request.state.access
    return access


def refuse(
    request: Request,
    access: Access,
    resource: Resource,
    needs: PermissionAccess,
    decision: Decision | None = None,
    *,
    catalog: str | None = None,
) -> ForbiddenError:
    """The 403 of a refused decision, logged and counted; the caller raises it. Its message is the
    decision's reason and the (resource, access) needed; ``resourceType``/``resourceName`` name the
    resource (``catalog``: the catalog's name, when it is not the request's path's)."""
    state: ServiceState = request.app.state.service
    if decision is None:
        decision = access.decide(resource, needs)
    where = f"{resource}" if catalog is None else f"{resource} of catalog {catalog!r}"
    _log_refusal(request, state, "forbidden", access.principal, f"{needs.value} on {where}")
    name = ".".join(x for x in (resource.database, resource.object) if x is not None)
    return ForbiddenError(
        f"{decision.reason} (needed: {needs.value} on {where}{bundle_hint(resource, needs)})",
        # The protocol's resource types (ErrorResponse): the catalog is none of them.
        resource_type=None if resource.type is ResourceType.CATALOG else resource.type.value,
        resource_name=name or catalog,
    )


def not_in_catalog(
    request: Request, access: Access, catalog: str, needs: str = "any assignment"
) -> ForbiddenError:
    """The 403 of a catalog (not the default one) in which the caller holds no active assignment,
    logged and counted; the caller raises it."""
    _log_refusal(
        request, request.app.state.service, "forbidden", access.principal, f"{needs} in catalog {catalog!r}"
    )
    return ForbiddenError(
        f"principal {access.principal!r} holds no assignment in catalog {catalog!r}", resource_name=catalog
    )


def bundle_hint(resource: Resource, needs: PermissionAccess) -> str:
    """``"; a write grant on db.t gives it"``: the weakest of the service's levels (``principals grant
    read|write|admin``) on the narrowest scope that gives ``needs`` on ``resource``, for the operator
    reading a 403 ("" when none does: a delegation)."""
    database = resource.database
    table = resource.object if resource.type is ResourceType.TABLE else None
    now = utc_now()
    for scope in dict.fromkeys(((database, table), (database, None), (None, None))):
        for level in Bundle:
            given = bundle_assignments("p", level, *scope)
            if decide(given, Subject("p"), resource, needs, at=now).allowed:
                where = "the catalog" if scope[0] is None else ".".join(x for x in scope if x is not None)
                article = "an" if level is Bundle.ADMIN else "a"
                return f"; {article} {level.value} grant on {where} gives it"
    return ""


def _log_refusal(
    request: Request, state: ServiceState, reason: str, principal: str | None, needs: str
) -> None:
    log.warning(
        "refused %s %s: %s (principal %s, needs %s)",
        request.method,
        log_text(request.url.path),
        reason,
        log_text(principal or "-"),
        needs,
    )
    state.metrics.auth_refusals.labels(reason=reason).inc()
