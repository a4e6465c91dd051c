"""The control plane on a branch: commit-messages with ``branch`` commit onto ``branch/branch-NAME/`` under
the table's lock, with their own exactly-once (dedupe per branch), pointer and events; main is untouched."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.metastore.branches import branch_pointers
from paimon_meta.ops import branches as branch_ops
from paimon_meta.ops import tags as tag_ops
from paimon_meta.serde.commit_message import serialize_commit_messages
from paimon_meta.table.paths import branch_path
from paimon_meta.table.snapshots import SnapshotManager
from tests.fixtures.service import make_principal
from tests.ops.helpers import create, prepare, read_keys
from tests.service.helpers import P, auth

pytestmark = pytest.mark.postgres

URL = f"{P}/databases/db/tables/t/commit-messages"


def _body(
    catalog: MetastoreCatalog, keys: list[int], user: str, identifier: int, **more: Any
) -> dict[str, Any]:
    raw = serialize_commit_messages(prepare(catalog.get_table("db.t"), keys, user=user), 14, table_buckets=2)
    return {
        "commitUser": user,
        "commitIdentifier": identifier,
        "messagesVersion": 14,
        "messages": base64.b64encode(raw).decode(),
        **more,
    }


def _branch_keys(catalog: MetastoreCatalog, name: str) -> list[int]:
    builder = catalog.get_table("db.t").branch(name).new_read_builder()
    return sorted(builder.new_read().to_arrow(builder.new_scan().plan().splits()).column("k").to_pylist())


def test_commit_messages_on_a_branch(service_client: TestClient, service_catalog: MetastoreCatalog) -> None:
    create(service_catalog)
    h = auth(make_principal(service_catalog, "spark", [("write", "db", "t")]))
    user = f"stream-{uuid.uuid4().hex[:6]}"
    assert service_client.post(URL, json=_body(service_catalog, [1], user, 1), headers=h).json() == {
        "snapshotIds": [1],
        "deduplicated": False,
    }
    tag_ops.create_tag(service_catalog, "db.t", "t1", 1)
    branch_ops.create_branch(service_catalog, "db.t", "b1", "t1")

    on_b1 = _body(service_catalog, [10], user, 2, branch="b1")
    first = service_client.post(URL, json=on_b1, headers=h)
    assert first.json() == {"snapshotIds": [2], "deduplicated": False}, first.text
    # the same identifier again on the branch: deduplicated there
    assert service_client.post(URL, json=on_b1, headers=h).json() == {
        "snapshotIds": [2],
        "deduplicated": True,
    }
    # ... but it was never committed on main: main takes it (dedupe is per branch)
    on_main = service_client.post(URL, json=_body(service_catalog, [20], user, 2), headers=h)
    assert on_main.json() == {"snapshotIds": [2], "deduplicated": False}
    assert service_client.post(
        URL, json=_body(service_catalog, [11], user, 3, branch="b1"), headers=h
    ).json() == {
        "snapshotIds": [3],
        "deduplicated": False,
    }
    assert _branch_keys(service_catalog, "b1") == [1, 10, 11]
    assert read_keys(service_catalog, identifier="db.t") == [1, 20]
    row = service_catalog.table_row("db.t")
    assert row.latest_snapshot_id == 2
    table = service_catalog.get_table("db.t")
    assert SnapshotManager(table.file_io, branch_path(table.path, "b1")).list_snapshot_ids() == [1, 2, 3]
    with service_catalog.engine.connect() as conn:
        assert [(p.branch, p.latest_snapshot_id) for p in branch_pointers(conn, row.table_id)] == [("b1", 3)]
        events = conn.execute(
            text(
                "SELECT branch, event_type, snapshot_id, principal FROM paimon_commit_events "
                "WHERE event_type IN ('snapshot_published', 'aborted') ORDER BY event_id"
            )
        ).all()
    assert [tuple(e) for e in events] == [
        ("main", "snapshot_published", 1, "spark"),
        ("b1", "snapshot_published", 2, "spark"),
        ("b1", "aborted", None, "spark"),  # the deduplicated re-send
        ("main", "snapshot_published", 2, "spark"),
        ("b1", "snapshot_published", 3, "spark"),
    ]
    missing = service_client.post(URL, json=_body(service_catalog, [9], user, 9, branch="nope"), headers=h)
    assert (missing.status_code, missing.json()["resourceType"]) == (404, "BRANCH"), missing.text
    bad = service_client.post(URL, json=_body(service_catalog, [9], user, 9, branch="a/b"), headers=h)
    assert bad.status_code == 400, bad.text
