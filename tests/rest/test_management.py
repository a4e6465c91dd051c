"""The management API's bodies (paimon_meta.rest.management) read what pypaimon 2.1.0 and paimon-rust
0.4.0 send and write what they read. The request bodies below are what paimon-rust 0.4.0's procedures
sent to a recording server (docs/GOVERNANCE.md, "Who calls what"); pypaimon's are produced by pypaimon
itself in its venv."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import Access, Assignment, ColumnRange, Resource
from paimon_meta.rest.management import (
    DropPolicyRequest,
    GrantPermissionRequest,
    ListPermissionsResponse,
    PolicyRequest,
    RevokePermissionRequest,
    assignment_body,
    assignment_of,
    revoked_identity,
)
from tests.fixtures.interop import run_pypaimon

EXPIRY = datetime(2027, 1, 1, tzinfo=UTC)
#: paimon-rust 0.4.0, recorded: CALL sys.grant_permission(...) -> POST /v1/{prefix}/permissions/grant.
RUST_GRANTS: list[tuple[str, Assignment]] = [
    (
        '{"resource":{"type":"TABLE","database":"db","table":"t"},"access":"SELECT","principal":"role:a",'
        '"expireTime":"2027-01-01T00:00:00Z"}',
        Assignment("role:a", Resource.table("db", "t"), Access.SELECT, expire_time=EXPIRY),
    ),
    (
        '{"resource":{"type":"COLUMN","database":"db","table":"t"},"access":"SELECT","principal":"role:a",'
        '"columns":{"columnNames":["a","email"]}}',
        Assignment(
            "role:a", Resource.column("db", "t"), Access.SELECT, ColumnRange.allowlist(["a", "email"])
        ),
    ),
    (
        '{"resource":{"type":"COLUMN","database":"db","table":"t"},"access":"SELECT","principal":"role:a",'
        '"columns":{"excludedColumnNames":["email"]}}',
        Assignment("role:a", Resource.column("db", "t"), Access.SELECT, ColumnRange.denylist(["email"])),
    ),
    (
        '{"resource":{"type":"CATALOG_ALL"},"access":"SELECT","principal":"group:g"}',
        Assignment("group:g", Resource.catalog_all(), Access.SELECT),
    ),
    (
        '{"resource":{"type":"DATABASE_ALL","database":"db"},"access":"UPDATE","principal":"user:x"}',
        Assignment("user:x", Resource.database_all("db"), Access.UPDATE),
    ),
    (
        '{"resource":{"type":"FUNCTION","database":"db","function":"f"},"access":"SELECT","principal":"user:x"}',
        Assignment("user:x", Resource.function("db", "f"), Access.SELECT),
    ),
    (
        '{"resource":{"type":"VIEW","database":"db","view":"v"},"access":"SELECT","principal":"user:x"}',
        Assignment("user:x", Resource.view("db", "v"), Access.SELECT),
    ),
]


@pytest.mark.parametrize(("raw", "expected"), RUST_GRANTS)
def test_grants_as_paimon_rust_sends_them(raw: str, expected: Assignment) -> None:
    body = GrantPermissionRequest.model_validate_json(raw)
    assert assignment_of(body) == expected
    # and back: what a listing answers for it is the same JSON
    assert assignment_body(expected).model_dump(mode="json", by_alias=True, exclude_none=True) == json.loads(
        raw
    )


def test_revokes_and_policies_as_paimon_rust_sends_them() -> None:
    revoke = RevokePermissionRequest.model_validate_json(
        '{"resource":{"type":"TABLE","database":"db","table":"t"},"access":"SELECT","principal":"role:a"}'
    )
    assert revoked_identity(revoke) == (Resource.table("db", "t"), "SELECT", "role:a")
    row = PolicyRequest.model_validate_json(
        '{"rowFilter":{"predicate":"{\\"kind\\":\\"LEAF\\"}"},"principal":"role:a"}'
    )
    assert (
        row.row_filter is not None
        and row.row_filter.predicate == '{"kind":"LEAF"}'
        and row.column_mask is None
    )
    mask = PolicyRequest.model_validate_json(
        '{"columnMask":{"onColumn":"email","transform":"{\\"name\\":\\"NULL\\"}"},"principal":"role:a"}'
    )
    assert mask.column_mask is not None and mask.column_mask.on_column == "email"
    drop = DropPolicyRequest.model_validate_json(
        '{"type":"COLUMN_MASKING","principal":"role:a","column":"email"}'
    )
    assert (drop.type, drop.column) == ("COLUMN_MASKING", "email")
    assert DropPolicyRequest.model_validate_json('{"type":"ROW_FILTER","principal":"role:a"}').column is None


@pytest.mark.parametrize(
    ("model", "raw", "error"),
    [
        (
            GrantPermissionRequest,
            '{"resource":{"type":"TABLE","database":"d","table":"t"},"access":"SELECT"}',
            "principal",
        ),
        (
            GrantPermissionRequest,
            '{"resource":{"type":"CATALOG"},"access":"ALTER","principal":"p","extra":1}',
            "extra",
        ),
        (PolicyRequest, '{"principal":"p"}', "exactly one of rowFilter and columnMask"),
        (
            PolicyRequest,
            '{"principal":"p","rowFilter":{"predicate":"x"},"columnMask":{"onColumn":"c","transform":"y"}}',
            "exactly one",
        ),
        (DropPolicyRequest, '{"type":"ROW_FILTER","principal":"p","column":"c"}', "cannot contain a column"),
        (DropPolicyRequest, '{"type":"COLUMN_MASKING","principal":"p"}', "column is required"),
        (DropPolicyRequest, '{"type":"LABEL","principal":"p"}', "type"),
    ],
)
def test_bodies_the_spec_does_not_allow_are_refused(model: Any, raw: str, error: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=error):
        model.model_validate_json(raw)


def grant(resource: dict[str, str], access: str = "SELECT", **extra: Any) -> str:
    return json.dumps({"resource": resource, "access": access, "principal": "p", **extra})


TABLE_T = {"type": "TABLE", "database": "d", "table": "t"}
COLUMN_T = {"type": "COLUMN", "database": "d", "table": "t"}


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (grant(COLUMN_T), "columns is required"),
        (grant(TABLE_T, columns={"columnNames": ["a"]}), "only valid"),
        (grant({**TABLE_T, "view": "v"}), "cannot contain view"),
        (grant({"type": "SCHEMA", "database": "d"}), "unknown resource type"),
        (grant({"type": "CATALOG"}), "not valid for CATALOG"),
        (grant(COLUMN_T, columns={}), "exactly one"),
        (grant({"type": "CATALOG"}, "ALTER", expireTime="2027-01-01"), "expireTime"),
    ],
)
def test_assignments_the_model_does_not_allow_are_refused(raw: str, error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        assignment_of(GrantPermissionRequest.model_validate_json(raw))


def test_types_and_accesses_are_read_case_insensitively_and_blank_locators_as_absent() -> None:
    body = GrantPermissionRequest.model_validate_json(
        '{"resource":{"type":"database_all","database":"db","table":" "},"access":"update","principal":"p"}'
    )
    assert assignment_of(body) == Assignment("p", Resource.database_all("db"), Access.UPDATE)


PYPAIMON_SCRIPT = """
import json, sys
from pypaimon.api.api_request import GrantPermissionRequest, RevokePermissionRequest
from pypaimon.api.api_response import ListPermissionsResponse
from pypaimon.management.permission_assignment import PermissionAssignment
from pypaimon.management.permission_columns import PermissionColumns
from pypaimon.management.permission_resource import PermissionResource
from pypaimon.management.resource_type import ResourceType

