"""Tables across the catalog and a table's life beyond create, over HTTP in-process: ``table-details``,
the catalog-wide listing, a table by id (each filtered by the caller's grants, paged by key), registering
an existing table, rolling a schema back, and dropping a database with its tables. Every change is a
maintenance run in the log; every refusal leaves the catalog and storage as they were."""

from __future__ import annotations

import shutil
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import TableAlreadyExistsError
from paimon_meta.ops import audit
from paimon_meta.ops import tables as table_ops
from paimon_meta.table import schema_change
from paimon_meta.table.snapshots import SchemaManager
from tests.fixtures.service import make_principal
from tests.service.helpers import SCHEMA, P, auth, seed
from tests.service.test_views import view_body

pytestmark = pytest.mark.postgres

SMALL = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def _pages(
    client: TestClient, path: str, key: str, headers: dict[str, str], **params: Any
) -> list[list[Any]]:
    pages: list[list[Any]] = []
    token: str | None = None
    while True:
        query = dict(params) | ({"pageToken": token} if token else {})
        answer = client.get(path, params=query, headers=headers)
        assert answer.status_code == 200, answer.text
        pages.append(answer.json()[key])
        token = answer.json()["nextPageToken"]
        if token is None:
            return pages


def _runs(catalog: MetastoreCatalog, identifier: str) -> list[tuple[str, str]]:
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT operation, event_type FROM paimon_maintenance_events "
                "WHERE table_identifier = :t ORDER BY event_id"
            ),
            {"t": identifier},
        )
        return [(r.operation, r.event_type) for r in rows]


@pytest.fixture
def catalog_of_tables(service_catalog: MetastoreCatalog) -> MetastoreCatalog:
    for db in ("a", "b", "c"):
        service_catalog.create_database(db)
    for i in range(7):
        service_catalog.create_table(f"a.t{i}", SMALL)
    service_catalog.create_table("b.x", SMALL, options={"type": "table"})
    service_catalog.create_table("b.y", SMALL)
    service_catalog.create_table("c.z", SMALL)
    return service_catalog


def test_global_listing_pages_by_key_and_shows_only_readable_tables(
    service_client: TestClient, catalog_of_tables: MetastoreCatalog
) -> None:
    admin = auth(make_principal(catalog_of_tables, "root", [("admin", None, None)]))
    pages = _pages(service_client, f"{P}/tables", "tables", admin, maxResults=3)
    names = [f"{t['database']}.{t['object']}" for page in pages for t in page]
    assert names == [f"a.t{i}" for i in range(7)] + ["b.x", "b.y", "c.z"]
    assert [len(p) for p in pages] == [3, 3, 3, 1]

    # a table grant and a database grant: only those tables, pages still full until the end
    some = auth(make_principal(catalog_of_tables, "some", [("read", "a", "t5"), ("read", "b", None)]))
    pages = _pages(service_client, f"{P}/tables", "tables", some, maxResults=2)
    assert [[f"{t['database']}.{t['object']}" for t in p] for p in pages] == [["a.t5", "b.x"], ["b.y"]]
    nobody = auth(make_principal(catalog_of_tables, "nobody"))
    assert _pages(service_client, f"{P}/tables", "tables", nobody) == [[]]
    # the same reach (read through the grants, not the registry) with patterns and a database filter
    found = _pages(service_client, f"{P}/tables", "tables", some, tableNamePattern="%y%")
    assert [(t["database"], t["object"]) for t in found[0]] == [("b", "y")]
    found = _pages(service_client, f"{P}/tables", "tables", some, databaseNamePattern="a")
    assert [(t["database"], t["object"]) for t in found[0]] == [("a", "t5")]
    details = _pages(service_client, f"{P}/databases/b/table-details", "tableDetails", some, maxResults=1)
    assert [[d["name"] for d in p] for p in details] == [["x"], ["y"]]

    # patterns on both names (SQL LIKE)
    found = _pages(
        service_client, f"{P}/tables", "tables", admin, databaseNamePattern="a%", tableNamePattern="t_"
    )
    assert [t["object"] for t in found[0]] == [f"t{i}" for i in range(7)]
    found = _pages(service_client, f"{P}/tables", "tables", admin, tableNamePattern="%y%")
    assert [(t["database"], t["object"]) for t in found[0]] == [("b", "y")]

    for bad in ({"pageToken": "no-dot"}, {"pageToken": "a.t'"}, {"maxResults": 0}, {"maxResults": 5000}):
        answer = service_client.get(f"{P}/tables", params=bad, headers=admin)
        assert answer.status_code == 400, (bad, answer.text)


