"""Bodies of Paimon's REST management API (apache/paimon ``rest-management-open-api.yaml``, as pypaimon
2.1.0's ``permission_management()`` and paimon-rust 0.4.0's procedures send them; docs/GOVERNANCE.md
lists who sends what): permission assignments and table data policies (row filters, column masks).

Pydantic lives here, as in :mod:`paimon_meta.rest.models`; both ends convert to
:mod:`paimon_meta.governance` objects with the converters at the end (which validate as Java's
constructors do: ``ValidationError`` naming the member). Request bodies refuse members the spec does not
name (``additionalProperties: false``): a member dropped here could have narrowed what was asked.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, model_validator

from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import (
    OBJECT_FIELD,
    Assignment,
    ColumnRange,
    Resource,
    format_instant,
    parse_access,
    parse_instant,
    parse_resource_type,
)
from paimon_meta.rest.models import _Model, _Request

ResourceTypeName = Literal[
    "CATALOG", "CATALOG_ALL", "DATABASE", "DATABASE_ALL", "TABLE", "COLUMN", "VIEW", "FUNCTION"
]
AccessName = Literal[
    "ALL", "CREATEDATABASE", "DESCRIBE", "ALTER", "DROP", "CREATETABLE", "CREATEFUNCTION", "CREATEVIEW",
    "LIST", "SELECT", "UPDATE", "GRANT",
]  # fmt: skip
PolicyTypeName = Literal["ROW_FILTER", "COLUMN_MASKING"]


class _Strict(_Request):
    model_config = ConfigDict(extra="forbid")


# ---- permissions ---------------------------------------------------------------------------------------


class PermissionResourceBody(_Strict):
    """``{"type": "TABLE", "database": "sales", "table": "orders"}``: the locators the type takes.
    ``type`` is read case-insensitively, as Java's ``ResourceType.fromString``."""

    type: str
    database: str | None = None
    table: str | None = None
    function: str | None = None
    view: str | None = None


class PermissionColumnsBody(_Strict):
    """Exactly one of an allowlist (``columnNames``) and a denylist (``excludedColumnNames``)."""

    column_names: list[str] | None = None
    excluded_column_names: list[str] | None = None


class PermissionAssignmentBody(_Model):
    """One assignment as listings answer it (``expireTime``: ISO-8601 UTC, e.g. ``2027-01-01T00:00:00Z``)."""

    resource: PermissionResourceBody
    access: str
    principal: str
    columns: PermissionColumnsBody | None = None
    expire_time: str | None = None


class GrantPermissionRequest(_Strict):
    """``POST /v1/{prefix}/permissions/grant``: create, or replace the one of the same resource, access
    and principal (its columns and expiry)."""

    resource: PermissionResourceBody
    access: str
    principal: str
    columns: PermissionColumnsBody | None = None
    expire_time: str | None = None


class RevokePermissionRequest(_Strict):
    """``POST /v1/{prefix}/permissions/revoke``: make the assignment absent (idempotent)."""

    resource: PermissionResourceBody
    access: str
    principal: str


class ListPermissionsResponse(_Model):
    permissions: list[PermissionAssignmentBody]
    next_page_token: str | None = None


# ---- data policies -------------------------------------------------------------------------------------


class RowFilterBody(_Strict):
    """One Paimon predicate as JSON text (at most 60 KiB), as one entry of ``/auth``'s ``filter``."""

    predicate: str


class ColumnMaskBody(_Strict):
    """One Paimon transform as JSON text replacing ``onColumn``, as ``/auth``'s ``columnMasking``."""

    on_column: str
    transform: str


class PolicyRequest(_Strict):
    """``POST .../tables/{table}/policies``: exactly one of ``rowFilter`` and ``columnMask``, for one
    principal."""

    principal: str
    row_filter: RowFilterBody | None = None
    column_mask: ColumnMaskBody | None = None

    @model_validator(mode="after")
    def _one_definition(self) -> PolicyRequest:
        if (self.row_filter is None) == (self.column_mask is None):
            raise ValueError("a policy must contain exactly one of rowFilter and columnMask")
        return self


