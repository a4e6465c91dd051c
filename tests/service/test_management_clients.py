"""Paimon's management API against a real ``paimon-meta serve``, driven by the unmodified clients that call
it (issue 36): pypaimon 2.1.0's ``RESTCatalog.permission_management()`` grants, lists (paged) and revokes;
pypaimon-rust 0.4.0's SQL procedures (``sys.grant_permission``, ``sys.list_permissions``,
``sys.revoke_permission``, ``sys.create_policy``, ``sys.list_policies``, ``sys.drop_policy``) grant, list and
revoke permissions and create, list and drop policies. Every change is in the governance event log with
the caller as who; a ``DATABASE_ALL`` grant reaches a table created after it; ``/auth`` answers the
caller's filters and masks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import paimon_meta
from paimon_meta.db.engine import make_engine
from paimon_meta.governance.evaluate import decide
from paimon_meta.governance.permissions import Access, Assignment, ColumnRange, Resource
from paimon_meta.metastore.assignments import Assignments, governance_events
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service

pytestmark = [pytest.mark.postgres, pytest.mark.interop]


@dataclass
class Rig:
    db: str
    base: str
    boss: str  # admin of the catalog, with GRANT (ALL) on the catalog and everything in it
    alice: str  # read on db.t only


@pytest.fixture
def rig(service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path) -> Iterator[Rig]:
    warehouse = tmp_path / "wh"
    catalog = paimon_meta.connect(clean_db, str(warehouse), **FAST_LOCK)
    try:
        boss = make_principal(catalog, "boss", [("admin", None, None)])
        alice = make_principal(catalog, "alice", [("read", "db", "t")])
        store = Assignments(catalog.engine, catalog_key=None)  # as the CLI, without --catalog
        for resource in (Resource.catalog(), Resource.catalog_all()):
            store.grant(Assignment("boss", resource, Access.ALL), granted_by="ops", reason="catalog owner")
        role = store.create_role("analyst", created_by="ops")
        store.add_member(role, "alice", added_by="ops", reason="team")
    finally:
        catalog.close()
    server = spawn_service(service_processes, clean_db, str(warehouse), tmp_path)
    yield Rig(clean_db, f"http://127.0.0.1:{server.port}", boss, alice)


#: argv: uri boss-token alice-token. Creates db and db.t (query-auth.enabled), then, as boss: grants,
#: lists page by page, replaces (same identity), revokes twice; as alice: a grant is refused.
PYPAIMON_PERMISSIONS = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.management.list_permissions_request import ListPermissionsRequest
from pypaimon.management.permission_assignment import PermissionAssignment
from pypaimon.management.permission_columns import PermissionColumns
from pypaimon.management.permission_resource import PermissionResource
from pypaimon.management.resource_type import ResourceType

uri, boss_token, alice_token = sys.argv[1:4]
def catalog(token):
    return CatalogFactory.create({"metastore": "rest", "uri": uri, "warehouse": "paimon",
                                  "token.provider": "bear", "token": token})
boss = catalog(boss_token)
boss.create_database("db", True)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("email", pa.string()),
                    ("region", pa.string())])
boss.create_table("db.t", Schema.from_pyarrow_schema(
    schema, options={"bucket": "1", "query-auth.enabled": "true"}),
                  True)
pm = boss.permission_management()
table = PermissionResource(ResourceType.TABLE, database="db", table="t")
pm.grant_permission(PermissionAssignment(table, "select", "alice", expire_time="2030-01-01T00:00:00Z"))
pm.grant_permission(PermissionAssignment(table, "UPDATE", "alice"))
pm.grant_permission(PermissionAssignment(table, "SELECT", "role:analyst"))
pm.grant_permission(PermissionAssignment(PermissionResource(ResourceType.COLUMN, database="db", table="t"),
                                         "SELECT", "alice",
                                         columns=PermissionColumns(excluded_column_names=["email"])))
pm.grant_permission(PermissionAssignment(PermissionResource(ResourceType.DATABASE_ALL, database="db"),
                                         "SELECT", "role:analyst"))
# the same identity again: replaced (no expiry now)
pm.grant_permission(PermissionAssignment(table, "SELECT", "alice"))

def listing(rt, **kw):
    pages, token, out = 0, None, []
    while True:
        page = pm.list_permissions(ListPermissionsRequest(rt, page_token=token, max_results=1, **kw))
        pages += 1
        out += [p.to_dict() for p in page.elements]
        token = page.next_page_token
        if not token:
            return pages, out

pages, listed = listing(ResourceType.TABLE, database="db", table="t")
columns = listing(ResourceType.COLUMN, database="db", table="t")[1]
only_updates = pm.list_permissions(ListPermissionsRequest(ResourceType.TABLE, database="db", table="t",
                                                          access="update")).elements
pm.revoke_permission(table, "UPDATE", "alice")
pm.revoke_permission(table, "UPDATE", "alice")  # idempotent
after = listing(ResourceType.TABLE, database="db", table="t")[1]
errors = {}
for name, call in (
    ("unknown principal", lambda: pm.grant_permission(PermissionAssignment(table, "SELECT", "nobody"))),
    ("unknown table", lambda: pm.grant_permission(
        PermissionAssignment(PermissionResource(ResourceType.TABLE, database="db", table="nope"), "SELECT",
                             "alice"))),
    ("alice grants", lambda: catalog(alice_token).permission_management().grant_permission(
        PermissionAssignment(table, "SELECT", "role:analyst"))),
    ("unknown column", lambda: pm.grant_permission(PermissionAssignment(
        PermissionResource(ResourceType.COLUMN, database="db", table="t"), "SELECT", "alice",
        columns=PermissionColumns(column_names=["zzz"])))),
):
    try:
        call()
        errors[name] = None
    except Exception as e:
        errors[name] = type(e).__name__ + ": " + str(e)
print(json.dumps({"pages": pages, "listed": listed, "columns": columns,
                  "updates": [p.to_dict() for p in only_updates],
                  "after": after, "errors": errors}))
"""


