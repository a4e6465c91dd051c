"""The control plane: CommitMessages sent over HTTP are committed exactly as in-process commits."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import TableAlreadyExistsError
from paimon_meta.serde.commit_message import serialize_commit_messages
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from paimon_meta.table.schema_change import SetOption, alter
from tests.fixtures.service import in_process_client, make_principal
from tests.ops.helpers import create, prepare, read_keys
from tests.service.helpers import P, auth

pytestmark = pytest.mark.postgres

URL = f"{P}/databases/db/tables/t"


def _body(
    catalog: MetastoreCatalog,
    keys: list[int],
    user: str,
    identifier: int,
    *,
    version: int = 14,
    table: str = "db.t",
) -> dict[str, Any]:
    messages = prepare(catalog.get_table(table), keys, user=user)
    raw = serialize_commit_messages(messages, version, table_buckets=2)
    return {
        "commitUser": user,
        "commitIdentifier": identifier,
        "messagesVersion": version,
        "messages": base64.b64encode(raw).decode(),
    }


@pytest.fixture
def writer(service_catalog: MetastoreCatalog) -> dict[str, str]:
    create(service_catalog)
    return auth(make_principal(service_catalog, "spark", [("write", "db", "t")]))


def test_commit_dedupe_and_filter(
    service_client: TestClient, service_catalog: MetastoreCatalog, writer: dict[str, str]
) -> None:
    user = f"stream-{uuid.uuid4().hex[:6]}"
    first = service_client.post(
        f"{URL}/commit-messages", json=_body(service_catalog, [1, 2], user, 1), headers=writer
    )
    assert first.json() == {"snapshotIds": [1], "deduplicated": False}
    # the same identifier again (a driver that died before its checkpoint): deduplicated
    again = service_client.post(
        f"{URL}/commit-messages", json=_body(service_catalog, [1, 2], user, 1), headers=writer
    )
    assert again.json() == {"snapshotIds": [1], "deduplicated": True}
    second = service_client.post(
        f"{URL}/commit-messages", json=_body(service_catalog, [3], user, 2), headers=writer
    )
    assert second.json()["snapshotIds"] == [2]
    assert read_keys(service_catalog, identifier="db.t") == [1, 2, 3]
    pending = service_client.post(
        f"{URL}/filter-committed", json={"commitUser": user, "identifiers": [1, 2, 3, 4]}, headers=writer
    )
    assert pending.json() == {"identifiers": [3, 4]}
    history = service_client.get(f"{URL}/commits", params={"maxResults": 2}, headers=writer).json()
    assert [c["outcome"] for c in history["commits"]] == ["published", "aborted"]  # newest first
    assert all(c["principal"] == "spark" for c in history["commits"])
    rest = service_client.get(
        f"{URL}/commits", params={"pageToken": history["nextPageToken"]}, headers=writer
    )
    assert [c["snapshotId"] for c in rest.json()["commits"]] == [1] and rest.json()["nextPageToken"] is None


def test_java_version_3_messages(
    service_client: TestClient, service_catalog: MetastoreCatalog, writer: dict[str, str]
) -> None:
    body = _body(service_catalog, [5], "java-writer", 7, version=3)
    assert service_client.post(f"{URL}/commit-messages", json=body, headers=writer).json()["snapshotIds"] == [
        1
    ]
    assert read_keys(service_catalog, identifier="db.t") == [5]


def test_bad_messages_change_nothing(
    service_client: TestClient, service_catalog: MetastoreCatalog, writer: dict[str, str]
) -> None:
    good = _body(service_catalog, [1], "u", 1)
    for bad, field in (
        ({**good, "messages": "%%%"}, "messages"),
        ({**good, "messages": base64.b64encode(b"\x00\x00\x00\x05garbage").decode()}, "messages"),
        ({**good, "messagesVersion": 2}, "messagesVersion"),
        ({**good, "commitUser": ""}, "commitUser"),
    ):
        r = service_client.post(f"{URL}/commit-messages", json=bad, headers=writer)
        assert r.status_code == 400, r.text
        assert field in r.json()["message"]
    assert service_catalog.get_table("db.t").snapshot_manager.latest_snapshot_id() is None
    reader = auth(make_principal(service_catalog, "auditor", [("read", "db", None)]))
    assert service_client.post(f"{URL}/commit-messages", json=good, headers=reader).status_code == 403
    assert service_client.get(f"{URL}/commits", headers=reader).json() == {
        "commits": [],
        "nextPageToken": None,
    }


def test_a_commit_after_an_alter_uses_the_new_schema(
    service_client: TestClient, service_catalog: MetastoreCatalog, writer: dict[str, str]
) -> None:
    """The service shares one table object per table and schema: an ALTER (here straight on storage,
    as another engine would) must not leave commits on the old schema."""
    assert service_client.post(
        f"{URL}/commit-messages", json=_body(service_catalog, [1], "u", 1), headers=writer
    ).json()["snapshotIds"] == [1]
    alter(service_catalog.get_table("db.t"), [SetOption("snapshot.num-retained.max", "50")])
    assert service_client.post(
        f"{URL}/commit-messages", json=_body(service_catalog, [2], "u", 2), headers=writer
    ).json()["snapshotIds"] == [2]
    snapshots = service_catalog.get_table("db.t").snapshot_manager
    assert (snapshots.snapshot(1).schema_id, snapshots.snapshot(2).schema_id) == (0, 1)


def test_a_cached_table_row_follows_renames_and_re_creations(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    """The replica keeps a table's registry row between commits; every commit checks it under the lock.
    After a rename the old name is a 404 (the stale row is found before anything is published) and the
    new name commits; after a drop and re-creation the next commit goes to the new table."""
    create(service_catalog)
    writer = auth(make_principal(service_catalog, "spark", [("write", "db", None)]))

    def commit(table: str, keys: list[int], identifier: int, messages_of: str) -> Any:
        body = _body(service_catalog, keys, "u", identifier, table=messages_of)
        return service_client.post(
            f"{P}/databases/db/tables/{table}/commit-messages", json=body, headers=writer
        )

    assert commit("t", [1], 1, "db.t").json()["snapshotIds"] == [1]  # the row of db.t is cached now
    service_catalog.rename_table("db.t", "db.t2")
    stale = commit("t", [2], 2, "db.t2")
    assert stale.status_code == 404 and stale.json()["resourceType"] == "TABLE", stale.text
    history = service_client.get(f"{P}/databases/db/tables/t2/commits", headers=writer).json()["commits"]
    assert [c["outcome"] for c in history] == ["failed", "published"]  # newest first
    assert "read its row again" in history[0]["finalReason"]
    assert commit("t2", [3], 3, "db.t2").json()["snapshotIds"] == [2]  # the row of db.t2 is cached now
    assert read_keys(service_catalog, identifier="db.t2") == [1, 3]
    # the renamed table's files stay where they were: a new db.t may not adopt them
    with pytest.raises(TableAlreadyExistsError, match=r"holds the files of table db\.t2"):
        create(service_catalog)

    dropped = service_catalog.get_table("db.t2")
    service_catalog.drop_table("db.t2")  # purges .../t
    create(service_catalog, "db.t2")  # another table id, at .../t2
    again = commit("t2", [4], 1, "db.t2")
    assert again.json() == {"snapshotIds": [1], "deduplicated": False}, again.text
    assert read_keys(service_catalog, identifier="db.t2") == [4]
    # the attempt on the dropped row stopped before writing anything at the purged location
    assert [s.path for s in dropped.file_io.list_recursive(dropped.path)] == []


def test_commit_messages_answers_refusals_and_commits(service_catalog: MetastoreCatalog) -> None:
    """``commit-messages`` is served by its own route class (``CommitMessagesRoute``: no dependency
    solving, the body parsed straight from its bytes): refusals and errors still get the protocol's
    answers from the one exception handler, and the request is counted under the route's path."""
    create(service_catalog)
    writer = auth(make_principal(service_catalog, "spark", [("write", "db", None)]))
    reader = auth(make_principal(service_catalog, "auditor", [("read", "db", None)]))
    ops = auth(make_principal(service_catalog, "ops", [("admin", None, None)]))  # reads /metrics
    url = f"{P}/databases/db/tables/t/commit-messages"
    good = _body(service_catalog, [1], "u", 1, table="db.t")
    with in_process_client(service_catalog) as client:
        requests: list[tuple[str, Any, dict[str, str]]] = [
            (url, good, {}),  # no token
            (url, good, reader),  # no write grant
            (url, {**good, "messages": "%%%"}, writer),
            (url, {k: v for k, v in good.items() if k != "commitUser"}, writer),
            (url, {**good, "messagesVersion": "x"}, writer),
            (f"{P}/databases/db/tables/nope/commit-messages", good, writer),
            ("/v1/other/databases/db/tables/t/commit-messages", good, writer),
            (url, good, writer),
            (url, good, writer),  # deduplicated
        ]
        got = []
        for target, body, headers in requests:
            r = client.post(target, json=body, headers=headers)
            got.append((r.status_code, r.json()))
        malformed = client.post(url, content=b"{", headers=writer)
        assert malformed.status_code == 400 and "malformed JSON" in malformed.json()["message"]
        # Counted under the route's path (not as an unmatched request).
        route = 'route="/v1/{prefix}/databases/{database}/tables/{table}/commit-messages"'
        metrics = client.get("/metrics", headers=ops).text
        # every commit route is counted in the commits counter too, by outcome
        commits = {
            line.split(" ")[0]: float(line.split(" ")[1])
            for line in metrics.splitlines()
            if line.startswith("paimon_meta_service_commits_total{")
        }
        family = "paimon_meta_service_commits_total"
        assert commits == {
            f'{family}{{catalog="paimon",outcome="rejected",route="messages"}}': 2.0,  # %%%, nope
            f'{family}{{catalog="paimon",outcome="published",route="messages"}}': 2.0,
        }
        assert f'paimon_meta_service_requests_total{{method="POST",{route},status="200"}} 2.0' in (metrics)
    assert [status for status, _ in got] == [401, 403, 400, 400, 400, 404, 404, 200, 200]
    assert all(set(body) == {"message", "resourceType", "resourceName", "code"} for _, body in got[:7])
    assert got[2][1]["message"].startswith("messages: not base64")
    assert got[3][1]["message"] == "commitUser: Field required"  # named as FastAPI's validation names it
    assert got[4][1]["message"].startswith("messagesVersion: Input should be a valid integer")
    assert got[5][1]["resourceType"] == "TABLE"
    assert got[7][1] == {"snapshotIds": [1], "deduplicated": False}
    assert got[8][1] == {"snapshotIds": [1], "deduplicated": True}


def test_reads_and_commits_of_a_table_share_one_snapshot_cache(
    service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replica keeps one snapshot manager per table location for the REST routes and for the table
    objects commits use: a snapshot a commit-messages request published is served from memory."""
    create(service_catalog)
    settings = ServiceSettings(auth_cache_seconds=0, max_body_bytes=1 << 20)
    state = ServiceState(settings, service_catalog)
    writer = auth(make_principal(service_catalog, "spark", [("write", "db", None)]))
    with TestClient(create_app(settings, state=state), raise_server_exceptions=False) as client:
        body = _body(service_catalog, [1, 2], "u", 1)
        answer = client.post(f"{P}/databases/db/tables/t/commit-messages", json=body, headers=writer)
        assert answer.json()["snapshotIds"] == [1], answer.text
        row = service_catalog.table_row("db.t")
        manager = state.snapshot_manager(row)
        assert manager is state.commit_table(row).snapshot_manager

        def no_reads(path: str) -> bytes:
            raise AssertionError(f"read {path}")

        monkeypatch.setattr(manager.file_io, "read", no_reads)
        assert manager.snapshot(1).commit_identifier == 1
