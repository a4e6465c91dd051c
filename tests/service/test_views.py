"""Views over HTTP with the spec's bodies (pypaimon 2.1.0 has no view API): create, get, alter (versions),
rename across databases, drop; the protocol's errors; paging and name patterns; grants; the audit log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from paimon_meta.catalog.metastore import MetastoreCatalog
from tests.fixtures.service import in_process_client, make_principal
from tests.service.helpers import P, auth, seed

pytestmark = pytest.mark.postgres

FIELDS = [{"id": 0, "name": "k", "type": "BIGINT NOT NULL"}, {"id": 1, "name": "v", "type": "STRING"}]


def view_body(database: str, name: str, **schema: Any) -> dict[str, Any]:
    return {
        "identifier": {"database": database, "object": name},
        "schema": {
            "fields": FIELDS,
            "query": "SELECT k, v FROM " + database + ".t",  # noqa: S608 - a view's text, not run
            "dialects": {"spark": "SELECT k, v FROM t"},
            "comment": "a view",
            "options": {"a": "1"},
            **schema,
        },
    }


@pytest.fixture
def admin(service_catalog: MetastoreCatalog) -> dict[str, str]:
    service_catalog.create_database("db")
    service_catalog.create_database("db2")
    return auth(make_principal(service_catalog, "admin", [("admin", None, None)]))


@pytest.fixture
def client(service_catalog: MetastoreCatalog) -> Iterator[TestClient]:
    with in_process_client(service_catalog) as c:
        yield c


def _ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json() if response.content else None


def _error(response: Any, status: int, resource_type: str | None = None, name: str | None = None) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == status and set(body) == {"message", "resourceType", "resourceName", "code"}
    assert body["resourceType"] == resource_type, body
    if name is not None:
        assert body["resourceName"] == name, body
    return str(body["message"])


def _events(catalog: MetastoreCatalog) -> list[dict[str, Any]]:
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT object_type, object_id, identifier, event_type, version, principal, payload "
                "FROM paimon_catalog_object_events ORDER BY event_id"
            )
        )
        return [dict(r._mapping) for r in rows]


def _version(catalog: MetastoreCatalog, name: str) -> int:
    with catalog.engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT version FROM paimon_views WHERE view_name = :n"), {"n": name}
            ).scalar_one()
        )


def test_create_get_alter_rename_drop(
    client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    _ok(client.post(f"{P}/databases/db/views", json=view_body("db", "v1"), headers=admin))
    got = _ok(client.get(f"{P}/databases/db/views/v1", headers=admin))
    assert got["name"] == "v1" and len(got["id"]) == 36
    assert got["schema"] == {
        "fields": FIELDS,
        "query": "SELECT k, v FROM db.t",
        "dialects": {"spark": "SELECT k, v FROM t"},
        "comment": "a view",
        "options": {"a": "1"},
    }
    assert got["owner"] == got["createdBy"] == got["updatedBy"] == "admin"
    assert got["createdAt"] == got["updatedAt"] and got["createdAt"] > 0

    changes = [
        {"action": "setOption", "key": "b", "value": "2"},
        {"action": "removeOption", "key": "a"},
        {"action": "updateComment", "comment": None},
        {"action": "addDialect", "dialect": "flink", "query": "SELECT k FROM t"},
        {"action": "updateDialect", "dialect": "spark", "query": "SELECT v FROM t"},
    ]
    _ok(client.post(f"{P}/databases/db/views/v1", json={"changes": changes}, headers=admin))
    assert _version(service_catalog, "v1") == 2
    _ok(
        client.post(
            f"{P}/databases/db/views/v1",
            json={"changes": [{"action": "dropDialect", "dialect": "flink"}]},
            headers=admin,
        )
    )
    assert _version(service_catalog, "v1") == 3
    altered = _ok(client.get(f"{P}/databases/db/views/v1", headers=admin))
    assert altered["schema"]["options"] == {"b": "2"} and altered["schema"]["comment"] is None
    assert altered["schema"]["dialects"] == {"spark": "SELECT v FROM t"}
    assert altered["schema"]["query"] == "SELECT k, v FROM db.t" and altered["id"] == got["id"]
    assert altered["updatedAt"] >= got["updatedAt"]
    # An alter that changes nothing leaves the version.
    _ok(client.post(f"{P}/databases/db/views/v1", json={"changes": []}, headers=admin))
    assert _version(service_catalog, "v1") == 3

    # Rename across databases: the same view (id, version), under its new name only.
    rename = {"source": {"database": "db", "object": "v1"}, "destination": {"database": "db2", "object": "w"}}
    _ok(client.post(f"{P}/views/rename", json=rename, headers=admin))
    moved = _ok(client.get(f"{P}/databases/db2/views/w", headers=admin))
    assert (
        moved["id"] == got["id"]
        and moved["schema"] == altered["schema"]
        and _version(service_catalog, "w") == 3
    )
    _error(client.get(f"{P}/databases/db/views/v1", headers=admin), 404, "VIEW", "v1")

    _ok(client.delete(f"{P}/databases/db2/views/w", headers=admin))
    _error(client.get(f"{P}/databases/db2/views/w", headers=admin), 404, "VIEW", "w")

    events = _events(service_catalog)
    assert [(e["event_type"], e["identifier"], e["version"]) for e in events] == [
        ("created", "db.v1", 1),
        ("altered", "db.v1", 2),
        ("altered", "db.v1", 3),
        ("renamed", "db2.w", 3),
        ("dropped", "db2.w", 3),
    ]
    assert {e["principal"] for e in events} == {"admin"} and {e["object_type"] for e in events} == {"view"}
    assert len({e["object_id"] for e in events}) == 1
    assert events[0]["payload"]["schema"]["query"] == "SELECT k, v FROM db.t"
    assert events[1]["payload"]["changes"] == changes
    assert events[3]["payload"] == {"from": "db.v1"}
    assert events[4]["payload"]["schema"]["dialects"] == {"spark": "SELECT v FROM t"}
    # The log is append-only.
    with pytest.raises(DBAPIError), service_catalog.engine.begin() as conn:
        conn.execute(text("UPDATE paimon_catalog_object_events SET principal = 'x'"))


def test_errors_carry_the_protocol_body(
    client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    seed(service_catalog, "db.t")
    views = f"{P}/databases/db/views"
    _ok(client.post(views, json=view_body("db", "v1"), headers=admin))
    _error(client.post(views, json=view_body("db", "v1"), headers=admin), 409, "VIEW", "v1")
    # A view may not take a table's name (Java's JdbcCatalog refuses it too).
    assert "table" in _error(client.post(views, json=view_body("db", "t"), headers=admin), 409, "VIEW", "t")
    _error(
        client.post(f"{P}/databases/nope/views", json=view_body("nope", "v"), headers=admin), 404, "DATABASE"
    )
    _error(client.get(f"{P}/databases/nope/views", headers=admin), 404, "DATABASE")
    _error(client.get(f"{P}/databases/nope/view-details", headers=admin), 404, "DATABASE")
    for method in ("GET", "DELETE"):
        _error(client.request(method, f"{views}/missing", headers=admin), 404, "VIEW", "missing")
    _error(client.post(f"{views}/missing", json={"changes": []}, headers=admin), 404, "VIEW", "missing")
    # The path's database and the identifier's must agree; bad members are 400 naming them.
    assert "identifier.database" in _error(
        client.post(views, json=view_body("db2", "v2"), headers=admin), 400
    )
    bad_type = view_body("db", "v2", fields=[{"id": 0, "name": "k", "type": "NOPE"}])
    assert "schema.fields[0]" in _error(client.post(views, json=bad_type, headers=admin), 400)
    assert "query" in _error(client.post(views, json=view_body("db", "v2", query=None), headers=admin), 400)

    alter = f"{views}/v1"
    unknown = [{"action": "setOption", "key": "x", "value": "1"}, {"action": "renameView", "to": "z"}]
    message = _error(client.post(alter, json={"changes": unknown}, headers=admin), 400)
    assert "renameView" in message and "changes[1]" in message
    missing = [{"action": "updateDialect", "dialect": "hive", "query": "q"}]
    _error(client.post(alter, json={"changes": missing}, headers=admin), 404, "DIALECT", "hive")
    _error(
        client.post(alter, json={"changes": [{"action": "dropDialect", "dialect": "hive"}]}, headers=admin),
        404,
        "DIALECT",
        "hive",
    )
    twice = [{"action": "addDialect", "dialect": "spark", "query": "q"}]
    _error(client.post(alter, json={"changes": twice}, headers=admin), 409, "DIALECT", "spark")
    assert "key" in _error(
        client.post(alter, json={"changes": [{"action": "setOption", "value": "1"}]}, headers=admin), 400
    )
    # All or nothing: the setOption before each refused change did not land.
    assert (
        _ok(client.get(alter, headers=admin))["schema"]["options"] == {"a": "1"}
        and _version(service_catalog, "v1") == 1
    )

    rename = f"{P}/views/rename"
    body = {
        "source": {"database": "db", "object": "missing"},
        "destination": {"database": "db", "object": "x"},
    }
    _error(client.post(rename, json=body, headers=admin), 404, "VIEW", "missing")
    _ok(client.post(views, json=view_body("db", "v2"), headers=admin))
    body = {"source": {"database": "db", "object": "v2"}, "destination": {"database": "db", "object": "v1"}}
    _error(client.post(rename, json=body, headers=admin), 409, "VIEW", "v1")
    body["destination"] = {"database": "db", "object": "t"}
    _error(client.post(rename, json=body, headers=admin), 409, "VIEW", "t")
    body["destination"] = {"database": "nope", "object": "v9"}
    _error(client.post(rename, json=body, headers=admin), 404, "DATABASE")
    # Nothing of the refusals was recorded: two creates only.
    assert [e["event_type"] for e in _events(service_catalog)] == ["created", "created"]


def test_paging_and_patterns(
    client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    names = [f"v{i:02d}" for i in range(25)] + ["B", "a_b", "axb"]
    for name in names:
        _ok(client.post(f"{P}/databases/db/views", json=view_body("db", name), headers=admin))
    for name in ("v00", "z"):
        _ok(client.post(f"{P}/databases/db2/views", json=view_body("db2", name), headers=admin))

    def walk(path: str, key: str, **params: Any) -> tuple[list[Any], int]:
        seen: list[Any] = []
        pages, token = 0, None
        while True:
            query = {**params, **({"pageToken": token} if token else {})}
            page = _ok(client.get(path, params=query, headers=admin))
            seen += page[key]
            pages += 1
            token = page["nextPageToken"]
            if token is None:
                return seen, pages

    # Byte order (upper case first), pages of 10, the last page's token null.
    assert walk(f"{P}/databases/db/views", "views", maxResults=10) == (sorted(names), 3)
    assert walk(f"{P}/databases/db/views", "views") == (sorted(names), 1)
    exact, pages = walk(f"{P}/databases/db/views", "views", maxResults=14)
    assert exact == sorted(names) and pages == 2  # 28 = 2 x 14: no empty third page
    assert walk(f"{P}/databases/db/views", "views", maxResults=4, viewNamePattern="v1%")[0] == [
        f"v{i}" for i in range(10, 20)
    ]
    # '_' is any one character; the prefix before it bounds the scan.
    assert walk(f"{P}/databases/db/views", "views", viewNamePattern="a_b")[0] == ["a_b", "axb"]
    assert walk(f"{P}/databases/db/views", "views", viewNamePattern="%b")[0] == ["B", "a_b", "axb"][1:]
    details, _ = walk(f"{P}/databases/db/view-details", "viewDetails", maxResults=7, viewNamePattern="v2%")
    assert [d["name"] for d in details] == [f"v{i}" for i in range(20, 25)]
    assert details[0]["schema"]["fields"] == FIELDS

    everything, pages = walk(f"{P}/views", "views", maxResults=9)
    expected = [{"database": "db", "object": n} for n in sorted(names)] + [
        {"database": "db2", "object": n} for n in ("v00", "z")
    ]
    assert everything == expected and pages == 4
    assert walk(f"{P}/views", "views", databaseNamePattern="db2")[0] == expected[-2:]
    assert walk(f"{P}/views", "views", viewNamePattern="v00")[0] == [
        {"database": "db", "object": "v00"},
        {"database": "db2", "object": "v00"},
    ]

    for params, field in (
        ({"maxResults": 0}, "maxResults"),
        ({"maxResults": 1001}, "maxResults"),
        ({"pageToken": "no/such"}, "pageToken"),
    ):
        assert field in _error(client.get(f"{P}/databases/db/views", params=params, headers=admin), 400)
    _error(client.get(f"{P}/views", params={"pageToken": "nodot"}, headers=admin), 400)


def test_grants(client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]) -> None:
    seed(service_catalog, "db.t")
    for database, name in (("db", "v1"), ("db2", "v2")):
        _ok(client.post(f"{P}/databases/{database}/views", json=view_body(database, name), headers=admin))
    reader = auth(make_principal(service_catalog, "reader", [("read", "db", None)]))
    table_only = auth(make_principal(service_catalog, "table-reader", [("read", "db", "t")]))
    db_admin = auth(make_principal(service_catalog, "db-admin", [("admin", "db", None)]))

    # Read on db: its views, nothing of db2's (403 there, absent from the global listing).
    assert _ok(client.get(f"{P}/databases/db/views", headers=reader))["views"] == ["v1"]
    _ok(client.get(f"{P}/databases/db/views/v1", headers=reader))
    _error(client.get(f"{P}/databases/db2/views", headers=reader), 403, "DATABASE")
    _error(client.get(f"{P}/databases/db2/views/v2", headers=reader), 403, "VIEW")
    _error(client.get(f"{P}/databases/db2/view-details", headers=reader), 403, "DATABASE")
    assert _ok(client.get(f"{P}/views", headers=reader))["views"] == [{"database": "db", "object": "v1"}]
    # A grant on one table reaches no view.
    _error(client.get(f"{P}/databases/db/views", headers=table_only), 403, "DATABASE")
    assert _ok(client.get(f"{P}/views", headers=table_only)) == {"views": [], "nextPageToken": None}
    # Changing views needs admin on the database.
    _error(
        client.post(f"{P}/databases/db/views", json=view_body("db", "v3"), headers=reader), 403, "DATABASE"
    )
    _error(client.post(f"{P}/databases/db/views/v1", json={"changes": []}, headers=reader), 403, "VIEW")
    _error(client.delete(f"{P}/databases/db/views/v1", headers=reader), 403, "VIEW")
    _ok(client.post(f"{P}/databases/db/views", json=view_body("db", "v3"), headers=db_admin))
    # Renaming across databases needs ALTER on the view and CREATEVIEW on the destination (admin on both).
    body = {"source": {"database": "db", "object": "v3"}, "destination": {"database": "db2", "object": "v3"}}
    _error(client.post(f"{P}/views/rename", json=body, headers=db_admin), 403, "DATABASE", "db2")
    _error(client.post(f"{P}/views/rename", json=body, headers=reader), 403, "VIEW", "db.v3")
    _ok(client.post(f"{P}/views/rename", json=body, headers=admin))
    assert _ok(client.get(f"{P}/databases/db2/views", headers=admin))["views"] == ["v2", "v3"]
    assert [e["principal"] for e in _events(service_catalog)][-2:] == ["db-admin", "admin"]


def test_a_view_java_inserted(
    client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    # JdbcCatalog's INSERT_VIEW_SQL: only Java's four columns.
    schema = '{"fields":[{"id":0,"name":"k","type":"INT"}],"query":"SELECT 1","dialects":{},"options":{}}'
    with service_catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_views (catalog_key, database_name, view_name, view_schema) "
                "VALUES ('jdbc', 'db', 'jv', :s)"
            ),
            {"s": schema},
        )
    got = _ok(client.get(f"{P}/databases/db/views/jv", headers=admin))
    assert got["id"].startswith("view-") and got["schema"]["query"] == "SELECT 1"
    assert got["owner"] == "paimon_meta" and got["schema"]["comment"] is None
    _ok(
        client.post(
            f"{P}/databases/db/views/jv",
            json={"changes": [{"action": "setOption", "key": "a", "value": "b"}]},
            headers=admin,
        )
    )
    with service_catalog.engine.connect() as conn:
        stored = conn.execute(
            text("SELECT view_schema FROM paimon_views WHERE view_name = 'jv'")
        ).scalar_one()
    # Still the JSON Java reads (its ViewSchema members), the option added.
    assert '"options":{"a":"b"}' in stored and '"query":"SELECT 1"' in stored