class DropPolicyRequest(_Strict):
    """``POST .../tables/{table}/policies/drop``: the policy's identity: ``ROW_FILTER`` and the
    principal, or ``COLUMN_MASKING``, the principal and the ``column``."""

    type: PolicyTypeName
    principal: str
    column: str | None = None

    @model_validator(mode="after")
    def _column_only_for_masks(self) -> DropPolicyRequest:
        if (self.type == "COLUMN_MASKING") != (self.column is not None):
            raise ValueError(
                "column is required for a COLUMN_MASKING identity"
                if self.column is None
                else "a ROW_FILTER identity cannot contain a column"
            )
        return self


class TablePolicyResource(_Model):
    type: Literal["TABLE"] = "TABLE"
    database: str
    table: str


class DataPolicyBody(_Model):
    """A policy as listings answer it: the table, the principal and its one definition."""

    resource: TablePolicyResource
    principal: str
    row_filter: RowFilterBody | None = None
    column_mask: ColumnMaskBody | None = None


class ListPoliciesResponse(_Model):
    policies: list[DataPolicyBody]
    next_page_token: str | None = None


# ---- converters to and from the governance model -----------------------------------------------------


def resource_of(body: PermissionResourceBody) -> Resource:
    """The resource a body names (``ValidationError`` for an unknown type or a locator the type does not
    take; blank locators count as absent, as Java's constructor reads them)."""
    resource_type = parse_resource_type(body.type)
    names = {"table": body.table, "function": body.function, "view": body.view}
    wanted = OBJECT_FIELD.get(resource_type)
    for field, value in names.items():
        if field != wanted and value is not None and value.strip():
            raise ValidationError(
                f"a {resource_type.value} resource cannot contain {field}", field=f"resource.{field}"
            )
    database = body.database if body.database is not None and body.database.strip() else None
    name = names[wanted] if wanted is not None else None
    return Resource(resource_type, database, name if name is not None and name.strip() else None)


def resource_body(resource: Resource) -> PermissionResourceBody:
    """The wire form of ``resource``: only the locators its type takes are set (dump it with
    ``exclude_none``: the spec's resource objects carry no other member)."""
    locators: dict[str, str] = {}
    if resource.database is not None:
        locators["database"] = resource.database
    field = OBJECT_FIELD.get(resource.type)
    if field is not None and resource.object is not None:
        locators[field] = resource.object
    return PermissionResourceBody(type=resource.type.value, **locators)


def columns_of(body: PermissionColumnsBody | None) -> ColumnRange | None:
    if body is None:
        return None
    if (body.column_names is None) == (body.excluded_column_names is None):
        raise ValidationError(
            "columns must contain exactly one of columnNames or excludedColumnNames", field="columns"
        )
    if body.column_names is not None:
        return ColumnRange.allowlist(body.column_names)
    assert body.excluded_column_names is not None
    return ColumnRange.denylist(body.excluded_column_names)


def columns_body(columns: ColumnRange | None) -> PermissionColumnsBody | None:
    if columns is None:
        return None
    if columns.allowed is not None:
        return PermissionColumnsBody(column_names=sorted(columns.allowed))
    return PermissionColumnsBody(excluded_column_names=sorted(columns.denied))


def assignment_of(body: GrantPermissionRequest | PermissionAssignmentBody) -> Assignment:
    """The assignment a grant asks for (access canonicalized for its resource type)."""
    resource = resource_of(body.resource)
    return Assignment(
        body.principal,
        resource,
        parse_access(body.access, resource.type),
        columns_of(body.columns),
        None if body.expire_time is None else parse_instant(body.expire_time),
    )


def assignment_body(assignment: Assignment) -> PermissionAssignmentBody:
    expire = assignment.expire_time
    return PermissionAssignmentBody(
        resource=resource_body(assignment.resource),
        access=assignment.access.value,
        principal=assignment.principal,
        columns=columns_body(assignment.columns),
        expire_time=None if expire is None else format_instant(expire),
    )


def revoked_identity(body: RevokePermissionRequest) -> tuple[Resource, str, str]:
    """(resource, canonical access, principal) of a revoke."""
    resource = resource_of(body.resource)
    return resource, parse_access(body.access, resource.type).value, body.principal
