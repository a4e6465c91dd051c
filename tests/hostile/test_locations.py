"""Hostile-client probes, locations (issue 34, items 1 and 5): an admin of one database registers a
table whose path is another table's directory spelled differently (``//``, ``/./``, a trailing separator,
an upper-case scheme, ``s3a``, percent-encoding), or whose drop would delete another table's files; and
metadata-only tables (object, format) whose options place files in another table or outside the
warehouse. Each spelling must answer 409 with the protocol's error body, with nothing written; a drop
must never delete a file another row's location holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.io import location_key, normalise_uri
from tests.fixtures.service import FAST_LOCK, in_process_client, make_principal
from tests.service.helpers import P, auth

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def _victim(catalog: MetastoreCatalog) -> str:
    """``db1.t1`` with one snapshot, and an empty ``db2``; returns db1.t1's location."""
    catalog.create_database("db1")
    catalog.create_database("db2")
    table = catalog.create_table("db1.t1", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
    wb = table.new_batch_write_builder()
    write = wb.new_write()
    write.write_arrow(pa.table({"k": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}))
    wb.new_commit().commit(write.prepare_commit())
    write.close()
    return table.path


def _files(catalog: MetastoreCatalog, location: str) -> list[tuple[str, int]]:
    return sorted((s.path, s.size) for s in catalog.table_file_io(location).list_recursive(location))


def _keys(catalog: MetastoreCatalog, identifier: str) -> list[int]:
    rb = catalog.get_table(identifier).new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist())


def _assert_refused(answer: Any, words: str) -> None:
    assert answer.status_code == 409, answer.text
    body = answer.json()
    # the protocol's error body, naming the table that holds the files
    assert body["code"] == 409 and body["resourceType"] == "TABLE", body
    assert words in body["message"], body


def _register(client: TestClient, headers: dict[str, str], name: str, path: str) -> Any:
    body = {"identifier": {"database": "db2", "object": name}, "path": path}
    return client.post(f"{P}/databases/db2/register", json=body, headers=headers)


def _spellings(location: str) -> list[str]:
    """Other spellings of ``location`` (``<base>/db1.db/t1``)."""
    base = location[: -len("/db1.db/t1")]
    scheme, sep, rest = base.partition("://")
    upper = f"{scheme.upper()}{sep}{rest}" if sep else f"FILE://{base}"
    return [
        f"{base}//db1.db/t1",
        f"{base}/./db1.db/t1",
        f"{base}/db1.db/t1/",
        f"{base}/db1.db//t1//",
        f"{base}/db1.db/./t1/.",
        f"{upper}/db1.db/t1",
        f"{base}/db1.db/%74%31",  # percent-encoded "t1"
    ]


def _refuses_every_spelling(catalog: MetastoreCatalog, client: TestClient, location: str) -> None:
    admin_db2 = auth(make_principal(catalog, "db2-admin", [("admin", "db2", None)]))
    before = _files(catalog, location)
    spellings = _spellings(location)
    if location.startswith("s3://"):
        spellings.append("s3a://" + location[len("s3://") :])
    for i, spelling in enumerate(spellings):
        _assert_refused(_register(client, admin_db2, f"stolen{i}", spelling), "db1.t1")
    assert catalog.list_tables("db2") == []
    assert _files(catalog, location) == before  # nothing written into the victim's directory
    with catalog.engine.connect() as conn:
        runs = conn.execute(text("SELECT count(*) FROM paimon_maintenance_events")).scalar_one()
    assert runs == 0  # no run recorded for a refused register
    assert _keys(catalog, "db1.t1") == [1, 2]


def test_register_refuses_other_spellings_of_a_table_on_a_local_warehouse(
    clean_db: str, tmp_path: Path
) -> None:
    with (
        paimon_meta.connect(clean_db, str(tmp_path / "warehouse"), **FAST_LOCK) as catalog,
        in_process_client(catalog) as client,
    ):
        location = _victim(catalog)
        _refuses_every_spelling(catalog, client, location)
        # the file:// form is the same place too
        admin = auth(make_principal(catalog, "root", [("admin", None, None)]))
        _assert_refused(_register(client, admin, "viauri", f"file://{location}"), "db1.t1")


@pytest.mark.s3
def test_register_refuses_other_spellings_of_a_table_on_an_s3_warehouse(
    clean_db: str, s3_warehouse: tuple[str, dict[str, str]]
) -> None:
    uri, options = s3_warehouse
    with (
        paimon_meta.connect(clean_db, uri, **FAST_LOCK, **options) as catalog,
        in_process_client(catalog) as client,
    ):
        location = _victim(catalog)
        assert location.startswith("s3://")
        _refuses_every_spelling(catalog, client, location)


@pytest.fixture
def local_catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    with paimon_meta.connect(clean_db, str(tmp_path / "warehouse"), **FAST_LOCK) as catalog:
        yield catalog