def test_table_details_answer_each_table_as_get_does(
    service_client: TestClient, catalog_of_tables: MetastoreCatalog
) -> None:
    admin = auth(make_principal(catalog_of_tables, "root", [("admin", None, None)]))
    pages = _pages(service_client, f"{P}/databases/a/table-details", "tableDetails", admin, maxResults=4)
    assert [len(p) for p in pages] == [4, 3]
    details = [d for p in pages for d in p]
    for detail in details:
        single = service_client.get(f"{P}/databases/a/tables/{detail['name']}", headers=admin).json()
        assert detail == single
        assert detail["database"] == "a"

    # tableType: the schema's `type`, "table" when unset; other types are simply not there
    tables = _pages(
        service_client, f"{P}/databases/b/table-details", "tableDetails", admin, tableType="table"
    )
    assert [d["name"] for d in tables[0]] == ["x", "y"]
    assert _pages(
        service_client, f"{P}/databases/b/table-details", "tableDetails", admin, tableType="format-table"
    ) == [[]]

    reader = auth(make_principal(catalog_of_tables, "reader", [("read", "a", "t1")]))
    only = _pages(service_client, f"{P}/databases/a/table-details", "tableDetails", reader)
    assert [d["name"] for d in only[0]] == ["t1"]
    refused = service_client.get(f"{P}/databases/c/table-details", headers=reader)
    assert refused.status_code == 403
    missing = service_client.get(f"{P}/databases/nope/table-details", headers=admin)
    assert missing.status_code == 404 and missing.json()["resourceType"] == "DATABASE", missing.text


def _summary(catalog: MetastoreCatalog, identifier: str) -> tuple[int | None, int | None]:
    """(the row's schema id, its stored schema summary's id)."""
    database, name = identifier.split(".")
    with catalog.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT schema_id, (schema_summary ->> 'id')::int AS summary_id FROM paimon_tables "
                "WHERE database_name = :d AND table_name = :n"
            ),
            {"d": database, "n": name},
        ).one()
    return row.schema_id, row.summary_id


def test_table_details_answer_from_the_stored_schemas(
    service_client: TestClient, catalog_of_tables: MetastoreCatalog, tmp_path: Any
) -> None:
    """Issue 39 item 5: the first listing stores each table's schema in the registry; later ones read no
    schema file (a table whose schema directory is gone is still listed, as it was); an ALTER through
    the catalog stores its schema; a schema the row's summary does not match (an ALTER of the previous
    release, which records only the schema id) is read from storage and stored then."""
    admin = auth(make_principal(catalog_of_tables, "root", [("admin", None, None)]))
    path = f"{P}/databases/a/table-details"
    assert _summary(catalog_of_tables, "a.t0") == (0, None)
    first = _pages(service_client, path, "tableDetails", admin)[0]
    assert _summary(catalog_of_tables, "a.t0") == (0, 0)

    table = catalog_of_tables.get_table("a.t0")
    schema_dir = f"{table.path}/schema"
    moved = tmp_path / "schema"
    shutil.move(schema_dir, moved)
    try:
        assert _pages(service_client, path, "tableDetails", admin)[0] == first  # no file read
    finally:
        shutil.move(moved, schema_dir)

    catalog_of_tables.alter_table_changes("a.t0", [schema_change.SetOption("k1", "v1")])
    assert _summary(catalog_of_tables, "a.t0") == (1, 1)
    listed = {d["name"]: d for d in _pages(service_client, path, "tableDetails", admin)[0]}
    assert listed["t0"]["schema"]["options"]["k1"] == "v1"
    assert listed["t0"] == service_client.get(f"{P}/databases/a/tables/t0", headers=admin).json()

    # the previous release's ALTER: schema-2 on storage and the row's schema id, no summary
    latest = SchemaManager(table.file_io, table.path).latest()
    assert latest is not None
    assert SchemaManager(table.file_io, table.path).commit_new_schema(
        replace(latest, id=2, options={**latest.options, "k2": "v2"})
    )
    catalog_of_tables.registry.set_schema_id(table_id_of(catalog_of_tables, "a.t0"), 2)
    assert _summary(catalog_of_tables, "a.t0") == (2, 1)
    listed = {d["name"]: d for d in _pages(service_client, path, "tableDetails", admin)[0]}
    assert listed["t0"]["schema"]["options"]["k2"] == "v2"
    assert _summary(catalog_of_tables, "a.t0") == (2, 2)
    assert listed["t0"] == service_client.get(f"{P}/databases/a/tables/t0", headers=admin).json()


