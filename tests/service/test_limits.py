"""Size limits on the free text the catalog stores (model/limits.py): each field over its limit is 413
naming the field, at create and at alter, for views, functions, tables, databases and commits; an
object stored before the limits can still be altered in what stays within them; and listing pages of
large objects stop at their byte budget and name the next page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model import limits
from paimon_meta.service import convert
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, commit_body, seed
from tests.service.test_views import FIELDS, view_body

pytestmark = pytest.mark.postgres

TABLE_FIELDS = [{"id": 0, "name": "k", "type": "BIGINT NOT NULL"}]


@pytest.fixture
def client(service_catalog: MetastoreCatalog) -> Iterator[TestClient]:
    """The app with the default body limit (16 MiB: texts over their own limits fit in a body)."""
    settings = ServiceSettings(auth_cache_seconds=0)
    with TestClient(create_app(settings, state=ServiceState(settings, service_catalog))) as c:
        yield c


@pytest.fixture
def admin(service_catalog: MetastoreCatalog) -> dict[str, str]:
    service_catalog.create_database("db")
    return auth(make_principal(service_catalog, "admin", [("admin", None, None)]))


def too_large(response: Any, field: str) -> None:
    assert response.status_code == 413, response.text
    body = response.json()
    assert body["code"] == 413 and body["message"].startswith(f"{field} has "), body


def function_body(name: str, **members: Any) -> dict[str, Any]:
    return {
        "name": name,
        "inputParams": FIELDS,
        "returnParams": FIELDS[:1],
        "deterministic": True,
        "definitions": {"spark": {"type": "sql", "definition": "k * 2"}},
        "comment": "doubles",
        "options": {"a": "1"},
        **members,
    }


def table_body(name: str, **schema: Any) -> dict[str, Any]:
    return {
        "identifier": {"database": "db", "object": name},
        "schema": {"fields": TABLE_FIELDS, "options": {"bucket": "-1"}, **schema},
    }


def big(limit: int) -> str:
    return "x" * (limit + 1)


def test_views_refuse_texts_over_their_limits(client: TestClient, admin: dict[str, str]) -> None:
    url = f"{P}/databases/db/views"
    for schema, field in (
        ({"query": big(limits.QUERY)}, "schema.query"),
        ({"dialects": {"spark": big(limits.QUERY)}}, "schema.dialects.spark"),
        ({"dialects": {big(limits.NAME): "q"}}, "schema.dialects key"),
        ({"comment": big(limits.COMMENT)}, "schema.comment"),
        ({"options": {"k": big(limits.VALUE)}}, "schema.options.k"),
        ({"options": {big(limits.NAME): "v"}}, "schema.options key"),
        ({"fields": [{**FIELDS[0], "description": big(limits.COMMENT)}]}, "schema.fields.k.description"),
    ):
        too_large(client.post(url, json=view_body("db", "v", **schema), headers=admin), field)
    assert client.post(url, json=view_body("db", "v"), headers=admin).status_code == 200
    view = f"{url}/v"
    for change, field in (
        ({"action": "setOption", "key": "k", "value": big(limits.VALUE)}, "schema.options.k"),
        ({"action": "updateComment", "comment": big(limits.COMMENT)}, "schema.comment"),
        ({"action": "addDialect", "dialect": "trino", "query": big(limits.QUERY)}, "schema.dialects.trino"),
        (
            {"action": "updateDialect", "dialect": "spark", "query": big(limits.QUERY)},
            "schema.dialects.spark",
        ),
    ):
        too_large(client.post(view, json={"changes": [change]}, headers=admin), field)
    # dialects that each fit but not all together: the view's text in all is refused
    for i in range(limits.OBJECT // limits.QUERY - 1):
        change = {"action": "addDialect", "dialect": f"d{i}", "query": "y" * limits.QUERY}
        assert client.post(view, json={"changes": [change]}, headers=admin).status_code == 200
    change = {"action": "addDialect", "dialect": "last", "query": "y" * limits.QUERY}
    answer = client.post(view, json={"changes": [change]}, headers=admin)
    assert answer.status_code == 413 and "the view's text" in answer.json()["message"], answer.text


def test_a_view_stored_over_the_limits_is_altered_in_what_stays_within_them(
    client: TestClient, admin: dict[str, str], service_catalog: MetastoreCatalog
) -> None:
    """Written by Java (or before the limits): read as it is, its other members altered as before."""
    url = f"{P}/databases/db/views"
    assert client.post(url, json=view_body("db", "old"), headers=admin).status_code == 200
    with service_catalog.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE paimon_views SET view_schema = jsonb_set(view_schema::jsonb, '{query}',"
                " to_jsonb(repeat('z', :n)))::text WHERE view_name = 'old'"
            ),
            {"n": limits.QUERY + 10},
        )
    got = client.get(f"{url}/old", headers=admin)
    assert got.status_code == 200 and len(got.json()["schema"]["query"]) == limits.QUERY + 10
    change = {"action": "updateComment", "comment": "still readable"}
    assert client.post(f"{url}/old", json={"changes": [change]}, headers=admin).status_code == 200


def test_functions_refuse_texts_over_their_limits(client: TestClient, admin: dict[str, str]) -> None:
    url = f"{P}/databases/db/functions"
    for members, field in (
        (
            {"definitions": {"spark": {"type": "sql", "definition": big(limits.QUERY)}}},
            "definitions.spark.definition",
        ),
        (
            {"definitions": {"py": {"type": "lambda", "definition": "x", "language": big(limits.NAME)}}},
            "definitions.py.language",
        ),
        (
            {
                "definitions": {
                    "jar": {
                        "type": "file",
                        "fileResources": [{"resourceType": "JAR", "uri": big(limits.URI)}],
                        "language": "java",
                        "className": "C",
                        "functionName": "f",
                    }
                }
            },
            "definitions.jar.fileResources[0].uri",
        ),
        ({"comment": big(limits.COMMENT)}, "comment"),
        ({"options": {"k": big(limits.VALUE)}}, "options.k"),
    ):
        too_large(client.post(url, json=function_body("f", **members), headers=admin), field)
    assert client.post(url, json=function_body("f"), headers=admin).status_code == 200
    change: dict[str, Any] = {"action": "setOption", "key": "k", "value": big(limits.VALUE)}
    too_large(client.post(f"{url}/f", json={"changes": [change]}, headers=admin), "options.k")
    change = {
        "action": "addDefinition",
        "name": "x",
        "definition": {"type": "sql", "definition": big(limits.QUERY)},
    }
    too_large(client.post(f"{url}/f", json={"changes": [change]}, headers=admin), "definitions.x.definition")


def test_tables_databases_and_commits_refuse_texts_over_their_limits(
    client: TestClient, admin: dict[str, str], service_catalog: MetastoreCatalog
) -> None:
    url = f"{P}/databases/db/tables"
    for schema, field in (
        ({"options": {"bucket": "-1", "k": big(limits.VALUE)}}, "schema.options.k"),
        ({"comment": big(limits.COMMENT)}, "schema.comment"),
        (
            {"fields": [{**TABLE_FIELDS[0], "description": big(limits.COMMENT)}]},
            "schema.fields.k.description",
        ),
    ):
        too_large(client.post(url, json=table_body("t", **schema), headers=admin), field)
    assert client.post(url, json=table_body("t"), headers=admin).status_code == 200
    for change, field in (
        ({"action": "setOption", "key": "k", "value": big(limits.VALUE)}, "schema.options.k"),
        ({"action": "updateComment", "comment": big(limits.COMMENT)}, "schema.comment"),
        (
            {"action": "updateColumnComment", "fieldNames": ["k"], "newComment": big(limits.COMMENT)},
            "schema.fields.k.description",
        ),
    ):
        too_large(client.post(f"{url}/t", json={"changes": [change]}, headers=admin), field)
    # a database keeps at most ENTRIES options
    updates = {f"k{i}": "v" for i in range(limits.ENTRIES + 1)}
    answer = client.post(f"{P}/databases/db", json={"updates": updates, "removals": []}, headers=admin)
    assert answer.status_code == 413 and "options has 1025 entries" in answer.json()["message"], answer.text
    # a commit's properties (kept in its snapshot)
    base = seed(service_catalog, "db.s")
    body = commit_body(base, properties={"k": big(limits.VALUE)})
    too_large(
        client.post(f"{P}/databases/db/tables/s/commit", json=body, headers=admin), "snapshot.properties.k"
    )


def _walk(client: TestClient, url: str, admin: dict[str, str], key: str) -> list[list[str]]:
    pages: list[list[str]] = []
    token = None
    while True:
        params: dict[str, Any] = {"maxResults": 100} | ({"pageToken": token} if token else {})
        body = client.get(url, params=params, headers=admin).json()
        pages.append([item["name"] for item in body[key]])
        token = body["nextPageToken"]
        if token is None:
            return pages


def test_listing_pages_stop_at_their_byte_budget(
    client: TestClient, admin: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four view-details pages of 15 MB views took a replica from 350 MiB to 1.3 GiB: a page now stops
    once it carries its budget (here 64 KiB: objects of ~20 KiB, four a page), naming the next page."""
    monkeypatch.setattr(convert, "PAGE_BYTES", 64 << 10)
    body = "x" * (20 << 10)
    for i in range(10):
        view = view_body("db", f"v{i}", query=body)
        assert client.post(f"{P}/databases/db/views", json=view, headers=admin).status_code == 200
        function = function_body(f"f{i}", comment=body[: limits.COMMENT])
        assert client.post(f"{P}/databases/db/functions", json=function, headers=admin).status_code == 200
        table = table_body(f"t{i}", comment=body)
        assert client.post(f"{P}/databases/db/tables", json=table, headers=admin).status_code == 200
    for url, key, prefix in (
        (f"{P}/databases/db/view-details", "viewDetails", "v"),
        (f"{P}/databases/db/function-details", "functionDetails", "f"),
        (f"{P}/databases/db/table-details", "tableDetails", "t"),
    ):
        pages = _walk(client, url, admin, key)
        assert [len(p) for p in pages] == [4, 4, 2], (url, pages)
        assert [n for p in pages for n in p] == [f"{prefix}{i}" for i in range(10)]
    # names only: the same budget (their rows are read whole)
    views = client.get(f"{P}/databases/db/views", params={"maxResults": 100}, headers=admin).json()
    assert len(views["views"]) == 4 and views["nextPageToken"] == "v3"
