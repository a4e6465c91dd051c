"""Format, object and Iceberg tables over HTTP in-process: kept as metadata only (the schema in the
registry row, nothing written into the table's directory), created, read, altered (versioned by
compare-and-set), renamed, listed by type and dropped (a managed table's files deleted, an external
one's left); every operation that needs Paimon's layout answers 501 naming the type."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import UnsupportedError
from paimon_meta.ops import tables as table_ops
from tests.fixtures.service import FAST_LOCK, in_process_client, make_principal
from tests.service.helpers import P, auth

pytestmark = pytest.mark.postgres

FIELDS = [{"id": 0, "name": "id", "type": "BIGINT"}, {"id": 1, "name": "name", "type": "STRING"}]


@pytest.fixture
def external_root(tmp_path: Path) -> Path:
    root = tmp_path / "external"
    root.mkdir()
    return root


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path, external_root: Path) -> Iterator[MetastoreCatalog]:
    cat = paimon_meta.connect(
        clean_db,
        str(tmp_path / "warehouse"),
        **FAST_LOCK,
        **{"external-roots.allowed": f"file://{external_root}"},
    )
    cat.create_database("db")
    try:
        yield cat
    finally:
        cat.close()


@pytest.fixture
def client(catalog: MetastoreCatalog) -> Iterator[TestClient]:
    with in_process_client(catalog) as c:
        yield c


@pytest.fixture
def admin(catalog: MetastoreCatalog) -> dict[str, str]:
    return auth(make_principal(catalog, "admin", [("admin", None, None)]))


def _create(
    client: TestClient, admin: dict[str, str], name: str, options: dict[str, str], fields: Any = FIELDS
) -> Any:
    body = {
        "identifier": {"database": "db", "object": name},
        "schema": {"fields": fields, "partitionKeys": [], "primaryKeys": [], "options": options},
    }
    return client.post(f"{P}/databases/db/tables", json=body, headers=admin)


def test_a_format_table_is_metadata_only(
    client: TestClient, catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    assert _create(client, admin, "csv", {"type": "format-table", "file.format": "csv"}).is_success
    got = client.get(f"{P}/databases/db/tables/csv", headers=admin).json()
    assert got["schema"]["options"] == {"type": "format-table", "file.format": "csv"}
    assert [f["name"] for f in got["schema"]["fields"]] == ["id", "name"] and got["schemaId"] == 0
    assert got["path"] == catalog.table_location("db", "csv") and got["isExternal"] is False
    assert not Path(got["path"]).exists()  # nothing of ours in the directory its clients read
    # what needs Paimon's layout is refused by the table's type
    for path in ("snapshot", "tags", "branches"):
        answer = client.get(f"{P}/databases/db/tables/csv/{path}", headers=admin)
        assert answer.status_code == 501 and "format-table" in answer.json()["message"], (path, answer.text)
    with pytest.raises(UnsupportedError, match="format-table"):
        catalog.get_table("db.csv")

    changes = [
        {"action": "setOption", "key": "csv.field-delimiter", "value": ";"},
        {"action": "addColumn", "fieldNames": ["extra"], "dataType": "INT"},
    ]
    assert client.post(f"{P}/databases/db/tables/csv", json={"changes": changes}, headers=admin).is_success
    got = client.get(f"{P}/databases/db/tables/csv", headers=admin).json()
    assert got["schemaId"] == 1 and got["schema"]["options"]["csv.field-delimiter"] == ";"
    assert got["schema"]["fields"][-1] == {"id": 2, "name": "extra", "type": "INT"}
    retype = [{"action": "setOption", "key": "type", "value": "table"}]
    assert (
        client.post(f"{P}/databases/db/tables/csv", json={"changes": retype}, headers=admin).status_code
        == 400
    )
    assert client.get(f"{P}/databases/db/tables/csv", headers=admin).json()["schemaId"] == 1

    # listed with the others, and by type
    catalog.create_table("db.paimon", pa.schema([("k", pa.int64())]))
    details = client.get(f"{P}/databases/db/table-details", headers=admin).json()["tableDetails"]
    assert [d["name"] for d in details] == ["csv", "paimon"]
    only = client.get(f"{P}/databases/db/table-details", params={"tableType": "format-table"}, headers=admin)
    assert [d["name"] for d in only.json()["tableDetails"]] == ["csv"]
    by_id = client.get(f"{P}/tables/id/{got['id']}", headers=admin).json()
    assert by_id == got

    # renamed: the row and its schema move, the location stays; dropped: a managed table's files go
    rename = {
        "source": {"database": "db", "object": "csv"},
        "destination": {"database": "db", "object": "c2"},
    }
    assert client.post(f"{P}/tables/rename", json=rename, headers=admin).is_success
    moved = client.get(f"{P}/databases/db/tables/c2", headers=admin).json()
    assert moved["schema"] == got["schema"] and moved["path"] == got["path"]
    Path(got["path"]).mkdir(parents=True)
    (Path(got["path"]) / "part-0.csv").write_text("1;a;1\n")
    assert client.delete(f"{P}/databases/db/tables/c2", headers=admin).is_success
    assert any(Path(got["path"]).rglob("*.csv"))  # in the recycle bin until purged
    table_ops.purge_table(catalog, "db.c2")
    assert not any(Path(got["path"]).rglob("*.csv"))


def test_object_iceberg_and_external_tables(
    client: TestClient, catalog: MetastoreCatalog, admin: dict[str, str], external_root: Path
) -> None:
    # an object table has no columns of its own
    assert _create(client, admin, "objects", {"type": "object-table"}, fields=[]).is_success
    assert client.get(f"{P}/databases/db/tables/objects", headers=admin).json()["schema"]["fields"] == []
    assert _create(client, admin, "ice", {"type": "iceberg-table"}).is_success

    # an external format table: under an allowed root, its files left by a drop
    where = external_root / "sales"
    where.mkdir()
    (where / "a.parquet").write_bytes(b"PAR1")
    assert _create(client, admin, "ext", {"type": "format-table", "path": f"file://{where}"}).is_success
    got = client.get(f"{P}/databases/db/tables/ext", headers=admin).json()
    assert got["path"] == f"file://{where}" and got["isExternal"] is True
    assert "path" not in got["schema"]["options"]  # the location is the row's, answered as `path`
    inside = _create(client, admin, "inner", {"type": "format-table", "path": f"file://{where}/2026"})
    assert inside.status_code == 409 and "overlaps the files of table db.ext" in inside.json()["message"]
    assert client.delete(f"{P}/databases/db/tables/ext", headers=admin).is_success
    table_ops.purge_table(catalog, "db.ext")  # an external table's files are its owner's, purged or not
    assert (where / "a.parquet").exists()

    refusals = [
        ({"type": "format-table", "file.format": "avro"}, FIELDS, 400, "not a format of format tables"),
        ({"type": "format-table", "path": "file:///elsewhere/t"}, FIELDS, 400, "path"),
        ({"type": "format-table", "path": f"file://{catalog.warehouse}/db.db/x"}, FIELDS, 400, "warehouse"),
        ({"type": "table"}, [], 400, "at least one column"),
    ]
    for options, fields, status, words in refusals:
        answer = _create(client, admin, "bad", options, fields)
        assert answer.status_code == status and words in answer.json()["message"], (options, answer.text)
    assert sorted(catalog.list_tables("db")) == ["ice", "objects"]
