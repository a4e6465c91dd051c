"""Snapshots by version, the paged snapshot list and the table's consumers over HTTP in-process, with
the protocol's bodies and error bodies; expiration honours a consumer reset over HTTP."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.ops.expire import expire_snapshots
from paimon_meta.ops.tags import create_tag
from paimon_meta.table.consumers import ConsumerManager
from tests.fixtures.service import in_process_client, make_principal
from tests.service.helpers import P, auth, seed

pytestmark = pytest.mark.postgres

T = f"{P}/databases/db/tables/t"


def _append(catalog: MetastoreCatalog, k: int) -> None:
    wb = catalog.get_table("db.t").new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([k], pa.int64()), "p": ["a"], "v": ["x"]}))
    commit.commit(write.prepare_commit())
    write.close()


@pytest.fixture
def rig(service_catalog: MetastoreCatalog) -> Any:
    """db.t with snapshots 1..4 and tag ``first`` on 1."""
    service_catalog.create_database("db")
    seed(service_catalog)
    for k in (10, 11, 12):
        _append(service_catalog, k)
    create_tag(service_catalog, "db.t", "first", 1)
    writer = auth(make_principal(service_catalog, "writer", [("write", "db", "t")]))
    reader = auth(make_principal(service_catalog, "reader", [("read", "db", "t")]))
    with in_process_client(service_catalog) as client:
        yield service_catalog, client, writer, reader


def test_snapshot_by_id_tag_latest_earliest(rig: Any) -> None:
    catalog, client, _, reader = rig
    for version, expected in (("1", 1), ("3", 3), ("LATEST", 4), ("EARLIEST", 1), ("first", 1)):
        answer = client.get(f"{T}/snapshots/{version}", headers=reader)
        assert answer.status_code == 200, (version, answer.text)
        snapshot = answer.json()["snapshot"]
        assert snapshot["id"] == expected, version
        assert snapshot["commitKind"] == "APPEND" and "schemaId" in snapshot
    table = catalog.get_table("db.t")
    on_storage = json.loads(table.file_io.read(table.snapshot_manager.snapshot_path(2)))
    assert client.get(f"{T}/snapshots/2", headers=reader).json()["snapshot"] == on_storage
    for version in ("99", "no-such-tag", "latest", "-1"):
        answer = client.get(f"{T}/snapshots/{version}", headers=reader)
        assert answer.status_code == 404, version
        assert answer.json()["resourceType"] == "SNAPSHOT" and answer.json()["resourceName"] == version
    gone = client.get(f"{P}/databases/db/tables/nope/snapshots/1", headers=reader)
    assert gone.status_code in (403, 404)
    stranger = auth(make_principal(catalog, "stranger"))
    assert client.get(f"{T}/snapshots/1", headers=stranger).status_code == 403


def test_snapshot_list_pages_oldest_first(rig: Any) -> None:
    catalog, client, _, reader = rig
    first = client.get(f"{T}/snapshots", params={"maxResults": 3}, headers=reader).json()
    assert [s["id"] for s in first["snapshots"]] == [1, 2, 3] and first["nextPageToken"] == "3"
    second = client.get(f"{T}/snapshots", params={"maxResults": 3, "pageToken": "3"}, headers=reader).json()
    assert [s["id"] for s in second["snapshots"]] == [4] and second["nextPageToken"] is None
    everything = client.get(f"{T}/snapshots", headers=reader).json()
    assert [s["id"] for s in everything["snapshots"]] == [1, 2, 3, 4] and everything["nextPageToken"] is None
    for params, field in (({"maxResults": 0}, "maxResults"), ({"pageToken": "x"}, "pageToken")):
        answer = client.get(f"{T}/snapshots", params=params, headers=reader)
        assert answer.status_code == 400 and field in answer.json()["message"]
    expire_snapshots(catalog, "db.t", retain_min=2, retain_max=2, time_retained_ms=0)
    after = client.get(f"{T}/snapshots", params={"maxResults": 1}, headers=reader).json()
    assert [s["id"] for s in after["snapshots"]] == [3] and after["nextPageToken"] == "3"
    assert client.get(f"{T}/snapshots/EARLIEST", headers=reader).json()["snapshot"]["id"] == 3


def _consumers(client: Any, headers: dict[str, str], **params: Any) -> dict[str, Any]:
    answer = client.get(f"{T}/consumers", params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_consumers_reset_list_and_remove(rig: Any) -> None:
    catalog, client, writer, reader = rig
    assert _consumers(client, reader) == {"consumers": [], "nextPageToken": None}
    for cid, nxt in (("c1", 2), ("c2", 5), ("c0", 1)):  # 5: one past the latest, a consumer that read all
        answer = client.post(
            f"{T}/consumers/reset", json={"consumerId": cid, "nextSnapshotId": nxt}, headers=writer
        )
        assert answer.status_code == 200 and answer.content == b"", answer.text
    table = catalog.get_table("db.t")
    manager = ConsumerManager(table.file_io, table.path)
    assert json.loads(table.file_io.read(manager.path("c1"))) == {"nextSnapshot": 2}  # Java's file
    page = _consumers(client, reader, maxResults=2)
    assert page["consumers"] == [
        {"consumerId": "c0", "nextSnapshot": 1},
        {"consumerId": "c1", "nextSnapshot": 2},
    ]
    rest = _consumers(client, reader, maxResults=2, pageToken=page["nextPageToken"])
    assert rest == {"consumers": [{"consumerId": "c2", "nextSnapshot": 5}], "nextPageToken": None}
    removed = client.post(f"{T}/consumers/reset", json={"consumerId": "c0"}, headers=writer)
    assert removed.status_code == 200
    assert [c["consumerId"] for c in _consumers(client, reader)["consumers"]] == ["c1", "c2"]
    with catalog.engine.connect() as conn:
        runs = conn.execute(
            text(
                "SELECT payload, principal FROM paimon_maintenance_events"
                " WHERE operation = 'reset_consumer' AND event_type = 'finished' ORDER BY event_id"
            )
        ).all()
    assert [r.payload for r in runs][-1] == {"consumer": "c0", "previous": 1, "next_snapshot": None}
    assert {r.principal for r in runs} == {"writer"}


def test_consumer_reset_refusals(rig: Any) -> None:
    _, client, writer, reader = rig
    for body, status, kind, words in (
        ({"consumerId": "c1", "nextSnapshotId": 6}, 404, "SNAPSHOT", "no snapshot 6"),
        ({"consumerId": "c1", "nextSnapshotId": 0}, 400, None, "nextSnapshotId"),
        ({"consumerId": "a/b", "nextSnapshotId": 2}, 400, None, "consumer id"),
        ({"consumerId": "", "nextSnapshotId": 2}, 400, None, "consumerId"),
        ({"nextSnapshotId": 2}, 400, None, "consumerId"),
    ):
        answer = client.post(f"{T}/consumers/reset", json=body, headers=writer)
        assert answer.status_code == status, (body, answer.text)
        assert answer.json()["resourceType"] == kind and words in answer.json()["message"], answer.text
    denied = client.post(
        f"{T}/consumers/reset", json={"consumerId": "c1", "nextSnapshotId": 2}, headers=reader
    )
    assert denied.status_code == 403
    assert _consumers(client, reader)["consumers"] == []


def test_expiration_honours_a_reset_consumer(rig: Any) -> None:
    catalog, client, writer, _ = rig
    client.post(f"{T}/consumers/reset", json={"consumerId": "stream", "nextSnapshotId": 2}, headers=writer)
    report = expire_snapshots(catalog, "db.t", retain_min=1, time_retained_ms=0)
    assert report.expired == [1]  # 2.. are still to be read by the consumer
    client.post(f"{T}/consumers/reset", json={"consumerId": "stream", "nextSnapshotId": 4}, headers=writer)
    assert expire_snapshots(catalog, "db.t", retain_min=1, time_retained_ms=0).expired == [2, 3]
    back = client.post(
        f"{T}/consumers/reset", json={"consumerId": "stream", "nextSnapshotId": 3}, headers=writer
    )
    assert back.status_code == 404 and back.json()["resourceType"] == "SNAPSHOT"  # 3 has expired