def test_pypaimon_grants_lists_and_revokes(rig: Rig, pypaimon_python: Path) -> None:
    out: dict[str, Any] = run_pypaimon(
        PYPAIMON_PERMISSIONS, rig.base, rig.boss, rig.alice, python=pypaimon_python
    )
    table = {"type": "TABLE", "database": "db", "table": "t"}
    assert out["pages"] == 3  # one assignment per page, stable order, no token after the last
    assert out["listed"] == [
        {"resource": table, "access": "SELECT", "principal": "alice"},
        {"resource": table, "access": "UPDATE", "principal": "alice"},
        {"resource": table, "access": "SELECT", "principal": "role:analyst"},
    ]
    assert out["columns"] == [
        {
            "resource": {"type": "COLUMN", "database": "db", "table": "t"},
            "access": "SELECT",
            "principal": "alice",
            "columns": {"excludedColumnNames": ["email"]},
        }
    ]
    assert [p["access"] for p in out["updates"]] == ["UPDATE"]
    assert [(p["access"], p["principal"]) for p in out["after"]] == [
        ("SELECT", "alice"),
        ("SELECT", "role:analyst"),
    ]
    errors = out["errors"]
    assert errors["unknown principal"] is not None and "nobody" in errors["unknown principal"], errors
    assert errors["unknown table"] is not None and "nope" in errors["unknown table"], errors
    assert errors["alice grants"] is not None and "GRANT" in errors["alice grants"], errors
    assert errors["unknown column"] is not None and "zzz" in errors["unknown column"], errors

    engine = make_engine(rig.db)
    try:
        events = governance_events(engine, subject="TABLE db.t")
        granted = [(e.event_type, e.principal, e.target, e.payload["access"]) for e in events]
        assert ("permission_granted", "boss", "alice", "UPDATE") in granted
        assert ("permission_revoked", "boss", "alice", "UPDATE") in granted
        assert sum(1 for g in granted if g[0] == "permission_revoked") == 1  # the repeat changed nothing
        # DATABASE_ALL (to alice's role) reaches a table created after the grant
        loaded = Assignments(engine, catalog_key="jdbc", default=True).of_subject("alice")
        assert "role:analyst" in loaded.subject.memberships
        now = datetime.now(UTC)
        later = Resource.table("db", "created_later")
        assert decide(loaded.assignments, loaded.subject, later, Access.SELECT, at=now).allowed
        assert not decide(
            loaded.assignments, loaded.subject, Resource.table("other", "x"), Access.SELECT, at=now
        ).allowed
    finally:
        engine.dispose()


