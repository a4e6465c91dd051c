"""The partition lifecycle over HTTP in-process, with the protocol's bodies: create (register empty
partitions, idempotent), mark done (recorded, listed, the table's mark-done action performed), list by
names, drop (one OVERWRITE snapshot through the commit path, then the registrations gone), paging,
grants, and the error bodies of every refusal (which changes nothing)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.ops.partitions import success_file_path
from paimon_meta.table.schema_change import SetOption
from tests.fixtures.service import in_process_client, make_principal
from tests.service.helpers import SCHEMA, P, auth, seed

pytestmark = pytest.mark.postgres

T = f"{P}/databases/db/tables/t"


@pytest.fixture
def rig(service_catalog: MetastoreCatalog) -> Any:
    service_catalog.create_database("db")
    seed(service_catalog)  # partitions a (2 rows) and b (1 row)
    writer = auth(make_principal(service_catalog, "writer", [("write", "db", "t")]))
    reader = auth(make_principal(service_catalog, "reader", [("read", "db", "t")]))
    with in_process_client(service_catalog) as client:
        yield service_catalog, client, writer, reader


def _listed(client: TestClient, headers: dict[str, str], **params: Any) -> dict[str, dict[str, Any]]:
    answer = client.get(f"{T}/partitions", params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    return {"/".join(f"{k}={v}" for k, v in p["spec"].items()): p for p in answer.json()["partitions"]}


def _runs(catalog: MetastoreCatalog, operation: str) -> list[tuple[str, dict[str, Any], str | None]]:
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT event_type, payload, principal FROM paimon_maintenance_events "
                "WHERE operation = :o ORDER BY event_id"
            ),
            {"o": operation},
        )
        return [(r.event_type, r.payload, r.principal) for r in rows]


def _registered(catalog: MetastoreCatalog) -> int:
    with catalog.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM paimon_partitions")).scalar_one())


def test_create_registers_empty_partitions_idempotently(rig: Any) -> None:
    catalog, client, writer, reader = rig
    answer = client.post(
        f"{T}/partitions", json={"partitionSpecs": [{"p": "c"}, {"p": "a"}, {"p": "c"}]}, headers=writer
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"created": [{"p": "c"}], "existed": [{"p": "a"}]}
    listed = _listed(client, reader)
    assert set(listed) == {"p=a", "p=b", "p=c"}
    assert listed["p=c"]["recordCount"] == listed["p=c"]["fileCount"] == 0
    assert listed["p=c"]["createdBy"] == "writer" and listed["p=c"]["createdAt"] > 0
    assert listed["p=c"]["done"] is False
    assert listed["p=a"]["recordCount"] == 2 and listed["p=a"]["createdBy"] is None
    again = client.post(f"{T}/partitions", json={"partitionSpecs": [{"p": "c"}]}, headers=writer)
    assert again.json() == {"created": [], "existed": [{"p": "c"}]}
    assert [e for e, _, _ in _runs(catalog, "create_partitions")] == ["started", "finished"] * 2
    assert _runs(catalog, "create_partitions")[1][1] == {"created": ["p=c"], "existed": ["p=a"]}
    assert _runs(catalog, "create_partitions")[1][2] == "writer"


def test_create_refusals_change_nothing(rig: Any, service_catalog: MetastoreCatalog) -> None:
    catalog, client, writer, reader = rig
    strict = client.post(
        f"{T}/partitions",
        json={"partitionSpecs": [{"p": "d"}, {"p": "b"}], "ignoreIfExists": False},
        headers=writer,
    )
    assert strict.status_code == 409
    assert strict.json() == {
        "message": "partition p=b of table db.t already exists",
        "resourceType": "PARTITION",
        "resourceName": "p=b",
        "code": 409,
    }
    for body, status, words in (
        ({"partitionSpecs": [{"x": "1"}]}, 400, "exactly the partition keys"),
        ({"partitionSpecs": [{"p": "c", "v": "1"}]}, 400, "exactly the partition keys"),
        ({"partitionSpecs": [{"p": 1}]}, 400, "partitionSpecs"),
        (
            {"partitionSpecs": [{"p": "c"}], "partitionStatistics": [], "replaceStatistics": False},
            501,
            "partitionStatistics",
        ),
    ):
        answer = client.post(f"{T}/partitions", json=body, headers=writer)
        assert answer.status_code == status, (body, answer.text)
        assert words in answer.json()["message"] and answer.json()["code"] == status
    assert (
        client.post(f"{T}/partitions", json={"partitionSpecs": [{"p": "c"}]}, headers=reader).status_code
        == 403
    )
    admin = auth(make_principal(catalog, "admin", [("admin", None, None)]))
    missing = client.post(
        f"{P}/databases/db/tables/nope/partitions", json={"partitionSpecs": []}, headers=admin
    )
    assert missing.status_code == 404 and missing.json()["resourceType"] == "TABLE"
    catalog.create_table("db.flat", SCHEMA)
    flat = client.post(
        f"{P}/databases/db/tables/flat/partitions", json={"partitionSpecs": [{"p": "c"}]}, headers=admin
    )
    assert flat.status_code == 400 and "no partition keys" in flat.json()["message"]
    assert _registered(catalog) == 0
    assert _runs(catalog, "create_partitions") == []


def test_mark_done_records_and_writes_the_success_file(rig: Any) -> None:
    catalog, client, writer, reader = rig
    answer = client.post(f"{T}/partitions/mark", json={"specs": [{"p": "a"}, {"p": "new"}]}, headers=writer)
    assert answer.status_code == 200 and answer.content == b""
    listed = _listed(client, reader)
    assert listed["p=a"]["done"] is True and listed["p=a"]["updatedBy"] == "writer"
    assert listed["p=new"]["done"] is True and listed["p=new"]["fileCount"] == 0
    assert listed["p=b"]["done"] is False
    table = catalog.get_table("db.t")
    first = json.loads(table.file_io.read(success_file_path(table, {"p": "a"})))
    assert first["creationTime"] == first["modificationTime"] > 0
    client.post(f"{T}/partitions/mark", json={"specs": [{"p": "a"}]}, headers=writer)
    second = json.loads(table.file_io.read(success_file_path(table, {"p": "a"})))
    assert second["creationTime"] == first["creationTime"]
    assert second["modificationTime"] >= first["modificationTime"]
    finished = [p for e, p, _ in _runs(catalog, "mark_done_partitions") if e == "finished"]
    assert finished[0]["actions"] == ["success-file"] and finished[0]["partitions"] == ["p=a", "p=new"]
    assert (
        client.post(f"{T}/partitions/mark", json={"specs": [{"p": "a"}]}, headers=reader).status_code == 403
    )


@pytest.mark.parametrize(
    ("action", "status", "named"),
    [
        ("http-report", 501, "http-report"),
        ("custom", 501, "custom"),
        ("no-such-action", 400, "no-such-action"),
    ],
)
def test_mark_done_refuses_actions_it_does_not_perform(
    rig: Any, action: str, status: int, named: str
) -> None:
    catalog, client, writer, reader = rig
    catalog.alter_table_changes("db.t", [SetOption("partition.mark-done-action", f"success-file,{action}")])
    answer = client.post(f"{T}/partitions/mark", json={"specs": [{"p": "a"}]}, headers=writer)
    assert answer.status_code == status and named in answer.json()["message"], answer.text
    assert not _listed(client, reader)["p=a"]["done"]
    table = catalog.get_table("db.t")
    assert not table.file_io.exists(success_file_path(table, {"p": "a"}))


def test_mark_done_adds_the_done_partition(rig: Any) -> None:
    catalog, client, writer, reader = rig
    catalog.alter_table_changes(
        "db.t", [SetOption("partition.mark-done-action", "done-partition,mark-event")]
    )
    assert (
        client.post(f"{T}/partitions/mark", json={"specs": [{"p": "a"}]}, headers=writer).status_code == 200
    )
    listed = _listed(client, reader)
    assert listed["p=a.done"]["fileCount"] == 0 and listed["p=a"]["done"] is True
    table = catalog.get_table("db.t")
    assert not table.file_io.exists(success_file_path(table, {"p": "a"}))


def test_list_by_names_in_the_order_asked(rig: Any) -> None:
    _, client, writer, reader = rig
    client.post(f"{T}/partitions", json={"partitionSpecs": [{"p": "c"}]}, headers=writer)
    answer = client.post(
        f"{T}/partitions/list-by-names", json={"specs": [{"p": "c"}, {"p": "zz"}, {"p": "a"}]}, headers=reader
    )
    assert answer.status_code == 200, answer.text
    assert [p["spec"] for p in answer.json()["partitions"]] == [{"p": "c"}, {"p": "a"}]
    bad = client.post(f"{T}/partitions/list-by-names", json={"specs": [{"q": "c"}]}, headers=reader)
    assert bad.status_code == 400 and "specs" in bad.json()["message"]


def test_listing_pages_registered_and_written_partitions(rig: Any) -> None:
    _, client, writer, reader = rig
    specs = [{"p": f"r{i:02d}"} for i in range(7)]
    client.post(f"{T}/partitions", json={"partitionSpecs": specs}, headers=writer)
    names: list[str] = []
    token = None
    while True:
        page = client.get(
            f"{T}/partitions",
            params={"maxResults": 4, **({"pageToken": token} if token else {})},
            headers=reader,
        ).json()
        assert len(page["partitions"]) <= 4
        names += ["p=" + p["spec"]["p"] for p in page["partitions"]]
        token = page["nextPageToken"]
        if token is None:
            break
    assert names == ["p=a", "p=b", *(f"p=r{i:02d}" for i in range(7))]
    assert set(_listed(client, reader, partitionNamePattern="p=r0%")) == {f"p=r{i:02d}" for i in range(7)}


def test_drop_is_one_overwrite_commit_then_the_registrations_go(rig: Any) -> None:
    catalog, client, writer, reader = rig
    client.post(f"{T}/partitions", json={"partitionSpecs": [{"p": "c"}]}, headers=writer)
    client.post(f"{T}/partitions/mark", json={"specs": [{"p": "a"}]}, headers=writer)
    before = catalog.get_table("db.t").latest_snapshot()
    assert before is not None
    answer = client.post(
        f"{T}/partitions/drop", json={"partitionSpecs": [{"p": "a"}, {"p": "c"}, {"p": "zz"}]}, headers=writer
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"dropped": [{"p": "a"}, {"p": "c"}], "missing": [{"p": "zz"}]}
    table = catalog.get_table("db.t")
    latest = table.latest_snapshot()
    assert latest is not None and latest.id == before.id + 1
    assert latest.commit_kind is CommitKind.OVERWRITE
    rows = table.new_read_builder().new_read().to_arrow(table.new_read_builder().new_scan().plan().splits())
    assert rows.sort_by("k").to_pydict() == {"k": [3], "p": ["b"], "v": ["z"]}
    assert set(_listed(client, reader)) == {"p=b"}
    assert _registered(catalog) == 0
    with catalog.engine.connect() as conn:
        events = conn.execute(
            text(
                "SELECT event_type, principal FROM paimon_commit_events WHERE snapshot_id = :s"
                " AND event_type = 'snapshot_published'"
            ),
            {"s": latest.id},
        ).all()
    assert [(e.event_type, e.principal) for e in events] == [("snapshot_published", "writer")]
    finished = [p for e, p, _ in _runs(catalog, "drop_partitions") if e == "finished"]
    assert finished == [{"dropped": ["p=a", "p=c"], "missing": ["p=zz"], "snapshot_id": latest.id}]


def test_drop_refusals_and_nothing_to_drop(rig: Any) -> None:
    catalog, client, writer, reader = rig
    before = catalog.get_table("db.t").latest_snapshot()
    assert before is not None
    strict = client.post(
        f"{T}/partitions/drop",
        json={"partitionSpecs": [{"p": "a"}, {"p": "zz"}], "ignoreIfNotExists": False},
        headers=writer,
    )
    assert strict.status_code == 404
    assert strict.json()["resourceType"] == "PARTITION" and strict.json()["resourceName"] == "p=zz"
    assert (
        client.post(f"{T}/partitions/drop", json={"partitionSpecs": [{"p": "a"}]}, headers=reader).status_code
        == 403
    )
    bad = client.post(f"{T}/partitions/drop", json={"partitionSpecs": [{}]}, headers=writer)
    assert bad.status_code == 400 and "partitionSpecs" in bad.json()["message"]
    only_missing = client.post(f"{T}/partitions/drop", json={"partitionSpecs": [{"p": "zz"}]}, headers=writer)
    assert only_missing.json() == {"dropped": [], "missing": [{"p": "zz"}]}
    after = catalog.get_table("db.t").latest_snapshot()
    assert after is not None and after.id == before.id  # nothing committed
    assert set(_listed(client, reader)) == {"p=a", "p=b"}


def test_drop_several_partitions_by_prefixes_in_one_commit(service_catalog: MetastoreCatalog) -> None:
    catalog = service_catalog
    catalog.create_database("db")
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("d", pa.string()), ("h", pa.string())])
    table = catalog.create_table("db.t", schema, partition_keys=["d", "h"])
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": [1, 2, 3, 4], "d": ["x", "x", "y", "y"], "h": ["1", "2", "1", "2"]}))
    commit.commit(write.prepare_commit())
    write.close()
    writer = auth(make_principal(catalog, "writer", [("write", "db", "t")]))
    with in_process_client(catalog) as client:
        answer = client.post(
            f"{T}/partitions/drop",
            json={"partitionSpecs": [{"h": "1", "d": "x"}, {"d": "y"}]},
            headers=writer,
        )
        assert answer.json() == {"dropped": [{"d": "x", "h": "1"}, {"d": "y"}], "missing": []}
        assert set(_listed(client, writer)) == {"d=x/h=2"}
    table = catalog.get_table("db.t")
    latest = table.latest_snapshot()
    assert latest is not None and latest.id == 2 and latest.commit_kind is CommitKind.OVERWRITE  # one commit
    rows = table.new_read_builder().new_read().to_arrow(table.new_read_builder().new_scan().plan().splits())
    assert rows.to_pydict()["k"] == [2]


def _leaf(function: str, *literals: str) -> dict[str, Any]:
    return {
        "kind": "LEAF",
        "transform": {"name": "FIELD_REF", "fieldRef": {"index": 0, "name": "p", "type": "STRING"}},
        "function": function,
        "literals": list(literals),
    }


def test_list_by_filter_pages_the_matches(rig: Any) -> None:
    _, client, writer, reader = rig
    client.post(f"{T}/partitions", json={"partitionSpecs": [{"p": "c"}, {"p": "d"}]}, headers=writer)
    pages, token = [], None
    while True:
        body: dict[str, Any] = {"filter": json.dumps(_leaf("IN", "a", "c", "d")), "maxResults": 2}
        answer = client.post(
            f"{T}/partitions/list-by-filter",
            json=body | ({"pageToken": token} if token else {}),
            headers=reader,
        )
        assert answer.status_code == 200, answer.text
        pages.append([p["spec"]["p"] for p in answer.json()["partitions"]])
        token = answer.json()["nextPageToken"]
        if token is None:
            break
    assert pages == [["a", "c"], ["d"]]
    patterned = client.post(
        f"{T}/partitions/list-by-filter",
        json={"filter": json.dumps(_leaf("NOT_EQUAL", "b")), "partitionNamePattern": "p=c%", "maxResults": 0},
        headers=reader,
    )
    assert [p["spec"] for p in patterned.json()["partitions"]] == [{"p": "c"}]
    for filter_text, words in (
        ("{", "filter is not JSON"),
        (json.dumps({**_leaf("EQUAL", "x"), "function": "NOPE"}), "NOPE"),
    ):
        bad = client.post(f"{T}/partitions/list-by-filter", json={"filter": filter_text}, headers=reader)
        assert bad.status_code == 400 and words in bad.json()["message"], bad.text
    unknown = _leaf("EQUAL", "x")
    unknown["transform"]["fieldRef"]["name"] = "v"
    refused = client.post(
        f"{T}/partitions/list-by-filter", json={"filter": json.dumps(unknown)}, headers=reader
    )
    assert refused.status_code == 400 and "not a partition key" in refused.json()["message"]
    missing = client.post(f"{T}/partitions/list-by-filter", json={}, headers=reader)
    assert missing.status_code == 400 and "filter" in missing.json()["message"]


def test_a_table_kept_as_metadata_only_is_refused_by_its_type(rig: Any) -> None:
    """A format table has no snapshots, consumers or Paimon partitions here: 501 naming its type, never
    an empty listing that reads as 'no partitions'."""
    catalog, client, _, _ = rig
    admin = auth(make_principal(catalog, "admin", [("admin", None, None)]))
    schema = {
        "fields": [{"id": 0, "name": "id", "type": "INT"}, {"id": 1, "name": "p", "type": "STRING"}],
        "partitionKeys": ["p"],
        "primaryKeys": [],
        "options": {"type": "format-table", "file.format": "csv"},
    }
    created = client.post(
        f"{P}/databases/db/tables",
        json={"identifier": {"database": "db", "object": "csv"}, "schema": schema},
        headers=admin,
    )
    assert created.is_success, created.text
    csv = f"{P}/databases/db/tables/csv"
    for method, path, body in (
        ("GET", "partitions", None),
        ("POST", "partitions", {"partitionSpecs": [{"p": "a"}]}),
        ("POST", "partitions/drop", {"partitionSpecs": [{"p": "a"}]}),
        ("POST", "partitions/mark", {"specs": [{"p": "a"}]}),
        ("POST", "partitions/list-by-names", {"specs": [{"p": "a"}]}),
        ("POST", "partitions/list-by-filter", {"filter": json.dumps(_leaf("EQUAL", "a"))}),
        ("GET", "snapshots", None),
        ("GET", "snapshots/LATEST", None),
        ("GET", "consumers", None),
        ("POST", "consumers/reset", {"consumerId": "c", "nextSnapshotId": 1}),
    ):
        answer = client.request(method, f"{csv}/{path}", json=body, headers=admin)
        assert answer.status_code == 501 and "format-table" in answer.json()["message"], (path, answer.text)
    assert _registered(catalog) == 0