def _legacy_row(catalog: MetastoreCatalog, database: str, name: str, location: str) -> None:
    """A row as an earlier version (or a replica not yet upgraded) inserted it: the location as the
    client spelled it."""
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_tables (catalog_key, database_name, table_name, location, table_uuid,"
                " schema_id) VALUES ('jdbc', :d, :n, :l, gen_random_uuid(), 0)"
            ),
            {"d": database, "n": name, "l": location},
        )


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "normalised-by-0014"])
@pytest.mark.parametrize("spelling", ["{wh}//db1.db/t1", "{wh}/db1.db/t1/", "{wh}/db1.db/", "{wh}//db1.db"])
def test_a_drop_never_deletes_another_tables_files(
    local_catalog: MetastoreCatalog, spelling: str, keyed: bool
) -> None:
    """A row that shares (or contains) db1.t1's directory under another spelling, as the hole left them
    (``keyed``: as migration 0014 leaves it, normal form and key; else as a replica not yet upgraded
    inserts it): dropping it removes the row and leaves every file db1.t1 holds."""
    catalog = local_catalog
    location = _victim(catalog)
    before = _files(catalog, location)
    _legacy_row(catalog, "db2", "stolen", spelling.format(wh=catalog.warehouse))
    if keyed:
        with catalog.engine.begin() as conn:
            legacy = conn.execute(text("SELECT location FROM paimon_tables WHERE table_name = 'stolen'"))
            raw = legacy.scalar_one()
            conn.execute(
                text("UPDATE paimon_tables SET location = :l, location_key = :k WHERE table_name = 'stolen'"),
                {"l": normalise_uri(raw), "k": location_key(raw)},
            )
    with in_process_client(catalog) as client:
        admin_db2 = auth(make_principal(catalog, "db2-admin", [("admin", "db2", None)]))
        answer = client.delete(f"{P}/databases/db2/tables/stolen", headers=admin_db2)
        assert answer.status_code == 200, answer.text
    assert catalog.list_tables("db2") == []
    assert _files(catalog, location) == before
    assert _keys(catalog, "db1.t1") == [1, 2]


def test_a_drop_keeps_the_files_of_a_table_nested_inside_it(local_catalog: MetastoreCatalog) -> None:
    """A legacy row at a directory inside db1.t1's: dropping db1.t1 deletes its own files and none under
    the nested row's root."""
    catalog = local_catalog
    location = _victim(catalog)
    nested = Path(location) / "inner"
    nested.mkdir()
    (nested / "keep.bin").write_bytes(b"x")
    _legacy_row(catalog, "db2", "inner", f"{location}//inner/")
    catalog.drop_table("db1.t1")
    assert [p for p, _ in _files(catalog, location)] == [str(nested / "keep.bin")]


# ---- metadata-only tables: the same placement policy as Paimon tables (item 5) ----------------------


def _create(client: TestClient, headers: dict[str, str], name: str, options: dict[str, str]) -> Any:
    fields = [] if options.get("type") == "object-table" else [{"id": 0, "name": "id", "type": "BIGINT"}]
    body = {
        "identifier": {"database": "db2", "object": name},
        "schema": {"fields": fields, "partitionKeys": [], "primaryKeys": [], "options": options},
    }
    return client.post(f"{P}/databases/db2/tables", json=body, headers=headers)


def test_metadata_only_tables_follow_the_placement_policy(local_catalog: MetastoreCatalog) -> None:
    catalog = local_catalog
    location = _victim(catalog)
    with in_process_client(catalog) as client:
        admin_db2 = auth(make_principal(catalog, "db2-admin", [("admin", "db2", None)]))
        refusals = [
            ({"type": "object-table", "object-location": "/etc"}, "object-location"),
            ({"type": "object-table", "object-location": location}, "object-location"),
            (
                {"type": "object-table", "object-location": f"{catalog.warehouse}//db1.db/t1"},
                "object-location",
            ),
            ({"type": "format-table", "data-file.external-paths": "/etc"}, "data-file.external-paths"),
            (
                {"type": "format-table", "data-file.path-directory": "../../db1.db/t1"},
                "data-file.path-directory",
            ),
            ({"type": "iceberg-table", "data-file.external-paths": location}, "data-file.external-paths"),
        ]
        for i, (options, option) in enumerate(refusals):
            answer = _create(client, admin_db2, f"m{i}", options)
            assert answer.status_code == 400, (options, answer.text)
            assert option in answer.json()["message"], (options, answer.text)
        assert catalog.list_tables("db2") == []
        # what CREATE refuses, ALTER refuses too, and the same options pass both when they stay inside
        assert _create(client, admin_db2, "objects", {"type": "object-table"}).is_success
        alter = client.post(
            f"{P}/databases/db2/tables/objects",
            json={"changes": [{"action": "setOption", "key": "object-location", "value": "/etc"}]},
            headers=admin_db2,
        )
        assert alter.status_code == 400 and "object-location" in alter.json()["message"], alter.text
    assert _keys(catalog, "db1.t1") == [1, 2]