listing = ListPermissionsResponse.from_dict(json.loads(sys.argv[1]))
read = [
    {"resource": a.get_resource().to_dict(), "access": a.get_access(), "principal": a.get_principal(),
     "columns": None if a.get_columns() is None else a.get_columns().to_dict(),
     "expireTime": a.get_expire_time()}
    for a in listing.get_permissions()
]
sent = [
    GrantPermissionRequest(PermissionAssignment(
        PermissionResource(ResourceType.COLUMN, "db", "t"), "select", "user:alice",
        PermissionColumns(column_names=["a", "b"]), "2027-01-01T00:00:00.120Z")).to_dict(),
    GrantPermissionRequest(PermissionAssignment(
        PermissionResource(ResourceType.DATABASE_ALL, "db"), "update", "group:eng")).to_dict(),
    RevokePermissionRequest(PermissionResource(ResourceType.CATALOG), "createdatabase", "role:ops").to_dict(),
]
print(json.dumps({"read": read, "sent": sent}))
"""


@pytest.mark.interop
def test_pypaimon_reads_our_listing_and_we_read_its_requests(pypaimon_python: Path) -> None:
    ours = [a for _raw, a in RUST_GRANTS]
    listing = ListPermissionsResponse(permissions=[assignment_body(a) for a in ours], next_page_token="n1")
    wire = json.dumps(listing.model_dump(mode="json", by_alias=True, exclude_none=True))
    out = run_pypaimon(PYPAIMON_SCRIPT, wire, python=pypaimon_python)
    for read, expected in zip(out["read"], ours, strict=True):
        assert (
            assignment_of(GrantPermissionRequest.model_validate({k: v for k, v in read.items() if v}))
            == expected
        )
    grant_columns, grant_scope, revoke = out["sent"]
    assert assignment_of(GrantPermissionRequest.model_validate(grant_columns)) == Assignment(
        "user:alice",
        Resource.column("db", "t"),
        Access.SELECT,
        ColumnRange.allowlist(["a", "b"]),
        datetime(2027, 1, 1, 0, 0, 0, 120000, tzinfo=UTC),
    )
    assert assignment_of(GrantPermissionRequest.model_validate(grant_scope)) == Assignment(
        "group:eng", Resource.database_all("db"), Access.UPDATE
    )
    assert revoked_identity(RevokePermissionRequest.model_validate(revoke)) == (
        Resource.catalog(),
        "CREATEDATABASE",
        "role:ops",
    )
