"""Paimon's management API (apache/paimon ``rest-management-open-api.yaml``; docs/GOVERNANCE.md, "Routes"):
a catalog's permission assignments (list one exact resource's, grant, revoke) and a table's data policies
(row filters and column masks: list, create, drop), as pypaimon 2.1.0's ``permission_management()`` and
paimon-rust 0.4.0's procedures call them.

Who may: granting needs ``governance.evaluate.may_grant`` on the caller's effective assignments (its own,
its groups' and its roles', loaded from the store), revoking ``may_revoke`` (``GRANT`` reaching the
resource); listing a resource's assignments needs ``GRANT`` reaching it, else the caller sees only the
assignments of its own names. A table's policies: ``ALTER`` on the table or ``GRANT`` reaching it to
create, drop or list them all; otherwise the listing shows the caller's own. Every change is a row of the
governance event log (``paimon_governance_events``) with the caller as who.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Annotated

from fastapi import APIRouter, Query, Request

from paimon_meta.errors import ColumnNotFoundError, GovernanceConflictError
from paimon_meta.governance.evaluate import Decision, decide, may_grant, may_revoke
from paimon_meta.governance.permissions import Access as Permission
from paimon_meta.governance.permissions import Assignment, Resource, ResourceType, parse_access
from paimon_meta.metastore.assignments import (
    COLUMN_MASKING,
    ROW_FILTER,
    Assignments,
    Policies,
    StoredPolicy,
    SubjectAssignments,
    checked_policy,
)
from paimon_meta.metastore.principals import Access
from paimon_meta.metastore.registry import TableRow
from paimon_meta.model.schema import TableSchema
from paimon_meta.rest import management, paths
from paimon_meta.service.deps import served_of, table_identifier
from paimon_meta.service.errors import ForbiddenError
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    AUTHENTICATED,
    BEARER,
    CONFLICT,
    ERRORS,
    NO_BODY,
    PREFIX,
    MaxResults,
    PageToken,
)

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)

#: The option a table needs for policies and column grants (readers then call ``/auth``).
QUERY_AUTH = "query-auth.enabled"
TAGS: list[str | Enum] = ["management"]


def assignments_of(request: Request) -> Assignments:
    """The store of the request's catalog (the default catalog's also reads the rows naming none)."""
    served = served_of(request)
    return Assignments(served.catalog.engine, catalog_key=served.key, default=served.default)


def policies_of(request: Request) -> Policies:
    served = served_of(request)
    return Policies(served.catalog.engine, catalog_key=served.key)


def caller(request: Request, access: Access) -> SubjectAssignments:
    """The caller's subject and active assignments in the request's catalog (one query)."""
    return assignments_of(request).of_subject(access.principal, access.groups)


def _now() -> datetime:
    return datetime.now(UTC)


def _refuse(decision: Decision, resource: Resource) -> ForbiddenError:
    name = ".".join(x for x in (resource.database, resource.object) if x is not None) or None
    kind = "TABLE" if resource.type in (ResourceType.TABLE, ResourceType.COLUMN) else None
    return ForbiddenError(decision.reason, resource_type=kind, resource_name=name)


def _query_auth(schema: TableSchema) -> bool:
    return str(schema.options.get(QUERY_AUTH, "false")).strip().lower() == "true"


# ---- the checks (the console's governance actions call the same ones) ----------------------------------


def listed_principals(
    request: Request, access: Access, resource: Resource, *, principal: str | None = None
) -> list[str] | None:
    """Whose assignments on ``resource`` the caller may list: None (everyone's) with ``GRANT`` reaching
    it, else its own names (403 when it asks for another ``principal``'s). 404 when the database, table,
    view or function does not exist."""
    store = assignments_of(request)
    with store.engine.connect() as conn:
        store.resolve(conn, resource, must_exist=True)
    me = caller(request, access)
    if may_revoke(me.assignments, me.subject, resource, at=_now()).allowed:
        return None
    names = sorted(me.subject.names)
    if principal is not None and principal not in names:
        raise ForbiddenError(
            f"principal {access.principal!r} has no GRANT on {resource}: it may list only its own "
            "assignments",
            resource_name=str(resource),
        )
    return names


def check_grant(request: Request, access: Access, assignment: Assignment) -> None:
    """Refuse ``assignment`` as the grant route does (nothing written): 404 the resource or a named
    column missing, 409 a column grant on a table without ``query-auth.enabled=true``, 403 unless
    ``may_grant`` (``GRANT`` reaching the resource and holding what is given)."""
    resource = assignment.resource
    store = assignments_of(request)
    with store.engine.connect() as conn:
        store.resolve(conn, resource, must_exist=True)
    columns: list[str] = []
    if resource.type is ResourceType.COLUMN:
        identifier = table_identifier(resource.database or "", resource.object or "")
        _, schema, _ = served_of(request).catalog.table_metadata(identifier)
        columns = [f.name for f in schema.fields]
        assert assignment.columns is not None
        listed = sorted((assignment.columns.allowed or frozenset()) | assignment.columns.denied)
        missing = [c for c in listed if c not in columns]
        if missing:
            raise ColumnNotFoundError(
                f"table {identifier} has no column {', '.join(repr(c) for c in missing)}",
                identifier=identifier,
                column=missing[0],
            )
        if not _query_auth(schema):
            raise GovernanceConflictError(
                f"table {identifier} does not have {QUERY_AUTH}=true: its readers would not ask for the "
                "column range (set the option first)",
                table=identifier,
                reason="query-auth",
            )
    me = caller(request, access)
    decision = may_grant(me.assignments, me.subject, assignment, at=_now(), table_columns=columns)
    if not decision.allowed:
        raise _refuse(decision, resource)


def check_revoke(request: Request, access: Access, resource: Resource) -> None:
    """Refuse a revoke on ``resource`` as the revoke route does: 404 the resource missing, 403 unless
    ``may_revoke`` (``GRANT`` reaching it)."""
    store = assignments_of(request)
    with store.engine.connect() as conn:
        store.resolve(conn, resource, must_exist=True)
    me = caller(request, access)
    decision = may_revoke(me.assignments, me.subject, resource, at=_now())
    if not decision.allowed:
        raise _refuse(decision, resource)


def governs(request: Request, access: Access, database: str, table: str) -> tuple[SubjectAssignments, bool]:
    """The caller and whether it may manage the table's policies (``ALTER`` on it, or ``GRANT``)."""
    me = caller(request, access)
    resource = Resource.table(database, table)
    now = _now()
    allowed = (
        decide(me.assignments, me.subject, resource, Permission.ALTER, at=now).allowed
        or decide(me.assignments, me.subject, resource, Permission.GRANT, at=now).allowed
    )
    return me, allowed


def require_governs(request: Request, access: Access, database: str, table: str) -> None:
    """403 unless the caller may manage the table's policies (:func:`governs`)."""
    _, allowed = governs(request, access, database, table)
    if not allowed:
        identifier = table_identifier(database, table)
        raise ForbiddenError(
            f"principal {access.principal!r} has no ALTER or GRANT on {identifier}",
            resource_type="TABLE",
            resource_name=identifier,
        )


def listed_policy_principals(
    request: Request, access: Access, database: str, table: str, *, principal: str | None = None
) -> list[str] | None:
    """Whose policies on the table the caller may list: None (everyone's) with ``ALTER`` or ``GRANT`` on
    it, else its own names (403 when it asks for another ``principal``'s)."""
    me, allowed = governs(request, access, database, table)
    if allowed:
        return None
    names = sorted(me.subject.names)
    if principal is not None and principal not in names:
        identifier = table_identifier(database, table)
        raise ForbiddenError(
            f"principal {access.principal!r} has no ALTER or GRANT on {identifier}: it may list only its "
            "own policies",
            resource_type="TABLE",
            resource_name=identifier,
        )
    return names


def checked_new_policy(
    request: Request,
    access: Access,
    database: str,
    table: str,
    *,
    principal: str,
    policy_type: str,
    column: str | None,
    rule: str,
) -> tuple[TableRow, str]:
    """The table's row and the canonical JSON of the new policy, checked as the create route checks it:
    404 no such table, 403 unless :func:`governs`, then ``checked_policy`` (400 an invalid rule, 404 its
    column, 409 ``query-auth.enabled`` off or a policy of that identity)."""
    identifier = table_identifier(database, table)
    row, schema, _ = served_of(request).catalog.table_metadata(identifier)
    require_governs(request, access, database, table)
    canonical = checked_policy(
        schema,
        identifier,
        policies_of(request).of_table(row.table_id),
        principal=principal,
        policy_type=policy_type,
        column=column,
        rule=rule,
    )
    return row, canonical


# ---- permissions ---------------------------------------------------------------------------------------


@router.get(
    paths.PERMISSIONS,
    response_model=management.ListPermissionsResponse,
    response_model_exclude_none=True,
    tags=TAGS,
    operation_id="listPermissions",
)
def list_permissions(
    request: Request,
    access: Annotated[Access, AUTHENTICATED],
    resource_type: Annotated[str, Query(alias=paths.PERMISSION_RESOURCE_TYPE)],
    database: Annotated[str | None, Query(alias=paths.PERMISSION_DATABASE)] = None,
    table: Annotated[str | None, Query(alias=paths.PERMISSION_TABLE)] = None,
    function: Annotated[str | None, Query(alias=paths.PERMISSION_FUNCTION)] = None,
    view: Annotated[str | None, Query(alias=paths.PERMISSION_VIEW)] = None,
    principal: Annotated[str | None, Query(alias=paths.PERMISSION_PRINCIPAL)] = None,
    access_name: Annotated[str | None, Query(alias=paths.PERMISSION_ACCESS)] = None,
    max_results: MaxResults = None,
    page_token: PageToken = None,
) -> management.ListPermissionsResponse:
    """The direct assignments on exactly the resource the query names (a ``_ALL`` scope is listed as
    itself), in a stable order, one page (``maxResults`` 1..1000; ``nextPageToken`` when there are more).
    A caller without ``GRANT`` reaching the resource sees only its own names' assignments. 404 when the
    database, table, view or function does not exist."""
    resource = management.resource_of(
        management.PermissionResourceBody(
            type=resource_type, database=database, table=table, function=function, view=view
        )
    )
    wanted = None if access_name is None else parse_access(access_name, resource.type)
    store = assignments_of(request)
    names = listed_principals(request, access, resource, principal=principal)
    page, token = store.list_page(
        resource,
        principal=principal,
        principals=names,
        access=wanted,
        page_token=page_token,
        max_results=max_results,
    )
    return management.ListPermissionsResponse(
        permissions=[management.assignment_body(s.assignment) for s in page], next_page_token=token
    )


@router.post(
    paths.GRANT_PERMISSION, tags=TAGS, responses={**NO_BODY, **CONFLICT}, operation_id="grantPermission"
)
def grant_permission(
    request: Request, access: Annotated[Access, AUTHENTICATED], body: management.GrantPermissionRequest
) -> None:
    """Create the assignment, or replace the one of the same resource, access and principal (its columns
    and expiry). Needs ``GRANT`` reaching the resource and holding what is given. 404 when the resource,
    the principal or a named column does not exist; 409 for a column grant on a table without
    ``query-auth.enabled=true``."""
    assignment = management.assignment_of(body)
    check_grant(request, access, assignment)
    store = assignments_of(request)
    store.grant(assignment, granted_by=access.principal, reason=f"{request.method} {request.url.path}")


@router.post(paths.REVOKE_PERMISSION, tags=TAGS, responses=NO_BODY, operation_id="revokePermission")
def revoke_permission(
    request: Request, access: Annotated[Access, AUTHENTICATED], body: management.RevokePermissionRequest
) -> None:
    """Make the assignment absent (200 whether or not it existed). Needs ``GRANT`` reaching the resource;
    404 only for a missing resource or principal."""
    resource, access_name, principal = management.revoked_identity(body)
    check_revoke(request, access, resource)
    store = assignments_of(request)
    store.revoke(
        resource,
        Permission(access_name),
        principal,
        revoked_by=access.principal,
        reason=f"{request.method} {request.url.path}",
    )


# ---- data policies -------------------------------------------------------------------------------------


def _policy_body(p: StoredPolicy, database: str, table: str) -> management.DataPolicyBody:
    resource = management.TablePolicyResource(database=database, table=table)
    if p.policy_type == ROW_FILTER:
        return management.DataPolicyBody(
            resource=resource, principal=p.principal, row_filter=management.RowFilterBody(predicate=p.body)
        )
    return management.DataPolicyBody(
        resource=resource,
        principal=p.principal,
        column_mask=management.ColumnMaskBody(on_column=p.on_column or "", transform=p.body),
    )


@router.get(
    paths.TABLE_POLICIES,
    response_model=management.ListPoliciesResponse,
    response_model_exclude_none=True,
    tags=TAGS,
    operation_id="listTablePolicies",
)
def list_table_policies(
    request: Request,
    database: str,
    table: str,
    access: Annotated[Access, AUTHENTICATED],
    policy_type: Annotated[str | None, Query(alias=paths.POLICY_TYPE)] = None,
    principal: Annotated[str | None, Query(alias=paths.POLICY_PRINCIPAL)] = None,
    column: Annotated[str | None, Query(alias=paths.POLICY_COLUMN)] = None,
    max_results: MaxResults = None,
    page_token: PageToken = None,
) -> management.ListPoliciesResponse:
    """The table's policies (``type``, ``principal``, ``column`` filter them), one page. A caller without
    ``ALTER`` or ``GRANT`` on the table sees only the policies of its own names. 404 no such table."""
    identifier = table_identifier(database, table)
    row = served_of(request).catalog.table_row(identifier)
    names = listed_policy_principals(request, access, database, table, principal=principal)
    page, token = policies_of(request).list_page(
        row.table_id,
        policy_type=policy_type,
        principal=principal,
        principals=names,
        column=column,
        page_token=page_token,
        max_results=max_results,
    )
    return management.ListPoliciesResponse(
        policies=[_policy_body(p, database, table) for p in page], next_page_token=token
    )


@router.post(
    paths.TABLE_POLICIES, tags=TAGS, responses={**NO_BODY, **CONFLICT}, operation_id="createTablePolicy"
)
def create_table_policy(
    request: Request,
    database: str,
    table: str,
    access: Annotated[Access, AUTHENTICATED],
    body: management.PolicyRequest,
) -> None:
    """A row filter (Paimon's predicate JSON) or a column mask (transform JSON) for one principal. 400 an
    invalid rule or column (checked against the latest schema, together with the principal's other
    policies on the table); 404 table or principal missing; 409 the principal already has a row filter
    on the table (or a mask on that column), or the table has no ``query-auth.enabled=true``."""
    if body.row_filter is not None:
        policy_type, column, rule = ROW_FILTER, None, body.row_filter.predicate
    else:
        assert body.column_mask is not None
        policy_type, column, rule = COLUMN_MASKING, body.column_mask.on_column, body.column_mask.transform
    principal = body.principal
    row, canonical = checked_new_policy(
        request,
        access,
        database,
        table,
        principal=principal,
        policy_type=policy_type,
        column=column,
        rule=rule,
    )
    identifier = table_identifier(database, table)
    store = policies_of(request)
    store.create(
        row.table_id,
        identifier,
        principal,
        policy_type=policy_type,
        on_column=column,
        body=canonical,
        created_by=access.principal,
        reason=f"{request.method} {request.url.path}",
    )


@router.post(paths.DROP_TABLE_POLICY, tags=TAGS, responses=NO_BODY, operation_id="dropTablePolicy")
def drop_table_policy(
    request: Request,
    database: str,
    table: str,
    access: Annotated[Access, AUTHENTICATED],
    body: management.DropPolicyRequest,
) -> None:
    """Drop the policy of that identity; 404 when it is absent (or the table or principal is)."""
    identifier = table_identifier(database, table)
    row = served_of(request).catalog.table_row(identifier)
    require_governs(request, access, database, table)
    policies_of(request).drop(
        row.table_id,
        identifier,
        body.type,
        body.principal,
        body.column,
        dropped_by=access.principal,
        reason=f"{request.method} {request.url.path}",
    )
