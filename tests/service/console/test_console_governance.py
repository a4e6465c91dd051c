"""The console's governance pages (issue 36 item 6): a table's permissions and policies and a principal's,
listed exactly as the store holds them and as the management API's listings would show them to the
caller; grant, revoke, create and drop a policy from forms, each refused (403 without the CSRF token or
without the right the REST route checks, 400 without a reason) with nothing written, and otherwise
written with a governance event naming the console's principal and the reason. Hostile principal names
and rule literals are shown escaped."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import GovernanceEventType as E
from paimon_meta.governance.permissions import Access, Assignment, ColumnRange, Resource
from paimon_meta.metastore.assignments import Assignments, governance_events
from paimon_meta.service.console import pages, session
from tests.fixtures.service import make_principal
from tests.service.console.test_console_pages import count_testid, sign_in

pytestmark = pytest.mark.postgres

G = "/ui/tables/db/t/permissions"
P = "/ui/tables/db/t/policies"
REST_T = "/v1/paimon/databases/db/tables/t"
HOSTILE = '<script>alert("p")</script>'


def _leaf(index: int, name: str, function: str, literals: list[object]) -> str:
    ref = {"name": "FIELD_REF", "fieldRef": {"index": index, "name": name, "type": "STRING"}}
    return json.dumps({"kind": "LEAF", "transform": ref, "function": function, "literals": literals})


EU = _leaf(2, "region", "EQUAL", ["eu"])
MASK = json.dumps({"name": "NULL"})


def _h(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def tokens(service_catalog: MetastoreCatalog, service_client: TestClient) -> dict[str, str]:
    """boss: ALL on the catalog and everything in it (GRANT included); ops: admin on db (ALTER on the
    table, no GRANT); alice: a reader, member of role:analyst; bob: a reader. db.t has
    ``query-auth.enabled``; alice and role:analyst hold assignments on it, role:analyst and bob a
    policy."""
    out = {
        "boss": make_principal(service_catalog, "boss", [("admin", None, None)]),
        "ops": make_principal(service_catalog, "ops", [("admin", "db", None)]),
        "alice": make_principal(service_catalog, "alice", [("read", "db", None)]),
        "bob": make_principal(service_catalog, "bob", [("read", "db", None)]),
    }
    store = Assignments(service_catalog.engine, catalog_key=None)
    store.grant(Assignment("boss", Resource.catalog(), Access.ALL), granted_by="tests")
    store.grant(Assignment("boss", Resource.catalog_all(), Access.ALL), granted_by="tests")
    role = store.create_role("analyst", created_by="tests")
    store.add_member(role, "alice", added_by="tests")
    boss = _h(out["boss"])
    assert service_client.post("/v1/paimon/databases", json={"name": "db"}, headers=boss).status_code == 200
    fields = [
        {"id": 0, "name": "id", "type": "BIGINT NOT NULL"},
        {"id": 1, "name": "email", "type": "STRING"},
        {"id": 2, "name": "region", "type": "STRING"},
    ]
    body = {
        "identifier": {"database": "db", "object": "t"},
        "schema": {
            "fields": fields,
            "partitionKeys": [],
            "primaryKeys": [],
            "options": {"bucket": "1", "query-auth.enabled": "true"},
        },
    }
    assert service_client.post("/v1/paimon/databases/db/tables", json=body, headers=boss).status_code == 200
    for grant in (
        {
            "resource": {"type": "TABLE", "database": "db", "table": "t"},
            "access": "SELECT",
            "principal": "alice",
        },
        {
            "resource": {"type": "COLUMN", "database": "db", "table": "t"},
            "access": "SELECT",
            "principal": "role:analyst",
            "columns": {"columnNames": ["id", "region"]},
        },
        {
            "resource": {"type": "TABLE", "database": "db", "table": "t"},
            "access": "UPDATE",
            "principal": "bob",
            "expireTime": "2099-01-01T00:00:00Z",
        },
    ):
        r = service_client.post("/v1/paimon/permissions/grant", json=grant, headers=boss)
        assert r.status_code == 200, r.text
    for policy in (
        {"principal": "role:analyst", "rowFilter": {"predicate": EU}},
        {"principal": "role:analyst", "columnMask": {"onColumn": "email", "transform": MASK}},
        {"principal": "bob", "rowFilter": {"predicate": EU}},
    ):
        r = service_client.post(f"{REST_T}/policies", json=policy, headers=boss)
        assert r.status_code == 200, r.text
    return out


def _rows(page: str, testid: str) -> list[str]:
    """The principal each row of ``testid`` names (its first link's text, unescaped)."""
    found = re.findall(rf'<tr data-testid="{testid}">\s*<td[^>]*><a href="[^"]*">([^<]*)</a>', page)
    return [html.unescape(x) for x in found]


def _rest(client: TestClient, token: str, path: str) -> Any:
    r = client.get(path, headers=_h(token))
    assert r.status_code == 200, r.text
    return r.json()


def _rest_principals(client: TestClient, token: str, resource_type: str) -> list[str]:
    q = f"resourceType={resource_type}&database=db&table=t"
    return [p["principal"] for p in _rest(client, token, f"/v1/paimon/permissions?{q}")["permissions"]]


def _state(catalog: MetastoreCatalog) -> dict[str, Any]:
    """Everything a governance action could write."""
    with catalog.engine.connect() as conn:
        return {
            t: conn.execute(text(f"SELECT count(*), coalesce(max(xmin::text::bigint), 0) FROM {t}")).one()  # noqa: S608 - constants
            for t in ("paimon_assignments", "paimon_policies", "paimon_governance_events")
        }


def test_the_table_page_lists_what_the_store_holds_as_the_rest_listings_show_it(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    # the table page links to it
    sign_in(service_client, tokens["boss"])
    table_page = service_client.get("/ui/tables/db/t")
    assert table_page.status_code == 200 and f'href="{G}"' in table_page.text
    page = service_client.get(G)
    assert page.status_code == 200, page.text
    boss = tokens["boss"]
    assert _rows(page.text, "table-assignment") == _rest_principals(service_client, boss, "TABLE")
    assert _rows(page.text, "table-assignment") == ["alice", "bob"]
    assert _rows(page.text, "column-assignment") == ["role:analyst"]
    assert "only id, region" in page.text and "2099-01-01 00:00:00 UTC" in page.text
    policies = _rest(service_client, boss, f"{REST_T}/policies")["policies"]
    assert _rows(page.text, "policy") == [p["principal"] for p in policies]
    assert _rows(page.text, "policy") == ["role:analyst", "role:analyst", "bob"]
    # the actions are offered to boss; a row links to its principal's page
    for form in ("grant-form", "revoke-form", "create-policy-form", "drop-policy-form"):
        assert count_testid(page.text, form) >= 1, form
    assert 'href="/ui/principals/role%3Aanalyst"' in page.text

    # alice (no GRANT, no ALTER) sees her own names' only, as the REST listings answer her, no actions
    service_client.cookies.clear()
    sign_in(service_client, tokens["alice"])
    page = service_client.get(G)
    assert page.status_code == 200, page.text
    alice = tokens["alice"]
    assert (
        _rows(page.text, "table-assignment") == _rest_principals(service_client, alice, "TABLE") == ["alice"]
    )
    assert _rows(page.text, "column-assignment") == _rest_principals(service_client, alice, "COLUMN")
    assert _rows(page.text, "column-assignment") == ["role:analyst"]
    mine = [p["principal"] for p in _rest(service_client, alice, f"{REST_T}/policies")["policies"]]
    assert _rows(page.text, "policy") == mine == ["role:analyst", "role:analyst"]
    for form in ("grant-form", "revoke-form", "create-policy-form", "drop-policy-form"):
        assert count_testid(page.text, form) == 0, form
    assert service_client.get("/ui/tables/db/nope/permissions").status_code == 404


def test_the_table_page_is_paged(
    service_client: TestClient,
    service_catalog: MetastoreCatalog,
    tokens: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pages, "GOVERNANCE_PAGE", 1)
    sign_in(service_client, tokens["boss"])
    page = service_client.get(G).text
    assert _rows(page, "table-assignment") == ["alice"] and _rows(page, "policy") == ["role:analyst"]
    nexts = re.findall(r'href="/ui/tables/db/t/permissions\?table_after=(\d+)"', page)
    assert len(nexts) == 1
    second = service_client.get(f"{G}?table_after={nexts[0]}").text
    assert _rows(second, "table-assignment") == ["bob"]
    assert "table_after=" not in second  # the last page
    token = re.findall(r"policies_after=(\d+)", page)[0]
    assert _rows(service_client.get(f"{G}?policies_after={token}").text, "policy") == ["role:analyst"]


def test_the_principal_page_lists_its_assignments_and_policies_for_a_catalog_granter_only(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    sign_in(service_client, tokens["boss"])
    page = service_client.get("/ui/principals/alice")
    assert page.status_code == 200, page.text
    store = Assignments(service_catalog.engine, catalog_key=service_catalog.registry.catalog_key)
    held = store.of_subject("alice").assignments
    assert count_testid(page.text, "principal-assignment") == len(held) > 0
    for a in held:
        assert html.escape(str(a.resource)) in page.text
    assert "role:analyst" in page.text  # its role's column grant applies to it
    # the policies that apply to alice: role:analyst's two (not bob's)
    assert count_testid(page.text, "principal-policy") == 2
    assert 'href="/ui/tables/db/t/permissions"' in page.text
    bob = service_client.get("/ui/principals/bob").text
    assert count_testid(bob, "principal-policy") == 1
    assert service_client.get("/ui/principals/nobody").status_code == 404
    # ops administers db but holds no GRANT on the catalog; alice neither: 403
    for who in ("ops", "alice"):
        service_client.cookies.clear()
        sign_in(service_client, tokens[who])
        assert service_client.get("/ui/principals/alice").status_code == 403, who


def _actions() -> list[tuple[str, dict[str, str]]]:
    return [
        (f"{G}/grant", {"principal": "bob", "access": "SELECT", "columns": "id", "expire_time": ""}),
        (f"{G}/revoke", {"principal": "alice", "access": "SELECT", "resource_type": "TABLE"}),
        (f"{P}", {"principal": "alice", "policy_type": "ROW_FILTER", "rule": EU}),
        (f"{P}/drop", {"principal": "bob", "policy_type": "ROW_FILTER"}),
    ]


@pytest.mark.parametrize(("path", "fields"), _actions(), ids=["grant", "revoke", "create", "drop"])
def test_refused_actions_write_nothing(
    service_client: TestClient,
    service_catalog: MetastoreCatalog,
    tokens: dict[str, str],
    path: str,
    fields: dict[str, str],
) -> None:
    sign_in(service_client, tokens["boss"])
    good = session.csrf_token(tokens["boss"])
    before = _state(service_catalog)
    assert service_client.post(path, data={**fields, "reason": "r"}).status_code == 403  # no CSRF token
    wrong = session.csrf_token(tokens["alice"])
    r = service_client.post(path, data={**fields, "reason": "r", "csrf_token": wrong})
    assert r.status_code == 403
    evil = {"Origin": "https://evil.example"}
    r = service_client.post(path, data={**fields, "reason": "r", "csrf_token": good}, headers=evil)
    assert r.status_code == 403
    r = service_client.post(path, data={**fields, "reason": "  ", "csrf_token": good})
    assert r.status_code == 400 and "reason" in r.text
    # alice: her own valid CSRF token, neither GRANT nor ALTER on the table
    service_client.cookies.clear()
    sign_in(service_client, tokens["alice"])
    r = service_client.post(
        path, data={**fields, "reason": "r", "csrf_token": session.csrf_token(tokens["alice"])}
    )
    assert r.status_code == 403, r.text
    assert _state(service_catalog) == before


def test_an_alter_holder_manages_policies_but_may_not_grant_as_rest_decides(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    ops = tokens["ops"]
    grant = {
        "resource": {"type": "TABLE", "database": "db", "table": "t"},
        "access": "SELECT",
        "principal": "bob",
    }
    assert service_client.post("/v1/paimon/permissions/grant", json=grant, headers=_h(ops)).status_code == 403
    sign_in(service_client, ops)
    csrf = session.csrf_token(ops)
    before = _state(service_catalog)
    r = service_client.post(
        f"{G}/grant", data={"principal": "bob", "access": "SELECT", "reason": "r", "csrf_token": csrf}
    )
    assert r.status_code == 403
    assert _state(service_catalog) == before
    r = service_client.post(
        P,
        data={
            "principal": "alice",
            "policy_type": "ROW_FILTER",
            "rule": EU,
            "reason": "eu only",
            "csrf_token": csrf,
        },
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    created = [e for e in governance_events(service_catalog.engine) if e.event_type == E.POLICY_CREATED.value]
    assert (created[-1].principal, created[-1].target, created[-1].reason) == ("ops", "alice", "eu only")


def test_actions_write_and_record_the_principal_and_reason(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    sign_in(service_client, tokens["boss"])
    csrf = session.csrf_token(tokens["boss"])
    engine = service_catalog.engine
    store = Assignments(engine, catalog_key=service_catalog.registry.catalog_key)

    def post(path: str, **fields: str) -> None:
        r = service_client.post(path, data={**fields, "csrf_token": csrf}, follow_redirects=False)
        assert r.status_code == 303, r.text
        assert r.headers["location"].startswith(G + "?done=")

    def last(kind: E) -> Any:
        return [e for e in governance_events(engine) if e.event_type == kind.value][-1]

    post(
        f"{G}/grant",
        principal="bob",
        access="SELECT",
        columns="id, email",
        expire_time="2098-05-01T00:00:00Z",
        reason="ticket 7",
    )
    page, _ = store.list_page(Resource.column("db", "t"), principal="bob")
    assert [s.assignment for s in page] == [
        Assignment(
            "bob",
            Resource.column("db", "t"),
            Access.SELECT,
            ColumnRange.allowlist(["id", "email"]),
            datetime(2098, 5, 1, tzinfo=UTC),
        )
    ]
    assert page[0].granted_by == "boss" and page[0].reason == "ticket 7"
    event = last(E.PERMISSION_GRANTED)
    assert (event.principal, event.target, event.reason) == ("boss", "bob", "ticket 7")
    assert "Permission granted." in service_client.get(f"{G}?done=permission-granted").text

    post(f"{G}/revoke", principal="alice", access="SELECT", resource_type="TABLE", reason="left the team")
    assert store.list_page(Resource.table("db", "t"), principal="alice")[0] == []
    event = last(E.PERMISSION_REVOKED)
    assert (event.principal, event.target, event.reason) == ("boss", "alice", "left the team")

    post(P, principal="alice", policy_type="COLUMN_MASKING", column="email", rule=MASK, reason="pii")
    event = last(E.POLICY_CREATED)
    assert (event.principal, event.target, event.reason) == ("boss", "alice", "pii")
    assert event.payload["column"] == "email" and event.payload["body"] == '{"name":"NULL"}'

    post(f"{P}/drop", principal="role:analyst", policy_type="COLUMN_MASKING", column="email", reason="done")
    event = last(E.POLICY_DROPPED)
    assert (event.principal, event.target, event.reason) == ("boss", "role:analyst", "done")
    policies = _rest(service_client, tokens["boss"], f"{REST_T}/policies")["policies"]
    assert sorted((p["principal"], "columnMask" in p) for p in policies) == [
        ("alice", True),
        ("bob", False),
        ("role:analyst", False),
    ]
    # the checks' own errors answer as a page: a rule naming no column of the table is a 400
    r = service_client.post(
        P,
        data={
            "principal": "bob",
            "policy_type": "COLUMN_MASKING",
            "column": "zzz",
            "rule": MASK,
            "reason": "r",
            "csrf_token": csrf,
        },
    )
    assert r.status_code == 404 and "zzz" in r.text


def test_hostile_principal_names_and_rules_are_escaped(
    service_client: TestClient, service_catalog: MetastoreCatalog, tokens: dict[str, str]
) -> None:
    with service_catalog.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO paimon_principals (name, created_by) VALUES (:n, 'tests')"), {"n": HOSTILE}
        )
    sign_in(service_client, tokens["boss"])
    csrf = session.csrf_token(tokens["boss"])
    rule = _leaf(2, "region", "EQUAL", ["</pre><img src=x onerror=alert(1)>"])
    for fields in (
        {"principal": HOSTILE, "access": "SELECT"},
        {"principal": HOSTILE, "policy_type": "ROW_FILTER", "rule": rule},
    ):
        path = f"{G}/grant" if "access" in fields else P
        r = service_client.post(
            path, data={**fields, "reason": "r", "csrf_token": csrf}, follow_redirects=False
        )
        assert r.status_code == 303, r.text
    for url in (G, "/ui/principals/" + re.sub(r"[^A-Za-z0-9]", lambda m: f"%{ord(m.group()):02X}", HOSTILE)):
        page = service_client.get(url)
        assert page.status_code == 200, (url, page.text)
        assert "<script>" not in page.text and "<img" not in page.text, url
        assert "&lt;script&gt;" in page.text and "&lt;img src=x onerror=alert(1)&gt;" in page.text, url
    page = service_client.get(G).text
    assert HOSTILE in _rows(page, "table-assignment") and HOSTILE in _rows(page, "policy")
    assert 'href="/ui/principals/%3Cscript%3Ealert%28%22p%22%29%3C%2Fscript%3E"' in page