#: argv: uri boss-token. As boss, through paimon-rust's SQL procedures: grants, lists, revokes
#: permissions; creates, lists and drops policies on db.t (created by pypaimon beforehand).
RUST_PROCEDURES = r"""
import json, sys
import pyarrow as pa
from pypaimon_rust.datafusion import SQLContext

uri, token = sys.argv[1:3]
ctx = SQLContext()
ctx.register_catalog("pm", {"metastore": "rest", "uri": uri, "warehouse": "paimon", "token.provider": "bear",
                            "token": token}, default_database="db")

def sql(query):
    try:
        batches = ctx.sql(query)
        return pa.Table.from_batches(batches).to_pylist() if batches else []
    except Exception as e:
        return {"error": type(e).__name__ + ": " + str(e)}

def call(procedure, **args):
    named = ", ".join(f"{k} => {v}" if isinstance(v, bool) else f"{k} => '{v}'" for k, v in args.items())
    return sql(f"CALL pm.sys.{procedure}({named})".replace("=> True", "=> true"))

T = {"database": "db", "table": "t"}
R = {"resource_type": "TABLE", **T}
out = {}
out["grant"] = call("grant_permission", **R, access="select", principal="role:analyst",
                    expire_time="2030-01-01T00:00:00Z")
out["grant_columns"] = call("grant_permission", resource_type="COLUMN", **T, access="SELECT",
                            principal="alice", column_names="id,region")
out["list"] = call("list_permissions", **R)
out["revoke"] = call("revoke_permission", **R, access="SELECT", principal="role:analyst")
out["list_after"] = call("list_permissions", **R)
ref = {"name": "FIELD_REF", "fieldRef": {"index": 2, "name": "region", "type": "STRING"}}
flt = json.dumps({"kind": "LEAF", "transform": ref, "function": "EQUAL", "literals": ["eu"]})
mask = json.dumps({"name": "NULL"})
ROW, MASK = {"policy_type": "ROW_FILTER"}, {"policy_type": "COLUMN_MASKING"}
out["create_filter"] = call("create_policy", **T, **ROW, principal="role:analyst", predicate_json=flt)
out["create_mask"] = call("create_policy", **T, **MASK, principal="role:analyst", on_column="email",
                          transform_json=mask)
out["create_again"] = call("create_policy", **T, **ROW, principal="role:analyst", predicate_json=flt)
out["policies"] = call("list_policies", **T)
out["masks"] = call("list_policies", **T, **MASK, principal="role:analyst", column="email")
out["drop_mask"] = call("drop_policy", **T, **MASK, principal="role:analyst", column="email")
out["drop_again"] = call("drop_policy", **T, **MASK, principal="role:analyst", column="email")
out["drop_if_exists"] = call("drop_policy", **T, **MASK, principal="role:analyst", column="email",
                             if_exists=True)
out["policies_after"] = call("list_policies", **T)
print(json.dumps(out, default=str))
"""

CREATE_TABLE = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

uri, token = sys.argv[1:3]
cat = CatalogFactory.create({"metastore": "rest", "uri": uri, "warehouse": "paimon", "token.provider": "bear",
                             "token": token})
cat.create_database("db", True)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("email", pa.string()),
                    ("region", pa.string())])
cat.create_table("db.t", Schema.from_pyarrow_schema(
    schema, options={"bucket": "1", "query-auth.enabled": "true"}),
                 True)
print(json.dumps({"ok": True}))
"""


FILTER = (
    '{"kind":"LEAF","transform":{"name":"FIELD_REF","fieldRef":{"index":2,"name":"region","type":"STRING"}},'
    '"function":"EQUAL","literals":["eu"]}'
)


def test_paimon_rust_procedures(rig: Rig, pypaimon_python: Path, rust_python: Path) -> None:
    run_pypaimon(CREATE_TABLE, rig.base, rig.boss, python=pypaimon_python)
    out: dict[str, Any] = run_pypaimon(RUST_PROCEDURES, rig.base, rig.boss, python=rust_python)
    ok = [{"result": "OK"}]
    for step in (
        "grant",
        "grant_columns",
        "revoke",
        "create_filter",
        "create_mask",
        "drop_mask",
        "drop_if_exists",
    ):
        assert out[step] == ok, (step, out[step])
    # alice's read grant on db.t is its bundle's assignment (SELECT), listed beside the new one
    assert [(r["principal"], r["access"], r["expire_time"]) for r in out["list"]] == [
        ("alice", "SELECT", None),
        ("role:analyst", "SELECT", "2030-01-01T00:00:00Z"),
    ]
    assert [(r["principal"], r["access"]) for r in out["list_after"]] == [("alice", "SELECT")]
    assert "already has a row filter" in out["create_again"]["error"]  # 409
    assert [(r["policy_type"], r["on_column"]) for r in out["policies"]] == [
        ("ROW_FILTER", None),
        ("COLUMN_MASKING", "email"),
    ]
    assert out["policies"][0]["predicate_json"] == FILTER  # the canonical JSON
    assert [(r["on_column"], r["transform_json"]) for r in out["masks"]] == [("email", '{"name":"NULL"}')]
    assert "not found" in out["drop_again"]["error"].lower()  # 404 without if_exists
    assert [r["policy_type"] for r in out["policies_after"]] == ["ROW_FILTER"]

    engine = make_engine(rig.db)
    try:
        kinds = [(e.event_type, e.principal) for e in governance_events(engine, subject="TABLE db.t")]
        assert kinds.count(("policy_created", "boss")) == 2 and kinds.count(("policy_dropped", "boss")) == 1
        assert ("permission_revoked", "boss") in kinds
        columns = Assignments(engine, catalog_key="jdbc").list_page(Resource.column("db", "t"))[0]
        assert [(s.assignment.principal, s.assignment.columns) for s in columns] == [
            ("alice", ColumnRange.allowlist(["id", "region"]))
        ]
    finally:
        engine.dispose()
