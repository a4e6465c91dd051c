"""``POST .../auth`` answered from the stored policies (issue 36): the caller's row filters (its own, its
groups' and roles') ANDed and its masks, the selection checked against its column range (403 naming the
columns; paimon-rust sends no ``select``: all columns), a malformed stored rule or two conflicting ones
refused (fail closed). The policy routes' 400/404/409, and a governed table refusing the schema changes
and the option change that would break its policies."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import GovernanceConflictError
from paimon_meta.governance.permissions import Access, Assignment, ColumnRange, Resource
from paimon_meta.metastore.assignments import Assignments
from paimon_meta.table.schema_change import RemoveOption, RenameColumn, SetOption, UpdateComment
from tests.fixtures.service import make_principal

pytestmark = pytest.mark.postgres

T = "/v1/paimon/databases/db/tables/t"


def _leaf(index: int, name: str, function: str, literals: list[object]) -> str:
    ref = {"name": "FIELD_REF", "fieldRef": {"index": index, "name": name, "type": "STRING"}}
    return json.dumps({"kind": "LEAF", "transform": ref, "function": function, "literals": literals})


EU = _leaf(2, "region", "EQUAL", ["eu"])
NOT_TEST = _leaf(1, "email", "NOT_EQUAL", ["test@x"])
MASK = json.dumps({"name": "NULL"})


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _fields() -> list[dict[str, object]]:
    return [
        {"id": 0, "name": "id", "type": "BIGINT NOT NULL"},
        {"id": 1, "name": "email", "type": "STRING"},
        {"id": 2, "name": "region", "type": "STRING"},
    ]


@pytest.fixture
def tokens(service_catalog: MetastoreCatalog, service_client: TestClient) -> dict[str, str]:
    out = {
        "boss": make_principal(service_catalog, "boss", [("admin", None, None)]),
        "alice": make_principal(service_catalog, "alice", [("read", "db", None)]),
        "bob": make_principal(service_catalog, "bob", [("read", "db", None)]),
    }
    store = Assignments(service_catalog.engine, catalog_key=None)
    store.grant(Assignment("boss", Resource.catalog_all(), Access.ALL), granted_by="ops")
    role = store.create_role("analyst", created_by="ops")
    store.add_member(role, "alice", added_by="ops")
    # created as clients create them (our own reader refuses query-auth.enabled tables until it applies
    # the rules itself)
    boss = _h(out["boss"])
    assert service_client.post("/v1/paimon/databases", json={"name": "db"}, headers=boss).status_code == 200
    for name, options in (("t", {"bucket": "1", "query-auth.enabled": "true"}), ("open", {"bucket": "1"})):
        body = {
            "identifier": {"database": "db", "object": name},
            "schema": {"fields": _fields(), "partitionKeys": [], "primaryKeys": [], "options": options},
        }
        r = service_client.post("/v1/paimon/databases/db/tables", json=body, headers=boss)
        assert r.status_code == 200, r.text
    return out


def test_auth_answers_the_callers_filters_anded_and_masks(
    service_client: TestClient, tokens: dict[str, str]
) -> None:
    boss = _h(tokens["boss"])
    for body in (
        {"principal": "role:analyst", "rowFilter": {"predicate": EU}},
        {"principal": "alice", "rowFilter": {"predicate": NOT_TEST}},
        {"principal": "role:analyst", "columnMask": {"onColumn": "email", "transform": MASK}},
    ):
        r = service_client.post(f"{T}/policies", json=body, headers=boss)
        assert r.status_code == 200, r.text
    r = service_client.post(f"{T}/auth", json={}, headers=_h(tokens["alice"]))
    assert r.status_code == 200, r.text
    answer = r.json()
    assert sorted(json.loads(f)["function"] for f in answer["filter"]) == ["EQUAL", "NOT_EQUAL"]
    assert answer["columnMasking"] == {"email": '{"name":"NULL"}'}
    # bob holds no policy: nothing to apply
    r = service_client.post(f"{T}/auth", json={"select": ["id"]}, headers=_h(tokens["bob"]))
    assert r.json() == {"filter": [], "columnMasking": {}}


def test_a_column_outside_the_range_is_refused(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    store = Assignments(service_catalog.engine, catalog_key=None)
    store.grant(
        Assignment("alice", Resource.column("db", "t"), Access.SELECT, ColumnRange.denylist(["email"])),
        granted_by="ops",
    )
    alice = _h(tokens["alice"])
    r = service_client.post(f"{T}/auth", json={"select": ["id", "region"]}, headers=alice)
    assert r.status_code == 200, r.text
    for body in ({"select": ["id", "email"]}, {}, {"select": None}):  # no select: every column
        r = service_client.post(f"{T}/auth", json=body, headers=alice)
        assert r.status_code == 403 and "'email'" in r.json()["message"], r.text
    r = service_client.post(f"{T}/auth", json={"select": ["nope"]}, headers=alice)
    assert r.status_code == 400 and "nope" in r.json()["message"]


def test_auth_fails_closed_on_a_stored_rule_it_cannot_apply(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    r = service_client.post(
        f"{T}/policies",
        json={"principal": "alice", "rowFilter": {"predicate": EU}},
        headers=_h(tokens["boss"]),
    )
    assert r.status_code == 200
    with service_catalog.engine.begin() as conn:  # a rule no longer valid (written by hand, say)
        conn.execute(text('UPDATE paimon_policies SET body = \'{"kind": "LEAF"\''))
    r = service_client.post(f"{T}/auth", json={}, headers=_h(tokens["alice"]))
    assert r.status_code == 400 and r.json()["code"] == 400, r.text
    assert r.json()["message"]  # the protocol's error body, never an answer without the rule


def test_policy_routes_refuse_what_the_spec_refuses(
    service_client: TestClient, tokens: dict[str, str]
) -> None:
    boss, alice = _h(tokens["boss"]), _h(tokens["alice"])
    good = {"principal": "alice", "rowFilter": {"predicate": EU}}
    cases = [
        (f"{T}/policies", {"principal": "alice", "rowFilter": {"predicate": "{"}}, boss, 400),
        (
            f"{T}/policies",
            {"principal": "alice", "columnMask": {"onColumn": "zzz", "transform": MASK}},
            boss,
            404,
        ),
        (f"{T}/policies", {"principal": "nobody", "rowFilter": {"predicate": EU}}, boss, 404),
        ("/v1/paimon/databases/db/tables/nope/policies", good, boss, 404),
        ("/v1/paimon/databases/db/tables/open/policies", good, boss, 409),  # no query-auth.enabled
        (f"{T}/policies", good, alice, 403),  # neither ALTER nor GRANT
        (f"{T}/policies", good, boss, 200),
        (f"{T}/policies", good, boss, 409),  # the same identity again
        (
            f"{T}/policies/drop",
            {"type": "COLUMN_MASKING", "principal": "alice", "column": "email"},
            boss,
            404,
        ),
        (f"{T}/policies/drop", {"type": "ROW_FILTER", "principal": "alice"}, boss, 200),
    ]
    for path, body, headers, status in cases:
        r = service_client.post(path, json=body, headers=headers)
        assert r.status_code == status, (path, body, r.text)
    r = service_client.get(f"{T}/policies", headers=alice)
    assert r.status_code == 200 and r.json()["policies"] == []


def test_a_governed_table_refuses_changes_that_break_its_policies(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    r = service_client.post(
        f"{T}/policies",
        json={"principal": "alice", "columnMask": {"onColumn": "email", "transform": MASK}},
        headers=_h(tokens["boss"]),
    )
    assert r.status_code == 200
    r = service_client.post(
        f"{T}/policies", json={"principal": "bob", "rowFilter": {"predicate": EU}}, headers=_h(tokens["boss"])
    )
    assert r.status_code == 200
    for change in (
        RenameColumn("email", "mail"),  # masked
        RenameColumn("region", "area"),  # read by a filter
        SetOption("query-auth.enabled", "false"),
        RemoveOption("query-auth.enabled"),
    ):
        with pytest.raises(GovernanceConflictError):
            service_catalog.alter_table_changes("db.t", [change])
    service_catalog.alter_table_changes("db.t", [UpdateComment("still fine"), RenameColumn("id", "key")])
    # over the protocol: 409 with the error body
    r = service_client.post(
        T,
        json={"changes": [{"action": "renameColumn", "fieldNames": ["email"], "newName": "mail"}]},
        headers=_h(tokens["boss"]),
    )
    assert r.status_code == 409 and "email" in r.json()["message"], r.text
