"""The operations apache/paimon's Java client calls beyond the yaml spec (``RESTApi``/``ResourcePaths``;
pypaimon 2.1.0 calls none of them), over HTTP with the Java client's bodies: a table's schemas by version
and paged, semantic views (upsert, get, list, delete; 409 against a SQL view of the same name; 1 MiB),
``replaceTable``; and ``createPartitions``' ``partitionOptions``, refused rather than stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.table import schema_change
from tests.fixtures.service import in_process_client, make_principal
from tests.service.helpers import P, auth, seed

pytestmark = pytest.mark.postgres

T = f"{P}/databases/db/tables/t"
SV = f"{P}/databases/db/semantic-views"


@pytest.fixture
def client(service_catalog: MetastoreCatalog) -> Iterator[TestClient]:
    # A body room for a semantic view of 1 MiB (the service's default limit is 16 MiB).
    with in_process_client(service_catalog, max_body_bytes=4 << 20) as c:
        yield c


@pytest.fixture
def admin(service_catalog: MetastoreCatalog) -> dict[str, str]:
    return auth(make_principal(service_catalog, "admin", [("admin", None, None)]))


def _ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json() if response.content else None


def _error(response: Any, status: int, resource_type: str | None = None) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == status and body["resourceType"] == resource_type, body
    return str(body["message"])


# ---- schemas -------------------------------------------------------------------------------------------


def test_schemas_by_version_and_paged(
    client: TestClient, admin: dict[str, str], service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog)
    service_catalog.alter_table_changes("db.t", [schema_change.SetOption("a", "1")])
    service_catalog.alter_table_changes("db.t", [schema_change.SetOption("a", "2")])
    latest = _ok(client.get(f"{T}/schemas/LATEST", headers=admin))["schema"]
    assert latest["id"] == 2 and latest["options"]["a"] == "2"
    assert {"version", "id", "fields", "highestFieldId", "partitionKeys", "primaryKeys", "options"} <= set(
        latest
    )
    assert latest["partitionKeys"] == ["p"] and [f["name"] for f in latest["fields"]] == ["k", "p", "v"]
    assert _ok(client.get(f"{T}/schemas/EARLIEST", headers=admin))["schema"]["id"] == 0
    assert _ok(client.get(f"{T}/schemas/1", headers=admin))["schema"]["options"]["a"] == "1"
    for missing in ("3", "latest", "x"):
        _error(client.get(f"{T}/schemas/{missing}", headers=admin), 404, "SCHEMA")

    first = _ok(client.get(f"{T}/schemas", params={"maxResults": 2}, headers=admin))
    assert [s["id"] for s in first["schemas"]] == [0, 1] and first["nextPageToken"] == "1"
    rest = _ok(client.get(f"{T}/schemas", params={"maxResults": 2, "pageToken": "1"}, headers=admin))
    assert [s["id"] for s in rest["schemas"]] == [2] and rest["nextPageToken"] is None
    everything = _ok(client.get(f"{T}/schemas", headers=admin))
    assert [s["id"] for s in everything["schemas"]] == [0, 1, 2] and everything["nextPageToken"] is None
    _error(client.get(f"{P}/databases/db/tables/nope/schemas", headers=admin), 404, "TABLE")


def test_schemas_need_read_on_the_table(client: TestClient, service_catalog: MetastoreCatalog) -> None:
    seed(service_catalog)
    seed(service_catalog, "db.u")
    reader = auth(make_principal(service_catalog, "reader", [("read", "db", "u")]))
    _error(client.get(f"{T}/schemas", headers=reader), 403, "TABLE")
    _ok(client.get(f"{P}/databases/db/tables/u/schemas/LATEST", headers=reader))


def test_a_format_table_has_one_schema(client: TestClient, admin: dict[str, str]) -> None:
    _ok(client.post(f"{P}/databases", json={"name": "db"}, headers=admin))
    schema = {"fields": [{"id": 0, "name": "a", "type": "INT"}], "options": {"type": "format-table"}}
    _ok(
        client.post(
            f"{P}/databases/db/tables", json={"identifier": _ident("f"), "schema": schema}, headers=admin
        )
    )
    listed = _ok(client.get(f"{P}/databases/db/tables/f/schemas", headers=admin))
    assert [s["id"] for s in listed["schemas"]] == [0] and listed["schemas"][0]["options"][
        "type"
    ] == "format-table"
    assert _ok(client.get(f"{P}/databases/db/tables/f/schemas/LATEST", headers=admin))["schema"]["id"] == 0


def _ident(name: str) -> dict[str, str]:
    return {"database": "db", "object": name}


# ---- semantic views ------------------------------------------------------------------------------------


def _definition(content: str = "a: b", fmt: str = "databricks-yaml") -> dict[str, Any]:
    return {"definition": {"format": fmt, "content": content}}


def _events(catalog: MetastoreCatalog) -> list[tuple[str, str, str, int]]:
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT object_type, identifier, event_type, version FROM paimon_catalog_object_events "
                "WHERE object_type = 'semantic-view' ORDER BY event_id"
            )
        )
        return [tuple(r) for r in rows]


def test_semantic_view_lifecycle(
    client: TestClient, admin: dict[str, str], service_catalog: MetastoreCatalog
) -> None:
    service_catalog.create_database("db")
    content = "model:\n  name: revenue\n  measures: [sum(x)]  # kept verbatim: ünïcode\n"
    created = _ok(client.post(f"{SV}/revenue", json=_definition(content), headers=admin))
    assert created == {"name": "revenue", "definition": {"format": "databricks-yaml", "content": content}}
    assert _ok(client.get(f"{SV}/revenue", headers=admin)) == created
    # the same definition again changes nothing; another replaces it whole
    _ok(client.post(f"{SV}/revenue", json=_definition(content), headers=admin))
    replaced = _ok(client.post(f"{SV}/revenue", json=_definition("b: c", "other"), headers=admin))
    assert replaced["definition"] == {"format": "other", "content": "b: c"}
    assert _ok(client.get(f"{SV}/revenue", headers=admin))["definition"] == replaced["definition"]

    for name in ("a1", "a2", "a3"):
        _ok(client.post(f"{SV}/{name}", json=_definition(), headers=admin))
    page = _ok(client.get(SV, params={"maxResults": 2}, headers=admin))
    assert page == {"semanticViews": ["a1", "a2"], "nextPageToken": "a2"}
    rest = _ok(client.get(SV, params={"maxResults": 2, "pageToken": "a2"}, headers=admin))
    assert rest == {"semanticViews": ["a3", "revenue"], "nextPageToken": None}

    _ok(client.delete(f"{SV}/revenue", headers=admin))
    _error(client.get(f"{SV}/revenue", headers=admin), 404, "SEMANTIC_VIEW")
    _error(client.delete(f"{SV}/revenue", headers=admin), 404, "SEMANTIC_VIEW")
    assert _events(service_catalog)[:3] == [
        ("semantic-view", "db.revenue", "created", 1),
        ("semantic-view", "db.revenue", "altered", 2),
        ("semantic-view", "db.a1", "created", 1),
    ]
    assert _events(service_catalog)[-1] == ("semantic-view", "db.revenue", "dropped", 2)


def test_semantic_view_refusals(
    client: TestClient, admin: dict[str, str], service_catalog: MetastoreCatalog
) -> None:
    service_catalog.create_database("db")
    _error(
        client.post(f"{P}/databases/nope/semantic-views/s", json=_definition(), headers=admin),
        404,
        "DATABASE",
    )
    _error(client.get(f"{P}/databases/nope/semantic-views", headers=admin), 404, "DATABASE")
    assert "content" in _error(client.post(f"{SV}/s", json=_definition("  "), headers=admin), 400)
    assert "format" in _error(client.post(f"{SV}/s", json=_definition(fmt=""), headers=admin), 400)
    _error(client.post(f"{SV}/s", json={"definition": {"format": "x"}}, headers=admin), 400)
    # 1 MiB of UTF-8, counted in bytes: a 2-byte character past half a MiB is over
    _ok(client.post(f"{SV}/big", json=_definition("x" * (1 << 20)), headers=admin))
    message = _error(client.post(f"{SV}/big", json=_definition("é" * ((1 << 19) + 1)), headers=admin), 413)
    assert "definition.content" in message
    assert _ok(client.get(f"{SV}/big", headers=admin))["definition"]["content"] == "x" * (1 << 20)

    # a SQL view and a semantic view never share a name, either way
    view = {"identifier": _ident("v"), "schema": {"query": "SELECT 1", "fields": []}}
    _ok(client.post(f"{P}/databases/db/views", json=view, headers=admin))
    assert "SQL view" in _error(
        client.post(f"{SV}/v", json=_definition(), headers=admin), 409, "SEMANTIC_VIEW"
    )
    _ok(client.post(f"{SV}/s2", json=_definition(), headers=admin))
    clash = {"identifier": _ident("s2"), "schema": {"query": "SELECT 1", "fields": []}}
    assert "semantic view" in _error(
        client.post(f"{P}/databases/db/views", json=clash, headers=admin), 409, "VIEW"
    )


def test_semantic_view_grants_and_database_drop(
    client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    service_catalog.create_database("db")
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))
    reader = auth(make_principal(service_catalog, "reader", [("read", "db", None)]))
    _ok(client.post(f"{SV}/s", json=_definition(), headers=admin))
    assert _ok(client.get(f"{SV}/s", headers=reader))["name"] == "s"
    _error(client.post(f"{SV}/s", json=_definition("z"), headers=reader), 403, "DATABASE")
    _error(client.delete(f"{SV}/s", headers=reader), 403, "VIEW")
    _ok(client.delete(f"{P}/databases/db", headers=admin))
    assert _events(service_catalog)[-1] == ("semantic-view", "db.s", "dropped", 1)


# ---- replace -------------------------------------------------------------------------------------------

FIELDS = [
    {"id": 0, "name": "k", "type": "BIGINT NOT NULL"},
    {"id": 1, "name": "p", "type": "STRING"},
    {"id": 2, "name": "w", "type": "DOUBLE"},
]


def test_replace_truncates_and_appends_the_schema(
    client: TestClient, admin: dict[str, str], service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog)
    before = service_catalog.get_table("db.t")
    body = {
        "schema": {"fields": FIELDS, "partitionKeys": ["p"], "options": {"bucket": "-1"}, "comment": "new"}
    }
    _ok(client.post(f"{T}/replace", json=body, headers=admin))
    after = service_catalog.get_table("db.t")
    assert after.schema.id == before.schema.id + 1 and [f.name for f in after.schema.fields] == [
        "k",
        "p",
        "w",
    ]
    assert after.schema.comment == "new" and after.schema.options.get("bucket") == "-1"
    latest = after.latest_snapshot()
    assert latest is not None and latest.commit_kind.value == "OVERWRITE" and latest.total_record_count == 0
    rb = after.new_read_builder()
    assert rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows == 0
    assert _ok(client.get(f"{T}/schemas/LATEST", headers=admin))["schema"]["id"] == after.schema.id
    # the old snapshots stay: time travel reads the data as it was
    assert before.latest_snapshot() is not None
    with service_catalog.engine.connect() as conn:
        runs = conn.execute(
            text("SELECT operation FROM paimon_maintenance_events WHERE operation = 'replace_table'")
        ).all()
    assert runs


def test_replace_refusals_and_recreate(
    client: TestClient, admin: dict[str, str], service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog)
    _error(
        client.post(
            f"{P}/databases/db/tables/nope/replace", json={"schema": {"fields": FIELDS}}, headers=admin
        ),
        404,
        "TABLE",
    )
    moved = {"schema": {"fields": FIELDS, "partitionKeys": ["k"]}}
    assert "partition keys" in _error(client.post(f"{T}/replace", json=moved, headers=admin), 501)
    assert service_catalog.get_table("db.t").schema.id == 0  # nothing changed
    writer = auth(make_principal(service_catalog, "writer", [("write", "db", "t")]))
    _error(
        client.post(
            f"{T}/replace", json={"schema": {"fields": FIELDS, "partitionKeys": ["p"]}}, headers=writer
        ),
        403,
        "TABLE",
    )
    # to another table type: dropped and created anew, as Java's dropAndCreateTable
    fmt = {"schema": {"fields": FIELDS, "options": {"type": "format-table", "file.format": "csv"}}}
    old_id = _ok(client.get(T, headers=admin))["id"]
    _ok(client.post(f"{T}/replace", json=fmt, headers=admin))
    now = _ok(client.get(T, headers=admin))
    assert now["id"] != old_id and now["schema"]["options"]["type"] == "format-table"


# ---- partition options ---------------------------------------------------------------------------------


def test_partition_options_are_refused_not_stored(
    client: TestClient, admin: dict[str, str], service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog)
    body = {
        "partitionSpecs": [{"p": "c"}],
        "partitionOptions": [{"path": "/elsewhere/p=c", "file.format": "csv"}],
    }
    assert "partitionOptions" in _error(client.post(f"{T}/partitions", json=body, headers=admin), 501)
    listed = _ok(client.get(f"{T}/partitions", headers=admin))
    assert {tuple(p["spec"].items()) for p in listed["partitions"]} == {(("p", "a"),), (("p", "b"),)}