def table_id_of(catalog: MetastoreCatalog, identifier: str) -> int:
    database, name = identifier.split(".")
    return catalog.registry.get_table_row(database, name).table_id


def test_a_table_by_its_id(service_client: TestClient, catalog_of_tables: MetastoreCatalog) -> None:
    admin = auth(make_principal(catalog_of_tables, "root", [("admin", None, None)]))
    reader = auth(make_principal(catalog_of_tables, "reader", [("read", "b", None)]))
    got = service_client.get(f"{P}/databases/b/tables/y", headers=admin).json()
    by_id = service_client.get(f"{P}/tables/id/{got['id']}", headers=reader)
    assert by_id.status_code == 200 and by_id.json() == got

    # without a read grant it is not there (an id must not tell whether a table exists)
    other = service_client.get(f"{P}/databases/a/tables/t0", headers=admin).json()
    hidden = service_client.get(f"{P}/tables/id/{other['id']}", headers=reader)
    assert hidden.status_code == 404 and hidden.json()["resourceType"] == "TABLE"
    for unknown in ("00000000-0000-0000-0000-000000000000", "table-99999", "table-x", "garbage"):
        answer = service_client.get(f"{P}/tables/id/{unknown}", headers=admin)
        assert answer.status_code == 404 and answer.json()["resourceType"] == "TABLE", (unknown, answer.text)

    # a row Java inserted (no uuid) answers with ``table-<row id>`` and is found by it
    with catalog_of_tables.engine.begin() as conn:
        conn.execute(text("UPDATE paimon_tables SET table_uuid = NULL WHERE table_name = 'z'"))
    java = service_client.get(f"{P}/databases/c/tables/z", headers=admin).json()
    assert java["id"].startswith("table-")
    assert service_client.get(f"{P}/tables/id/{java['id']}", headers=admin).json() == java


def _unregistered_table(catalog: MetastoreCatalog) -> str:
    """``old.events`` with 2 snapshots, then its row removed and its files left: a table the catalog does
    not know (as after a metastore restored from an older backup); returns its location."""
    catalog.create_database("old")
    table = catalog.create_table("old.events", SMALL)
    for k in (1, 2):
        wb = table.new_batch_write_builder()
        write, commit = wb.new_write(), wb.new_commit()
        write.write_arrow(pa.table({"k": pa.array([k], pa.int64()), "v": [f"v{k}"]}))
        commit.commit(write.prepare_commit())
        write.close()
    catalog.registry.drop_table_row("old", "events")
    return table.path


