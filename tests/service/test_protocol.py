"""The REST catalog protocol in-process: shapes pypaimon relies on, the commit's checks, and bad input
(4xx with the protocol's error body, nothing changed)."""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import UnsupportedError
from paimon_meta.table.read.scan import FileStoreScan
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.tags import TagManager
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, commit_body, seed, state_of_storage, write_delta

pytestmark = pytest.mark.postgres


@pytest.fixture
def admin(service_catalog: MetastoreCatalog) -> dict[str, str]:
    return auth(make_principal(service_catalog, "admin", [("admin", None, None)]))


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"message", "resourceType", "resourceName", "code"}
    assert body["code"] == status
    assert "Traceback" not in response.text and 'File "' not in response.text
    return body


def test_config_prefix_and_overrides(service_client: TestClient, admin: dict[str, str]) -> None:
    r = service_client.get("/v1/config", params={"warehouse": "paimon"}, headers=admin)
    assert r.json() == {
        "defaults": {
            "prefix": "paimon",
            "paimon-meta.storage-credentials": "off: clients use their own storage options",
        },
        "overrides": {"data-token.enabled": "false"},
    }
    # pypaimon 2.1.0 encodes the warehouse twice: "paimon" is unchanged, but a name with a space is not
    twice = urllib.parse.quote_plus(urllib.parse.quote_plus("paimon"))
    assert service_client.get(f"/v1/config?warehouse={twice}", headers=admin).status_code == 200
    _error(service_client.get("/v1/config", params={"warehouse": "other"}, headers=admin), 404)


def test_databases(service_client: TestClient, admin: dict[str, str]) -> None:
    for name in ("a1", "b2", "b3"):
        assert service_client.post(
            f"{P}/databases", content=json.dumps({"name": name}), headers=admin
        ).is_success
    body = _error(service_client.post(f"{P}/databases", json={"name": "a1"}, headers=admin), 409)
    assert body["resourceType"] == "DATABASE"
    first = service_client.get(f"{P}/databases", params={"maxResults": 2}, headers=admin).json()
    assert first == {"databases": ["a1", "b2"], "nextPageToken": "b2"}
    rest = service_client.get(f"{P}/databases", params={"maxResults": 2, "pageToken": "b2"}, headers=admin)
    assert rest.json() == {"databases": ["b3"], "nextPageToken": None}
    like = service_client.get(f"{P}/databases", params={"databaseNamePattern": "b%"}, headers=admin)
    assert like.json()["databases"] == ["b2", "b3"]
    assert service_client.post(
        f"{P}/databases/a1", json={"updates": {"owner": "ops"}, "removals": []}, headers=admin
    ).is_success
    got = service_client.get(f"{P}/databases/a1", headers=admin).json()
    assert got["name"] == "a1" and got["options"] == {"owner": "ops"} and got["location"].endswith("a1.db")
    assert service_client.delete(f"{P}/databases/a1", headers=admin).is_success
    assert _error(service_client.get(f"{P}/databases/a1", headers=admin), 404)["resourceType"] == "DATABASE"


def _create_table_body(name: str) -> dict[str, Any]:
    return {
        "identifier": {"database": "db", "object": name},
        "schema": {
            "fields": [
                {"id": 0, "name": "id", "type": "BIGINT NOT NULL"},
                {"id": 1, "name": "tags", "type": {"type": "ARRAY", "element": "STRING", "nullable": True}},
                {
                    "id": 2,
                    "name": "r",
                    "type": {"type": "ROW", "fields": [{"id": 3, "name": "x", "type": "INT"}]},
                },
            ],
            "partitionKeys": [],
            "primaryKeys": ["id"],
            "options": {"bucket": "2"},
            "comment": "c",
        },
    }