def test_register_adopts_an_existing_table_and_refuses_what_would_share_files(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    service_catalog.create_database("db")
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    location = _unregistered_table(service_catalog)

    body = {"identifier": {"database": "db", "object": "events"}, "path": location}
    reader = auth(make_principal(service_catalog, "reader", [("write", "db", None)]))
    assert service_client.post(f"{P}/databases/db/register", json=body, headers=reader).status_code == 403
    answer = service_client.post(f"{P}/databases/db/register", json=body, headers=admin)
    assert answer.status_code == 200, answer.text
    table = service_catalog.get_table("db.events")
    assert table.path == location and table.snapshot_manager.latest_snapshot_id() == 2
    rb = table.new_read_builder()
    assert sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist()) == [1, 2]
    assert _runs(service_catalog, "db.events") == [
        ("register_table", "started"),
        ("register_table", "finished"),
    ]

    # our next commit builds on the adopted snapshots and records them (external) before its own
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([3], pa.int64()), "v": ["v3"]}))
    commit.commit(write.prepare_commit())
    write.close()
    assert service_catalog.table_row("db.events").latest_snapshot_id == 3
    kinds = [
        (e["event_type"], e["snapshot_id"])
        for e in audit.commit_events(service_catalog.engine, table="db.events")
    ]
    assert ("snapshot_published", 3) in kinds

    def refused(payload: dict[str, Any], status: int, words: str) -> None:
        answer = service_client.post(f"{P}/databases/db/register", json=payload, headers=admin)
        assert answer.status_code == status and words in answer.json()["message"], answer.text

    again = {"identifier": {"database": "db", "object": "copy"}, "path": location}
    refused(again, 409, "overlaps the files of table db.events")
    refused(
        {"identifier": {"database": "db", "object": "inner"}, "path": f"{location}/schema"},
        400,
        "not a table directory",
    )
    refused({"identifier": {"database": "db", "object": "events"}, "path": location}, 409, "already exists")
    empty = service_catalog.table_location("old", "nothing")
    refused({"identifier": {"database": "db", "object": "nothing"}, "path": empty}, 400, "no Paimon table")
    refused(
        {"identifier": {"database": "db", "object": "out"}, "path": "/etc/passwd-dir/t"},
        400,
        "outside the warehouse",
    )
    refused(
        {"identifier": {"database": "other", "object": "x"}, "path": location}, 400, "identifier.database"
    )
    dotted = f"{service_catalog.warehouse}/old.db/../old.db/events"
    refused({"identifier": {"database": "db", "object": "dots"}, "path": dotted}, 400, "'..'")
    # a table of the catalog (created here) holds its files too
    service_catalog.create_table("db.mine", SMALL)
    refused(
        {
            "identifier": {"database": "db", "object": "mine2"},
            "path": service_catalog.table_location("db", "mine"),
        },
        409,
        "overlaps",
    )
    missing_db = service_client.post(
        f"{P}/databases/nodb/register",
        json={"identifier": {"database": "nodb", "object": "x"}, "path": location},
        headers=admin,
    )
    assert missing_db.status_code == 404 and missing_db.json()["resourceType"] == "DATABASE"
    assert sorted(service_catalog.list_tables("db")) == ["events", "mine"]


def test_rollback_schema_deletes_later_schemas_only_when_nothing_uses_them(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog)  # snapshot 1 on schema 0
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    table = service_catalog.get_table("db.t")
    service_catalog.alter_table_changes("db.t", [schema_change.SetOption("k1", "v1")])
    service_catalog.alter_table_changes("db.t", [schema_change.SetOption("k2", "v2")])
    schemas = SchemaManager(table.file_io, table.path)
    assert schemas.list_ids() == [0, 1, 2]
    path = f"{P}/databases/db/tables/t/rollback-schema"

    answer = service_client.post(path, json={"schemaId": 1}, headers=admin)
    assert answer.status_code == 200, answer.text
    assert schemas.list_ids() == [0, 1] and service_catalog.table_row("db.t").schema_id == 1
    assert "k2" not in service_catalog.get_table("db.t").schema.options

    # a snapshot on schema 1 keeps it
    service_catalog.alter_table_changes("db.t", [schema_change.SetOption("k3", "v3")])  # schema 2 again
    t = service_catalog.get_table("db.t")
    wb = t.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([9], pa.int64()), "p": ["a"], "v": ["n"]}))
    commit.commit(write.prepare_commit())
    write.close()
    conflict = service_client.post(path, json={"schemaId": 0}, headers=admin)
    assert conflict.status_code == 409 and "schema 2 is still used" in conflict.json()["message"], (
        conflict.text
    )
    assert schemas.list_ids() == [0, 1, 2]

    missing = service_client.post(path, json={"schemaId": 7}, headers=admin)
    assert missing.status_code == 404 and missing.json()["resourceType"] == "SCHEMA", missing.text
    assert service_client.post(path, json={"schemaId": -1}, headers=admin).status_code == 400
    writer = auth(make_principal(service_catalog, "writer", [("write", "db", "t")]))
    assert service_client.post(path, json={"schemaId": 2}, headers=writer).status_code == 403
    runs = [r for r in _runs(service_catalog, "db.t") if r[0] == "rollback_schema"]
    assert runs == [
        ("rollback_schema", "started"),
        ("rollback_schema", "finished"),
        ("rollback_schema", "started"),
        ("rollback_schema", "failed"),
        ("rollback_schema", "started"),
        ("rollback_schema", "failed"),
    ]