def test_tables_create_get_alter_rename_drop(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    service_client.post(f"{P}/databases", json={"name": "db"}, headers=admin)
    assert service_client.post(
        f"{P}/databases/db/tables", json=_create_table_body("t"), headers=admin
    ).is_success
    _error(service_client.post(f"{P}/databases/db/tables", json=_create_table_body("t"), headers=admin), 409)
    got = service_client.get(f"{P}/databases/db/tables/t", headers=admin).json()
    for key in ("id", "name", "path", "isExternal", "schemaId", "schema", "owner", "createdAt", "updatedBy"):
        assert got[key] is not None, key
    assert got["schemaId"] == 0 and got["schema"]["primaryKeys"] == ["id"]
    assert [f["name"] for f in got["schema"]["fields"]] == ["id", "tags", "r"]
    assert SchemaManager(service_catalog.file_io, got["path"]).schema(0).highest_field_id == 3

    changes = [
        {"action": "setOption", "key": "snapshot.num-retained.min", "value": "5"},
        {"action": "addColumn", "fieldNames": ["extra"], "dataType": "STRING", "comment": None, "move": None},
        {"action": "updateComment", "comment": "new"},
    ]
    assert service_client.post(
        f"{P}/databases/db/tables/t", json={"changes": changes}, headers=admin
    ).is_success
    got = service_client.get(f"{P}/databases/db/tables/t", headers=admin).json()
    assert got["schemaId"] == 1 and got["schema"]["comment"] == "new"
    assert got["schema"]["options"]["snapshot.num-retained.min"] == "5"
    assert got["schema"]["fields"][-1] == {"id": 4, "name": "extra", "type": "STRING"}
    # one ALTER, one schema file
    assert SchemaManager(service_catalog.file_io, got["path"]).list_ids() == [0, 1]
    # updateColumnType through Java's casts: INT -> BIGINT widens; STRING -> INT is refused (400) unless
    # explicit casts are allowed (they are by default: a string column may become INT, cast on read)
    widen = [
        {"action": "updateColumnType", "fieldNames": ["extra"], "newDataType": "INT", "keepNullability": True}
    ]
    assert service_client.post(
        f"{P}/databases/db/tables/t", json={"changes": widen}, headers=admin
    ).is_success
    got = service_client.get(f"{P}/databases/db/tables/t", headers=admin).json()
    assert got["schemaId"] == 2 and got["schema"]["fields"][-1]["type"] == "INT"
    to_array = [{"action": "updateColumnType", "fieldNames": ["extra"], "newDataType": "ARRAY<INT>"}]
    body = _error(
        service_client.post(f"{P}/databases/db/tables/t", json={"changes": to_array}, headers=admin), 400
    )
    assert "cannot be converted" in body["message"]
    of_key = [{"action": "updateColumnType", "fieldNames": ["id"], "newDataType": "STRING"}]
    _error(service_client.post(f"{P}/databases/db/tables/t", json={"changes": of_key}, headers=admin), 400)
    unsupported = [{"action": "dropPrimaryKey"}]
    body = _error(
        service_client.post(f"{P}/databases/db/tables/t", json={"changes": unsupported}, headers=admin), 501
    )
    assert "dropPrimaryKey" in body["message"]
    immutable = [{"action": "setOption", "key": "bucket", "value": "4"}]
    _error(service_client.post(f"{P}/databases/db/tables/t", json={"changes": immutable}, headers=admin), 400)
    assert SchemaManager(service_catalog.file_io, got["path"]).list_ids() == [0, 1, 2]

    listed = service_client.get(f"{P}/databases/db/tables", params={"tableNamePattern": "t%"}, headers=admin)
    assert listed.json() == {"tables": ["t"], "nextPageToken": None}
    rename = {"source": {"database": "db", "object": "t"}, "destination": {"database": "db", "object": "u"}}
    assert service_client.post(f"{P}/tables/rename", json=rename, headers=admin).is_success
    _error(service_client.get(f"{P}/databases/db/tables/t", headers=admin), 404)
    assert service_client.get(f"{P}/databases/db/tables/u", headers=admin).json()["path"] == got["path"]
    assert service_client.delete(f"{P}/databases/db/tables/u", headers=admin).is_success
    assert (
        _error(service_client.get(f"{P}/databases/db/tables/u", headers=admin), 404)["resourceType"]
        == "TABLE"
    )


def test_a_table_our_writer_cannot_write_is_served_and_refused_by_our_writer(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    """Its clients write it (pypaimon, Java): the service creates it and publishes their snapshots; this
    library's own writer refuses it by the option's name when asked to write."""
    service_client.post(f"{P}/databases", json={"name": "db"}, headers=admin)
    tables = {
        "pu": {"bucket": "2", "merge-engine": "aggregation", "aggregation.remove-record-on-delete": "true"},
        "dyn": {"bucket": "-1"},  # a primary-key table with dynamic buckets
        "av": {"bucket": "2", "file.format": "avro"},
        "de": {"bucket": "2", "data-evolution.enabled": "true"},
    }
    for name, options in tables.items():
        body = _create_table_body(name)
        body["schema"]["options"] = options
        assert service_client.post(f"{P}/databases/db/tables", json=body, headers=admin).is_success, name
        assert (
            service_client.get(f"{P}/databases/db/tables/{name}", headers=admin).json()["schema"]["options"][
                "bucket"
            ]
            == options["bucket"]
        )
    for name, option in (
        ("pu", "aggregation.remove-record-on-delete"),
        ("dyn", "bucket"),
        ("de", "data-evolution"),
    ):
        table = service_catalog.get_table(f"db.{name}")
        with pytest.raises(UnsupportedError, match=option):
            table.new_batch_write_builder().new_write()


def test_snapshot_before_and_after_commits(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    service_catalog.create_database("db")
    service_client.post(f"{P}/databases/db/tables", json=_create_table_body("e"), headers=admin)
    assert _error(service_client.get(f"{P}/databases/db/tables/e/snapshot", headers=admin), 404)[
        "resourceType"
    ] == ("SNAPSHOT")
    base = seed(service_catalog)
    got = service_client.get(f"{P}/databases/db/tables/t/snapshot", headers=admin).json()["snapshot"]
    assert got["snapshot"]["id"] == 1 and got["snapshot"]["uuid"] == base.uuid
    assert (got["recordCount"], got["fileCount"]) == (3, 2)  # the library's commit kept the statistics
    assert got["fileSizeInBytes"] > 0 and got["lastFileCreationTime"] > 0
    parts = service_client.get(f"{P}/databases/db/tables/t/partitions", headers=admin).json()
    assert [(p["spec"], p["recordCount"], p["fileCount"]) for p in parts["partitions"]] == [
        ({"p": "a"}, 2, 1),
        ({"p": "b"}, 1, 1),
    ]


def test_commit_publishes_and_records(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    base = seed(service_catalog)
    table_id = service_client.get(f"{P}/databases/db/tables/t", headers=admin).json()["id"]
    stats = [
        {
            "spec": {"p": "a"},
            "recordCount": -2,
            "fileSizeInBytes": -1,
            "fileCount": -1,
            "lastFileCreationTime": 0,
        },
        {
            "spec": {"p": "b"},
            "recordCount": -1,
            "fileSizeInBytes": -1,
            "fileCount": -1,
            "lastFileCreationTime": 0,
        },
    ]
    # The delta deletes every file (the statistics recorded are the server's, from the delta's entries;
    # the client's say the same here).
    delta = write_delta(service_catalog, "db.t", [], delete_live_of=base)
    body = commit_body(base, _table_id=table_id, _statistics=stats, deltaManifestList=delta)
    r = service_client.post(f"{P}/databases/db/tables/t/commit", content=json.dumps(body), headers=admin)
    assert r.json() == {"success": True}
    table = service_catalog.get_table("db.t")
    assert table.snapshot_manager.latest_snapshot_id() == 2
    assert table.snapshot_manager.snapshot(2).uuid == body["snapshot"]["uuid"]
    assert table.snapshot_manager.snapshot(2).commit_user == "rest-user"
    with service_catalog.engine.connect() as conn:
        events = conn.execute(
            text(
                "SELECT event_type, principal, payload->>'source' AS source, snapshot_id"
                " FROM paimon_commit_events WHERE commit_user = 'rest-user' ORDER BY event_id"
            )
        ).all()
    assert [(e.event_type, e.principal) for e in events] == [
        ("prepared", "admin"),
        ("conflict_checked", "admin"),
        ("snapshot_published", "admin"),
    ]
    assert events[0].source == "rest" and events[2].snapshot_id == 2
    parts = service_client.get(f"{P}/databases/db/tables/t/partitions", headers=admin).json()["partitions"]
    assert parts == []  # the deltas emptied both partitions

    # The same (user, identifier, kind) again, on the new base: pypaimon reuses it for every batch
    # commit of a write builder, so it is a new commit, not a duplicate.
    again = commit_body(table.snapshot_manager.snapshot(2))
    assert service_client.post(f"{P}/databases/db/tables/t/commit", json=again, headers=admin).json() == {
        "success": True
    }
    assert table.snapshot_manager.latest_snapshot_id() == 3


def test_stale_base_is_a_conflict_answer(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    base = seed(service_catalog)
    first = commit_body(base)
    assert service_client.post(f"{P}/databases/db/tables/t/commit", json=first, headers=admin).json()[
        "success"
    ]
    stale = commit_body(base)  # built on snapshot 1 again: its base is no longer the latest
    before = state_of_storage(service_catalog)
    r = service_client.post(f"{P}/databases/db/tables/t/commit", json=stale, headers=admin)
    assert r.status_code == 200 and r.json() == {"success": False}
    assert state_of_storage(service_catalog) == before
    metrics = service_client.get("/metrics", headers=admin).text
    for outcome in ("published", "conflict"):
        assert (
            f'paimon_meta_service_commits_total{{catalog="paimon",outcome="{outcome}",route="snapshot"}} 1.0'
            in metrics
        )
    with service_catalog.engine.connect() as conn:
        reasons = (
            conn.execute(
                text(
                    "SELECT payload->>'reason' FROM paimon_commit_events WHERE event_type = 'failed'"
                    " AND payload->>'error_type' = 'CommitConflict'"
                )
            )
            .scalars()
            .all()
        )
    assert len(reasons) == 1 and "not the base" in reasons[0]


def _bad_commits(service_catalog: MetastoreCatalog, base: Any) -> list[tuple[str, Any, int]]:
    other = seed(service_catalog, "db.other")
    huge = json.dumps(commit_body(base, properties={"pad": "x" * (2 << 20)}))
    return [
        ("malformed JSON", '{"snapshot": {', 400),
        ("snapshot not an object", json.dumps({"snapshot": 5}), 400),
        ("id of the wrong type", json.dumps(commit_body(base, id="two")), 400),
        ("statistics of the wrong type", json.dumps({**commit_body(base), "statistics": [{"spec": 1}]}), 400),
        ("over the body limit", huge, 413),
        (
            "another table's manifest list",
            json.dumps(commit_body(base, deltaManifestList=other.delta_manifest_list)),
            400,
        ),
        (
            "a path, not a file name",
            json.dumps(commit_body(base, baseManifestList="../../other/manifest/x")),
            400,
        ),
        ("not latest + 1", json.dumps(commit_body(base, id=5)), 400),
        ("unknown schema", json.dumps(commit_body(base, schemaId=7)), 400),
        ("unknown commit kind", json.dumps(commit_body(base, commitKind="MERGE")), 400),
        ("another table's id", json.dumps(commit_body(base, _table_id="nope")), 404),
    ]


def test_bad_commits_change_nothing(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    base = seed(service_catalog)
    cases = _bad_commits(service_catalog, base)
    before = state_of_storage(service_catalog)
    for what, content, status in cases:
        r = service_client.post(f"{P}/databases/db/tables/t/commit", content=content, headers=admin)
        body = _error(r, status)
        assert body["message"], what
        assert state_of_storage(service_catalog) == before, what
    # validation failures are refused before anything is recorded
    with service_catalog.engine.connect() as conn:
        assert (
            conn.execute(
                text("SELECT count(*) FROM paimon_commit_events WHERE commit_user = 'rest-user'")
            ).scalar()
            == 0
        )


def test_nul_in_a_commit_message_partition_is_refused_before_publishing(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    from paimon_meta.model.binary_row import serialize_row
    from paimon_meta.model.commit_message import CommitMessage, DataIncrement
    from paimon_meta.model.types import STRING
    from paimon_meta.serde.commit_message import CURRENT_VERSION, serialize_commit_messages
    from tests.commit.helpers import data_file

    seed(service_catalog)
    before = state_of_storage(service_catalog)
    message = CommitMessage(
        serialize_row(["a\x00"], [STRING()]), 0, 2, DataIncrement(new_files=(data_file(),))
    )
    body = {
        "commitUser": "u",
        "commitIdentifier": 1,
        "messagesVersion": CURRENT_VERSION,
        "messages": base64.b64encode(serialize_commit_messages([message])).decode(),
    }
    r = service_client.post(f"{P}/databases/db/tables/t/commit-messages", json=body, headers=admin)
    assert "partition" in _error(r, 400)["message"]
    assert state_of_storage(service_catalog) == before


def test_a_tag_name_too_long_for_its_file_is_refused_by_name(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    """``tag-<name>`` must fit in a file name: 252..255 characters passed the name check and failed at
    storage, answered as a storage outage (found by probing the fuzz test's ground)."""
    seed(service_catalog)
    url = f"{P}/databases/db/tables/t/tags"
    before = state_of_storage(service_catalog)
    message = _error(service_client.post(url, json={"tagName": "y" * 252}, headers=admin), 400)["message"]
    assert message.startswith("tagName: ") and "251" in message, message
    assert state_of_storage(service_catalog) == before
    assert service_client.get(url, headers=admin).json()["tags"] == []
    assert service_client.post(url, json={"tagName": "x" * 251}, headers=admin).status_code == 200


def test_a_refused_table_feature_is_a_documented_501(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    service_client.post(f"{P}/databases", json={"name": "db"}, headers=admin)
    body = _create_table_body("t")
    body["schema"]["options"] = {"bucket": "2", "type": "lance-table"}
    assert (
        "type='lance-table'"
        in _error(service_client.post(f"{P}/databases/db/tables", json=body, headers=admin), 501)["message"]
    )
    # not a Paimon table's file format at all: the caller's mistake
    body = _create_table_body("t")
    body["schema"]["options"] = {"bucket": "2", "file.format": "nope"}
    assert (
        "file.format='nope'"
        in _error(service_client.post(f"{P}/databases/db/tables", json=body, headers=admin), 400)["message"]
    )
    doc = service_client.get("/openapi.json", headers=admin).json()
    assert "501" in doc["paths"]["/v1/{prefix}/databases/{database}/tables"]["post"]["responses"]
    assert service_catalog.list_tables("db") == []


def test_nul_in_a_body_is_refused_by_name_and_writes_nothing(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    """Postgres' text and JSONB cannot hold U+0000: it was a 500 from the driver (found by the fuzz test:
    database options); now 400 naming the field, before anything is written."""
    base = seed(service_catalog)
    before = state_of_storage(service_catalog)
    table = f"{P}/databases/db/tables/t"
    for url, body, field in (
        (f"{P}/databases", {"name": "d", "options": {"k": "a\x00b"}}, "options"),
        (f"{P}/databases/db", {"updates": {"k\x00": "v"}, "removals": []}, "updates"),
        (f"{table}/commit", commit_body(base, commitUser="rest\x00user"), "snapshot"),
        (f"{table}/filter-committed", {"commitUser": "u\x00", "identifiers": [1]}, "commitUser"),
        (f"{table}/tags", {"tagName": "a\x00"}, "tagName"),
        (f"{table}/rollback", {"instant": {"type": "tag", "tagName": "\x00"}}, "instant"),
    ):
        message = _error(service_client.post(url, json=body, headers=admin), 400)["message"]
        assert message.startswith(f"{field}: ") and "NUL" in message, message
    assert state_of_storage(service_catalog) == before
    assert service_catalog.list_databases() == ["db"]
    assert dict(service_catalog.get_database("db").properties) == {}
    with service_catalog.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM paimon_maintenance_events")).scalar() == 0


@pytest.mark.parametrize("name", ["..", "a.b", "a'b", 'a"b', "a\x00b", "a b", "ä"])
def test_bad_identifiers_are_refused(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str], name: str
) -> None:
    seed(service_catalog)
    # dots encoded too: a client would otherwise resolve a ".." segment itself
    quoted = urllib.parse.quote(name, safe="").replace(".", "%2E")
    for response in (
        service_client.post(f"{P}/databases", json={"name": name}, headers=admin),
        service_client.get(f"{P}/databases/db/tables/{quoted}", headers=admin),
        service_client.post(f"{P}/databases/{quoted}/tables", json=_create_table_body("x"), headers=admin),
        service_client.post(
            f"{P}/databases/db/tables",
            json={**_create_table_body("x"), "identifier": {"database": "db", "object": name}},
            headers=admin,
        ),
    ):
        assert 400 <= response.status_code < 500, response.text
        _error(response, response.status_code)
    assert service_catalog.list_databases() == ["db"]
    assert service_catalog.list_tables("db") == ["t"]


def test_slash_in_a_name_never_reaches_another_resource(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    seed(service_catalog)
    r = service_client.get(f"{P}/databases/db/tables/t%2F..%2Fx/snapshot", headers=admin)
    assert 400 <= r.status_code < 500


def test_body_content_type_does_not_matter(service_client: TestClient, admin: dict[str, str]) -> None:
    for i, ctype in enumerate((None, "text/plain", "application/octet-stream")):
        headers = dict(admin)
        if ctype:
            headers["Content-Type"] = ctype
        r = service_client.post(f"{P}/databases", content=json.dumps({"name": f"d{i}"}), headers=headers)
        assert r.is_success, r.text


def test_unknown_route_and_method_use_the_error_body(
    service_client: TestClient, admin: dict[str, str]
) -> None:
    _error(service_client.get(f"{P}/nothing-here", headers=admin), 404)
    _error(service_client.put(f"{P}/databases", headers=admin), 405)
    _error(service_client.get("/v1/other-catalog/databases", headers=admin), 404)


def test_openapi_document_lists_the_protocol(service_client: TestClient, admin: dict[str, str]) -> None:
    doc = service_client.get("/openapi.json", headers=admin).json()
    paths = set(doc["paths"])
    for path in (
        "/v1/config",
        "/v1/{prefix}/databases",
        "/v1/{prefix}/databases/{database}/tables/{table}/commit",
        "/v1/{prefix}/databases/{database}/tables/{table}/snapshot",
        "/v1/{prefix}/databases/{database}/tables/{table}/partitions",
        "/v1/{prefix}/databases/{database}/tables/{table}/tags/{tag}",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in paths, path
    assert "CommitTableRequest" in doc["components"]["schemas"]


def test_ops_endpoints(service_client: TestClient, admin: dict[str, str]) -> None:
    assert service_client.get("/healthz").json()["status"] == "ok"
    # Ready or not, nothing else (no replica host, no revision: no token is needed to ask).
    assert service_client.get("/readyz").json() == {"status": "ready", "detail": {}}
    service_client.get(f"{P}/databases", headers=admin)
    metrics = service_client.get("/metrics", headers=admin).text
    assert (
        'paimon_meta_service_requests_total{method="GET",route="/v1/{prefix}/databases",status="200"}'
        in metrics
    )
    assert "paimon_meta_service_request_seconds_bucket" in metrics
    assert "paimon_meta_lock_wait_seconds" in metrics  # the event log's metrics follow
    assert service_client.get("/healthz").headers["x-request-id"]


def test_rollback_route(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    base = seed(service_catalog)
    for _ in range(2):
        latest = service_catalog.get_table("db.t").latest_snapshot()
        assert latest is not None
        service_client.post(f"{P}/databases/db/tables/t/commit", json=commit_body(latest), headers=admin)
    url = f"{P}/databases/db/tables/t/rollback"
    stale = {"instant": {"type": "snapshot", "snapshotId": 1}, "fromSnapshot": 2}
    assert _error(service_client.post(url, json=stale, headers=admin), 409)["message"]
    bad = {"instant": {"type": "watermark", "value": 3}}
    _error(service_client.post(url, json=bad, headers=admin), 400)
    missing = {"instant": {"type": "tag", "tagName": "nope"}}
    assert _error(service_client.post(url, json=missing, headers=admin), 404)["resourceType"] == "TAG"
    assert service_catalog.get_table("db.t").snapshot_manager.latest_snapshot_id() == 3
    ok = {"instant": {"type": "snapshot", "snapshotId": 1}, "fromSnapshot": 3}
    assert service_client.post(url, json=ok, headers=admin).status_code == 200
    got = service_client.get(f"{P}/databases/db/tables/t/snapshot", headers=admin).json()["snapshot"]
    assert got["snapshot"]["uuid"] == base.uuid and got["recordCount"] == 3
    # the next commit builds snapshot 2 again
    again = service_client.post(f"{P}/databases/db/tables/t/commit", json=commit_body(base), headers=admin)
    assert again.json() == {"success": True}


def test_tags(service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]) -> None:
    from paimon_meta.ops.expire import expire_snapshots
    from tests.ops.helpers import read_keys

    seed(service_catalog)
    table = service_catalog.get_table("db.t")
    for i in range(3):
        wb = table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(pa.table({"k": pa.array([10 + i], pa.int64()), "p": ["a"], "v": ["n"]}))
        wb.new_commit().commit(w.prepare_commit())
    url = f"{P}/databases/db/tables/t/tags"
    assert service_client.post(url, json={"tagName": "first", "snapshotId": 1}, headers=admin).is_success
    assert service_client.post(url, json={"tagName": "latest", "snapshotId": None}, headers=admin).is_success
    _error(service_client.post(url, json={"tagName": "first"}, headers=admin), 409)
    assert (
        _error(service_client.post(url, json={"tagName": "x", "snapshotId": 99}, headers=admin), 404)[
            "resourceType"
        ]
        == "SNAPSHOT"
    )
    _error(service_client.post(url, json={"tagName": "123"}, headers=admin), 400)  # numeric: a snapshot id
    _error(service_client.post(url, json={"tagName": "t", "timeRetained": "a while"}, headers=admin), 400)
    assert service_client.post(
        url, json={"tagName": "first", "ignoreIfExists": True}, headers=admin
    ).is_success
    kept = {"tagName": "kept", "snapshotId": 1, "timeRetained": "1d"}
    assert service_client.post(url, json=kept, headers=admin).is_success
    retained = service_client.get(f"{url}/kept", headers=admin).json()
    assert retained["tagTimeRetained"] == "PT24H" and retained["tagCreateTime"] > 0
    assert service_client.delete(f"{url}/kept", headers=admin).is_success
    assert service_client.get(url, headers=admin).json() == {
        "tags": ["first", "latest"],
        "nextPageToken": None,
    }
    got = service_client.get(f"{url}/first", headers=admin).json()
    assert got["tagName"] == "first" and got["snapshot"]["id"] == 1 and got["tagCreateTime"] > 0
    assert service_client.get(f"{url}/latest", headers=admin).json()["snapshot"]["id"] == 4
    # expiration keeps the tagged snapshot's files: time travel by tag still reads it
    report = expire_snapshots(service_catalog, "db.t", retain_min=1, retain_max=1, time_retained_ms=0)
    assert report.earliest_after == 4
    assert sorted(read_keys(service_catalog, identifier="db.t", snapshot=None)) == [1, 2, 3, 10, 11, 12]
    tag = TagManager(table.file_io, table.path).get("first").snapshot
    rb = table.new_read_builder()
    scan = FileStoreScan(table.manifest_reader, table.schema, tag)
    assert sorted(rb.new_read().to_arrow(scan.plan().splits()).column("k").to_pylist()) == [1, 2, 3]
    assert service_client.delete(f"{url}/first", headers=admin).is_success
    assert _error(service_client.get(f"{url}/first", headers=admin), 404)["resourceType"] == "TAG"
    with service_catalog.engine.connect() as conn:
        runs = conn.execute(
            text(
                "SELECT operation, principal FROM paimon_maintenance_events WHERE event_type = 'finished'"
                " AND operation LIKE '%tag' ORDER BY event_id"
            )
        ).all()
    assert [tuple(r) for r in runs] == [
        ("create_tag", "admin"),
        ("create_tag", "admin"),
        ("create_tag", "admin"),  # "kept", with its retention
        ("delete_tag", "admin"),
        ("delete_tag", "admin"),
    ]


def test_after_a_rollback_elsewhere_the_service_serves_and_builds_on_the_new_timeline(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin: dict[str, str]
) -> None:
    """Another process rolls the table back and commits a new snapshot 2: this service must neither show
    its cached old snapshot 2 nor accept a commit built on it (it would resurrect rolled-back data)."""
    from paimon_meta.ops.rollback import rollback

    url = f"{P}/databases/db/tables/t"
    seed(service_catalog)
    snapshots = service_catalog.get_table("db.t").snapshot_manager
    for _ in range(2):
        latest = snapshots.latest_snapshot()
        assert latest is not None
        assert service_client.post(f"{url}/commit", json=commit_body(latest), headers=admin).json()["success"]
        service_client.get(f"{url}/snapshot", headers=admin)  # cached by the service
    old_two = snapshots.snapshot(2)
    rollback(service_catalog, "db.t", snapshot_id=1)
    fresh = service_catalog.get_table("db.t").snapshot_manager
    one = fresh.snapshot(1)
    assert service_client.post(f"{url}/commit", json=commit_body(one), headers=admin).json()["success"]
    new_two = fresh.snapshot(2)
    assert new_two.uuid != old_two.uuid
    got = service_client.get(f"{url}/snapshot", headers=admin).json()["snapshot"]["snapshot"]
    assert got["uuid"] == new_two.uuid
    stale = service_client.post(f"{url}/commit", json=commit_body(old_two), headers=admin).json()
    assert stale["success"] is False
    assert fresh.latest_snapshot_id() == 2