def test_dropping_a_database_drops_its_tables_each_recorded(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog, "db.t")
    seed(service_catalog, "db.u")
    service_catalog.create_database("keep")
    service_catalog.create_table("keep.k", SCHEMA)
    locations = [service_catalog.get_table(i).path for i in ("db.t", "db.u")]
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    for name in ("v1", "v2"):
        made = service_client.post(f"{P}/databases/db/views", json=view_body("db", name), headers=admin)
        assert made.is_success, made.text
    assert service_client.post(
        f"{P}/databases/keep/views", json=view_body("keep", "kv"), headers=admin
    ).is_success
    # a table may not take a view's name (Java's JdbcCatalog refuses it), by create or by rename
    with pytest.raises(TableAlreadyExistsError, match=r"a view db\.v1"):
        service_catalog.create_table("db.v1", SCHEMA)
    with pytest.raises(TableAlreadyExistsError, match=r"a view db\.v2"):
        service_catalog.rename_table("db.u", "db.v2")
    writer = auth(make_principal(service_catalog, "w", [("write", "db", None)]))
    assert service_client.delete(f"{P}/databases/db", headers=writer).status_code == 403
    assert service_catalog.list_tables("db") == ["t", "u"]

    answer = service_client.delete(f"{P}/databases/db", headers=admin)
    assert answer.status_code == 200, answer.text
    assert "db" not in service_catalog.list_databases() and service_catalog.list_tables("keep") == ["k"]
    # the tables went to the recycle bin with their files; purged, the files are gone
    assert sorted(d.identifier for d in service_catalog.recycle_bin.entries()) == ["db.t", "db.u"]
    for location in locations:
        assert service_catalog.file_io.list_recursive(location)
    for identifier in ("db.t", "db.u"):
        assert _runs(service_catalog, identifier)[-2:] == [
            ("drop_table", "started"),
            ("drop_table", "finished"),
        ]
        table_ops.purge_table(service_catalog, identifier)
    for location in locations:
        assert not service_catalog.file_io.list_recursive(location)
    with service_catalog.engine.connect() as conn:
        drops = (
            conn.execute(
                text(
                    "SELECT DISTINCT payload->>'database_drop' FROM paimon_maintenance_events "
                    "WHERE operation = 'drop_table' AND event_type = 'started'"
                )
            )
            .scalars()
            .all()
        )
    assert len(drops) == 1 and drops[0]  # one database drop, named by each of its table drops
    # its views went with it, each a dropped event naming the principal; another database's stayed
    assert service_client.get(f"{P}/views", headers=admin).json()["views"] == [
        {"database": "keep", "object": "kv"}
    ]
    with service_catalog.engine.connect() as conn:
        events = conn.execute(
            text(
                "SELECT identifier, principal FROM paimon_catalog_object_events "
                "WHERE event_type = 'dropped' ORDER BY identifier"
            )
        ).all()
    assert [tuple(e) for e in events] == [("db.v1", "root"), ("db.v2", "root")]
    gone = service_client.delete(f"{P}/databases/db", headers=admin)
    assert gone.status_code == 404 and gone.json()["resourceType"] == "DATABASE"
